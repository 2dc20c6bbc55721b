package io.pacer.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.InterruptedIOException;
import java.io.UncheckedIOException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.streaming.StreamingQuery;
import org.apache.spark.sql.streaming.StreamingQueryProgress;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One source run's line to its Python decider: every call bounded by the registration's timeout,
 * and what the decider must hear even when a call failed.
 *
 * <ul>
 *   <li>A call runs on a pooled daemon thread; the stream thread waits for it at most the
 *       registration's {@code timeoutMs}. An interrupt (Spark's {@code query.stop()}) ends the wait
 *       at once, as an interruption Spark recognises, so stopping never waits out pacer's gate.
 *   <li>Each admission the source made without the decider's answer (the call failed, timed out,
 *       answered a snapshot that is not pending, or {@code availableNow} forced one) is a
 *       <em>failed-open record</em>: the Spark batch id and the snapshots admitted. The records go
 *       with every later request (and with the stop event) until one is answered, so the driver's
 *       accounting stays exact and its next decision starts from the source's real state.
 *   <li>The query's progress entries not sent yet ({@code StreamingQuery.recentProgress}, read
 *       from the source's own session) go with the next request: the driver completes a batch from
 *       its Spark run id and batch id, whatever the query's name or session.
 * </ul>
 */
final class DeciderChannel {

  private static final Logger LOG = LoggerFactory.getLogger(DeciderChannel.class);
  /** Failed-open records kept for the driver at most; older ones are dropped, and counted. */
  static final int MAX_FAILED_OPEN = 256;
  /** Progress entries sent with one request at most (the newest). */
  static final int MAX_PROGRESS = 8;
  /** How long a stop event may take at most. */
  static final long STOP_TIMEOUT_MS = 5_000L;

  /**
   * Calls in flight to Python deciders at most, JVM-wide. A call that timed out keeps its thread
   * until Python answers (a blocking socket read ignores interrupts), so an unbounded pool would
   * grow by one thread per late answer; past this bound a call fails open at once instead.
   */
  static final int MAX_CALLS = 32;

  private static final ExecutorService CALLS = new ThreadPoolExecutor(0, MAX_CALLS, 30L,
      TimeUnit.SECONDS, new SynchronousQueue<>(), task -> {
        Thread t = new Thread(task, "pacer-decider-call");
        t.setDaemon(true);
        return t;
      });

  private final SparkSession session;
  private final String runId;
  private final ArrayDeque<ObjectNode> failedOpen = new ArrayDeque<>();
  private long failedOpenDropped;
  private long failedOpenTotal;
  private StreamingQueryProgress lastProgressSent;
  private StreamingQuery query;

  DeciderChannel(SparkSession session, String runId) {
    this.session = session;
    this.runId = runId;
  }

  /** The answer to one request; {@code failure} non-null when there was none. */
  static final class Answer {
    final long seq;
    final String pool;
    final String error;
    final String failure;
    final Throwable cause;
    /** The admitted batch's figures, for its progress (empty: none). */
    final Map<String, String> metrics;

    Answer(long seq, String pool, String error, String failure, Throwable cause,
        Map<String, String> metrics) {
      this.seq = seq;
      this.pool = pool;
      this.error = error;
      this.failure = failure;
      this.cause = cause;
      this.metrics = metrics;
    }

    static Answer failed(String why, Throwable cause) {
      return new Answer(-1, null, null, why, cause, Collections.emptyMap());
    }
  }

  /** Whether the driver has something to hear even without pending snapshots. */
  boolean hasReport(String queryId) {
    if (!failedOpen.isEmpty()) {
      return true;
    }
    StreamingQuery q = query(queryId); // asked on every idle trigger: the newest entry only, no copy
    StreamingQueryProgress last = q == null ? null : q.lastProgress();
    return last != null && last != lastProgressSent;
  }

  /**
   * Sends {@code request} (completed with the unsent progress and failed-open records) to the
   * decider of {@code name}; what was sent is marked delivered only when an answer came.
   */
  Answer ask(String name, String queryId, ObjectNode request) {
    PacerRegistry.Entry entry = PacerRegistry.lookupEntry(name, session);
    if (entry == null) {
      return Answer.failed("no pacer decider is registered for query \"" + name + "\"", null);
    }
    List<StreamingQueryProgress> progress = newProgress(queryId);
    ArrayNode sent = request.putArray("progress");
    for (StreamingQueryProgress p : progress) {
      sent.add(parse(p.json()));
    }
    StreamingQuery q = query(queryId);
    request.put("spark_run_id", q == null ? null : q.runId().toString());
    int records = failedOpen.size();
    putFailedOpen(request);
    String text = request.toString();
    String reply;
    try {
      reply = call(() -> entry.decider.decide(name, text), entry.timeoutMs);
    } catch (TimeoutException late) {
      return Answer.failed("the pacer decider of query \"" + name + "\" did not answer within "
          + entry.timeoutMs + " ms", null);
    } catch (ExecutionException failed) {
      return Answer.failed("the pacer decider of query \"" + name + "\" failed", failed.getCause());
    }
    try {
      JsonNode answer = OffsetSnapshot.JSON.readTree(reply);
      if (!progress.isEmpty()) {
        lastProgressSent = progress.get(progress.size() - 1);
      }
      for (int i = 0; i < records; i++) {
        failedOpen.pollFirst();
      }
      failedOpenDropped = 0;
      JsonNode pool = answer.get("pool");
      Map<String, String> metrics = new LinkedHashMap<>();
      JsonNode given = answer.path("metrics");
      if (given.isObject()) {
        Iterator<Map.Entry<String, JsonNode>> fields = given.fields();
        while (fields.hasNext()) {
          Map.Entry<String, JsonNode> f = fields.next();
          metrics.put(f.getKey(), f.getValue().asText());
        }
      }
      return new Answer(answer.path("seq").asLong(-1),
          pool == null || pool.isNull() ? null : pool.asText(),
          answer.hasNonNull("error") ? answer.get("error").asText() : null, null, null, metrics);
    } catch (Exception unreadable) {
      return Answer.failed("the pacer decider of query \"" + name + "\" answered " + reply,
          unreadable);
    }
  }

  /** Records an admission of {@code admitted} in Spark batch {@code batchId} made without an answer. */
  void recordFailedOpen(long batchId, List<OffsetSnapshot> admitted, String reason) {
    ObjectNode record = OffsetSnapshot.JSON.createObjectNode();
    record.put("batch_id", batchId);
    record.put("reason", reason);
    ArrayNode snaps = record.putArray("snapshots");
    for (OffsetSnapshot s : admitted) {
      snaps.add(s.toJson());
    }
    failedOpen.addLast(record);
    failedOpenTotal++;
    while (failedOpen.size() > MAX_FAILED_OPEN) {
      failedOpen.pollFirst();
      failedOpenDropped++;
    }
  }

  long failedOpenTotal() {
    return failedOpenTotal;
  }

  /**
   * Tells the decider of {@code name} that this run stopped (bounded, failures logged). The driver may
   * handle it after this wait gave up, past a later run's first ask: the event carries the run's
   * identity and order ({@code spark_run_id}, {@code query_id}, {@code first_batch_id}, {@code
   * run_started}) so that it settles this run's unanswered admissions whenever it comes.
   */
  void stopped(String name, String queryId, java.util.Map<String, String> options, String source,
      long firstBatchId, long runStarted) {
    PacerRegistry.Entry entry = PacerRegistry.lookupEntry(name, session);
    if (entry == null) {
      return;
    }
    ObjectNode event = OffsetSnapshot.JSON.createObjectNode();
    event.put("version", PacedStream.WIRE_VERSION);
    event.put("run", runId);
    event.put("query_id", queryId);
    StreamingQuery q = query(queryId);
    event.put("spark_run_id", q == null ? null : q.runId().toString());
    putFailedOpen(event);
    ObjectNode opts = event.putObject("options"); // a query whose every ask failed is registered from them
    options.forEach(opts::put);
    event.put("source", source);
    event.put("first_batch_id", firstBatchId);
    event.put("run_started", runStarted); // the driver may hear it after a later run's asks: it orders by it
    ArrayNode progress = event.putArray("progress"); // did the last batch's trigger end? the driver asks
    for (StreamingQueryProgress p : newProgress(queryId)) {
      progress.add(parse(p.json()));
    }
    String text = event.toString();
    boolean interrupted = Thread.interrupted(); // Spark stops a query by interrupting this thread
    try {
      call(() -> {
        entry.decider.stopped(name, text);
        return "";
      }, Math.min(entry.timeoutMs, STOP_TIMEOUT_MS));
    } catch (TimeoutException | ExecutionException | UncheckedIOException failed) {
      LOG.warn("pacer: could not tell the decider of query \"{}\" that run {} stopped: {}", name,
          runId, failed.toString());
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  private void putFailedOpen(ObjectNode node) {
    ArrayNode records = node.putArray("failed_open");
    failedOpen.forEach(records::add);
    node.put("failed_open_dropped", failedOpenDropped);
  }

  /**
   * Runs {@code work} on a pooled thread and waits at most {@code timeoutMs}. An interrupt of the
   * waiting thread (Spark stopping the query) is rethrown as an interruption Spark recognises.
   */
  private static String call(Callable<String> work, long timeoutMs)
      throws TimeoutException, ExecutionException {
    Future<String> future;
    try {
      future = CALLS.submit(work);
    } catch (RejectedExecutionException full) {
      throw new ExecutionException("pacer: " + MAX_CALLS + " decider calls are still waiting for Python"
          + " (earlier calls timed out); not calling again until one returns", full);
    }
    try {
      return future.get(timeoutMs, TimeUnit.MILLISECONDS);
    } catch (TimeoutException late) {
      future.cancel(true);
      throw late;
    } catch (InterruptedException stopping) {
      future.cancel(true);
      Thread.currentThread().interrupt();
      throw new UncheckedIOException(new InterruptedIOException(
          "pacer: the query was stopped while its source waited for the pacer decider"));
    }
  }

  /** The query's progress entries after the last one sent, oldest first (at most {@link #MAX_PROGRESS}). */
  private List<StreamingQueryProgress> newProgress(String queryId) {
    List<StreamingQueryProgress> fresh = new ArrayList<>();
    StreamingQuery q = query(queryId);
    if (q == null) {
      return fresh;
    }
    StreamingQueryProgress[] recent = q.recentProgress();
    int from = 0;
    for (int i = recent.length - 1; i >= 0; i--) {
      if (recent[i] == lastProgressSent) {
        from = i + 1;
        break;
      }
    }
    for (int i = Math.max(from, recent.length - MAX_PROGRESS); i < recent.length; i++) {
      fresh.add(recent[i]);
    }
    return fresh;
  }

  /** The running query of this source (its own session's manager), null before it is known. */
  private StreamingQuery query(String queryId) {
    if (query == null && queryId != null) {
      try {
        query = session.streams().get(UUID.fromString(queryId));
      } catch (RuntimeException notFound) {
        LOG.debug("query {} not found in the source's session", queryId, notFound);
      }
    }
    return query;
  }

  private static JsonNode parse(String json) {
    try {
      return OffsetSnapshot.JSON.readTree(json);
    } catch (Exception unreadable) {
      return OffsetSnapshot.JSON.getNodeFactory().textNode(json);
    }
  }
}
