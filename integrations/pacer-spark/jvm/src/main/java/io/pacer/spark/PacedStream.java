package io.pacer.spark;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.lang.reflect.Method;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.read.streaming.CompositeReadLimit;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadAllAvailable;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxBytes;
import org.apache.spark.sql.connector.read.streaming.ReadMaxFiles;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.apache.spark.sql.connector.read.streaming.SparkDataStream;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.streaming.StreamingQuery;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What {@link PacerSource} (a V1 {@code Source}) and {@link PacerMicroBatchStream} (a V2
 * {@code MicroBatchStream}) share: the snapshots observed from the delegate, the call to the
 * decider registered in {@link PacerRegistry}, the read-limit cap, the fallback, the commits per
 * admitted snapshot and the source metrics. A subclass says only how to ask its delegate for an
 * offset without admission control, how to measure a snapshot and how to commit to the delegate.
 *
 * <p>Spark calls every method here from the query's stream execution thread.
 */
abstract class PacedStream {

  private static final Logger LOG = LoggerFactory.getLogger(PacedStream.class);
  static final String QUERY_ID_PROPERTY = "sql.streaming.queryId";
  /** The version of the request JSON ({@code pacer_spark.jvm.decider.WIRE_VERSION} reads it). */
  static final int WIRE_VERSION = 6;
  /** How many limit-sized snapshots one trigger may observe from a delegate with a read limit. */
  static final int MAX_OBSERVATIONS_PER_TRIGGER = 100;
  /**
   * How many snapshots wait at most: a delegate with a read limit is not asked further while this
   * many are pending (a source whose offsets never run out, such as rate-micro-batch, would
   * otherwise grow the pending list, and each request, by a limit's worth per call, forever).
   */
  static final int MAX_PENDING = 100;
  /**
   * How many snapshots wait at most for a delegate without a read limit. Beyond {@link
   * #MAX_PENDING} such a delegate is still looked at, or the data that came after the hundredth
   * snapshot would stay out of every batch admitted meanwhile (a Kafka query at a 10 s deadline
   * filled 100 in 9 s and split each window into 9 s and 6 s batches); but sparsely (see {@link
   * #lookDue}), so the list grows with the log of the wait. This backstops a decider that never
   * admits.
   */
  static final int MAX_PENDING_UNLIMITED = 1000;
  /** {@code pacerSourcePart} of the source whose ask formed the batch (others' data joined it, or was taken in). */
  static final String FORMED = "formed";
  /** The last run start stamp handed out in this JVM ({@link #runStamp}). */
  private static final AtomicLong LAST_RUN_STAMP = new AtomicLong();

  final SparkSession session;
  final SparkDataStream delegate;
  final String sourceName;
  private final String queryOption;
  private final Map<String, String> pacerOptions;
  /** This source instance's id: a new one after every (re)start of the query. */
  private final String runId = UUID.randomUUID().toString();
  /**
   * When this source run started ({@link #runStamp}): sent with every request and the stop event, so
   * the driver orders the runs of a query by it, not by when their messages reach it.
   */
  private final long runStarted = runStamp();
  /** The line to the Python decider: bounded calls, progress and failed-open records. */
  private final DeciderChannel channel;

  /** Observed snapshots after the last admitted one, oldest first. */
  private final ArrayDeque<OffsetSnapshot> pending = new ArrayDeque<>();
  /** Admitted snapshots whose batch is not committed yet, oldest first. */
  private final ArrayDeque<OffsetSnapshot> admitted = new ArrayDeque<>();
  Offset lastObserved;
  private long nextSeq;
  boolean availableNow;
  private boolean availableNowObserved;
  /** Whether the query runs one batch ({@link #singleBatch}; null: not read yet). */
  private Boolean singleBatch;
  private boolean warned;
  /** When the delegate was last asked for its latest offset (-1: never). */
  private long lastLookMs = -1;
  private String queryName;
  /** Why the last consultation gave no answer (null: it answered). */
  private String lastFailure;
  private long fallbacks;
  /**
   * Whether this trigger's admission was made without the decider's answer: reported in the batch's
   * progress (metric {@code pacerUnanswered}), so the driver's listener does not complete the batch
   * it decided for a batch that ran otherwise.
   */
  private boolean admittedUnanswered;

  /** The driver's figures of the last batch it admitted, sent with its answer, for that batch's progress. */
  private Map<String, String> batchMetrics = Collections.emptyMap();

  /** The figures of the last consultation's answer (empty: it admitted nothing, or none came). */
  private Map<String, String> answered = Collections.emptyMap();
  /**
   * The Spark batch id of this run's first {@code latestOffset} (-1: unknown yet): a batch before it
   * was one Spark replayed from its offset log without asking any source.
   */
  private long firstBatchId = -1;
  /** How many requests this run sent: each request's number, so the driver drops one that comes late. */
  private long asks;
  /**
   * This source's folder in the query's checkpoint ({@code <checkpoint>/sources/<i>}, as Spark gives
   * it to the source; null when unknown): the driver keeps the query's service-time model beside it.
   */
  String sourceCheckpoint;

  PacedStream(SparkSession session, SparkDataStream delegate, String sourceName,
      String queryOption, Map<String, String> pacerOptions) {
    this.session = session;
    this.delegate = delegate;
    this.sourceName = sourceName;
    this.queryOption = queryOption;
    this.pacerOptions = Map.copyOf(pacerOptions);
    this.channel = new DeciderChannel(session, runId);
  }

  /**
   * A run start stamp: the wall clock in microseconds since the epoch, raised where needed to stay
   * above every stamp handed out before in this JVM, so a source run created after another (a
   * restart is created after its previous run stopped) always has the higher one, even when the
   * clock steps back or two runs start in one microsecond.
   */
  static long runStamp() {
    long now = System.currentTimeMillis() * 1000L;
    return LAST_RUN_STAMP.accumulateAndGet(now, (last, clock) -> Math.max(last + 1, clock));
  }

  /** This run's start stamp ({@link #runStamp}). */
  long runStarted() {
    return runStarted;
  }

  /** The delegate's latest offset where it has no admission control (null: none yet). */
  abstract Offset plainLatestOffset();

  /** The snapshot {@code seq}: what could be measured of the delta {@code prev} to {@code next}. */
  abstract OffsetSnapshot measure(long seq, Offset prev, Offset next, long nowMs);

  /** Forwards one commit to the delegate. */
  abstract void commitDelegate(Offset end);

  /** Adds what reading the data's own times cost to the source metrics (nothing by default). */
  void sourceTimeMetrics(Map<String, String> metrics) {
  }

  // ---------------------------------------------------------------- forwarded

  public ReadLimit getDefaultReadLimit() {
    return delegate instanceof SupportsAdmissionControl
        ? ((SupportsAdmissionControl) delegate).getDefaultReadLimit()
        : ReadLimit.allAvailable();
  }

  public synchronized void prepareForTriggerAvailableNow() {
    availableNow = true;
    if (delegate instanceof SupportsTriggerAvailableNow) {
      ((SupportsTriggerAvailableNow) delegate).prepareForTriggerAvailableNow();
    }
  }

  public synchronized Offset reportLatestOffset() {
    Offset reported = delegate instanceof SupportsAdmissionControl
        ? ((SupportsAdmissionControl) delegate).reportLatestOffset()
        : null;
    return reported != null ? reported : lastObserved;
  }

  /**
   * Commits every admitted snapshot up to {@code end} to the delegate in order, so that a source
   * that acts per log entry (FileStreamSource's cleanSource) sees each entry of a batch that
   * spans several.
   */
  public synchronized void commit(Offset end) {
    String endJson = end.json();
    if (admitted.stream().anyMatch(s -> s.json.equals(endJson))) {
      while (!admitted.isEmpty()) {
        OffsetSnapshot s = admitted.pollFirst();
        if (s.json.equals(endJson)) {
          break;
        }
        commitDelegate(s.offset);
      }
    }
    commitDelegate(end);
  }

  /** Tells the decider this run stopped (bounded; see {@link DeciderChannel}), then stops the delegate. */
  public void stop() {
    try {
      channel.stopped(queryName(), session.sparkContext().getLocalProperty(QUERY_ID_PROPERTY),
          pacerOptions, sourceName, firstBatchId, runStarted);
    } catch (RuntimeException failed) {
      LOG.warn("{}: telling the pacer decider that the query stopped failed: {}", this,
          failed.toString());
    } finally {
      PacerMetricsSource.stopped(queryName());
      delegate.stop();
    }
  }

  public synchronized Map<String, String> metrics(Optional<Offset> latestConsumedOffset) {
    Map<String, String> metrics = new LinkedHashMap<>();
    if (delegate instanceof ReportsSourceMetrics) {
      metrics.putAll(((ReportsSourceMetrics) delegate).metrics(latestConsumedOffset));
    }
    metrics.put("pacerQuery", String.valueOf(queryName));
    metrics.put("pacerPendingSnapshots", Integer.toString(pending.size()));
    metrics.put("pacerObservedSnapshots", Long.toString(nextSeq));
    metrics.put("pacerFallback", Boolean.toString(warned));
    metrics.put("pacerFallbacks", Long.toString(fallbacks));
    metrics.put("pacerFailedOpen", Long.toString(channel.failedOpenTotal()));
    metrics.put("pacerUnanswered", Boolean.toString(admittedUnanswered));
    metrics.putAll(batchMetrics); // the driver's figures of the last admitted batch (camelCase, pacer*)
    if (admittedUnanswered) {
      metrics.put("pacerReason", "fail-open");
    }
    sourceTimeMetrics(metrics);
    return metrics;
  }

  @Override
  public String toString() {
    return getClass().getSimpleName() + "[query=" + queryName() + ", source=" + sourceName
        + ", delegate=" + delegate + "]";
  }

  // ---------------------------------------------------------------- the decision

  public synchronized Offset latestOffset(Offset start, ReadLimit limit) {
    admittedUnanswered = false;
    batchMetrics = Collections.emptyMap(); // a trigger that admits none of this source's data shows no figures
    observe(start, limit);
    String queryId = session.sparkContext().getLocalProperty(QUERY_ID_PROPERTY);
    if (firstBatchId < 0) { // Spark asks every source at every trigger: this run's first ask of any source
      firstBatchId = currentBatchId();
    }
    if (pending.isEmpty()) {
      if (channel.hasReport(queryId)) { // a finished batch's progress or failed-open records
        consult(start, limit, queryId, currentBatchId());
      }
      return start;
    }
    long batchId = currentBatchId();
    int decided = consult(start, limit, queryId, batchId);
    int end = decided;
    String unanswered = lastFailure;
    if (end < 0 && availableNow) {
      end = 0; // availableNow stops at the first empty batch: never hold back there
      unanswered = unanswered != null ? unanswered : "availableNow admits at least one snapshot";
    }
    end = capToLimit(end, limit);
    if (end < 0) {
      return start;
    }
    List<OffsetSnapshot> taken = new ArrayList<>();
    for (int i = 0; i <= end; i++) {
      OffsetSnapshot s = pending.pollFirst();
      admitted.addLast(s);
      taken.add(s);
    }
    if (unanswered != null) { // admitted without the decider's answer: tell it later
      channel.recordFailedOpen(batchId, taken, unanswered);
    }
    admittedUnanswered = unanswered != null;
    if (admittedUnanswered) {
      batchMetrics = Collections.emptyMap();
      PacerMetricsSource.admitted(queryName(), batchMetrics, true);
    } else if (!answered.isEmpty()) { // each source with data in the batch shows its figures
      batchMetrics = answered;
      if (FORMED.equals(answered.getOrDefault("pacerSourcePart", FORMED))) { // counted once, where it formed
        PacerMetricsSource.admitted(queryName(), batchMetrics, false);
      }
    }
    return taken.get(taken.size() - 1).offset;
  }

  /**
   * Asks the delegate for its latest offset; each change is one new snapshot. Under a read limit
   * the delegate advances at most one limit per call, so it is asked again (up to
   * {@link #MAX_OBSERVATIONS_PER_TRIGGER} times) until it stops advancing or {@link #MAX_PENDING}
   * snapshots wait ({@link #MAX_PENDING_UNLIMITED} without a limit, looked at sparsely past {@link
   * #MAX_PENDING}: {@link #lookDue}): pacer sees the backlog as limit-sized snapshots, and lastProgress's
   * latestOffset shows how far it looked. A delegate that
   * jumps over several of its own batches at once (a file source restarted with a logged backlog)
   * has the jump cut at its batch boundaries ({@link #steps}), so no snapshot holds more than one
   * of the delegate's own limit-sized batches.
   *
   * <p>A snapshot's arrival is the earliest moment its data can have arrived: just after the
   * previous look, which saw none of it. Spark looks only between batches, so data that came
   * while a batch ran waited since that batch started; stamping it with the moment it was seen
   * would hide that wait from the deadline. Several snapshots seen in one look are spread evenly
   * between the previous look and now, oldest first (offsets grow with arrival).
   */
  private void observe(Offset start, ReadLimit limit) {
    if (lastObserved == null) {
      lastObserved = start;
    }
    long nowMs = nowMs();
    boolean limited = limit != null && !(limit instanceof ReadAllAvailable);
    if (!limited && !lookDue(nowMs)) {
      return; // the next look dates what came meanwhile from the last one
    }
    long sinceMs = lastLookMs < 0 ? nowMs : lastLookMs;
    lastLookMs = nowMs;
    int cap = limited ? MAX_PENDING : MAX_PENDING_UNLIMITED;
    List<Offset[]> deltas = new ArrayList<>();
    for (int i = 0; i < MAX_OBSERVATIONS_PER_TRIGGER && pending.size() + deltas.size() < cap; i++) {
      Offset next = observeOnce(limit);
      if (next == null || (lastObserved != null && next.json().equals(lastObserved.json()))) {
        break;
      }
      for (Offset step : steps(lastObserved, next, cap - pending.size() - deltas.size())) {
        deltas.add(new Offset[] {lastObserved, step});
        lastObserved = step;
      }
      if (!limited || !lastObserved.json().equals(next.json())) {
        break;
      }
    }
    for (int i = 0; i < deltas.size(); i++) {
      long arrivalMs = sinceMs + (nowMs - sinceMs) * i / deltas.size();
      pending.addLast(measure(nextSeq++, deltas.get(i)[0], deltas.get(i)[1], arrivalMs));
    }
  }

  /**
   * Whether a delegate without a read limit is looked at now: always while fewer than {@link
   * #MAX_PENDING} snapshots wait; beyond, once the last look is older than a {@link #MAX_PENDING}th
   * of the oldest snapshot's wait (what a batch admitted now would leave out came within the last 1 %
   * of that wait), and never at {@link #MAX_PENDING_UNLIMITED}.
   */
  private boolean lookDue(long nowMs) {
    if (pending.size() < MAX_PENDING) {
      return true;
    }
    if (pending.size() >= MAX_PENDING_UNLIMITED) {
      return false;
    }
    long waited = nowMs - pending.peekFirst().arrivalMs;
    return nowMs - lastLookMs >= waited / MAX_PENDING;
  }

  /** The clock of looks and requests, epoch milliseconds (a test sets its own). */
  long nowMs() {
    return System.currentTimeMillis();
  }

  /**
   * The offsets from {@code prev} (exclusive) to {@code next} (inclusive) a batch may end at, at
   * most {@code room} of them, oldest first; a delegate whose offsets cannot be cut answers
   * {@code [next]}. Where fewer than the whole way are returned, the rest is observed later.
   */
  List<Offset> steps(Offset prev, Offset next, int room) {
    return List.of(next);
  }

  private Offset observeOnce(ReadLimit limit) {
    if (delegate instanceof SupportsAdmissionControl) {
      return ((SupportsAdmissionControl) delegate).latestOffset(lastObserved, limit);
    }
    if (availableNow && availableNowObserved) {
      return lastObserved; // a plain delegate has no availableNow bound: stop at the first look
    }
    Offset got = plainLatestOffset();
    availableNowObserved = availableNow;
    return got;
  }

  /**
   * The index into {@code pending} of the last snapshot to admit; -1 for none now. Without an
   * answer (no decider, a failure, a timeout, a snapshot that is not pending) every pending
   * snapshot is admitted, as plain Spark would, and {@link #lastFailure} says why.
   */
  private int consult(Offset start, ReadLimit limit, String queryId, long batchId) {
    String name = queryName();
    lastFailure = null;
    answered = Collections.emptyMap();
    DeciderChannel.Answer answer = channel.ask(name, queryId, request(name, queryId, batchId, start, limit));
    if (answer.failure != null) {
      return fallback(answer.failure, answer.cause);
    }
    if (answer.pool != null) { // the stream thread submits the batch's jobs: its pool picks theirs
      session.sparkContext().setLocalProperty("spark.scheduler.pool", answer.pool);
    }
    if (answer.error != null) { // the query's pacer options are wrong: fail it, naming the problem
      throw new IllegalArgumentException("pacer: " + answer.error);
    }
    PacerRegistry.recordDecision(name);
    if (answer.seq < 0) {
      return -1;
    }
    int index = 0;
    for (OffsetSnapshot s : pending) {
      if (s.seq == answer.seq) {
        answered = answer.metrics;
        return index;
      }
      index++;
    }
    return fallback("the pacer decider of query \"" + name + "\" answered seq " + answer.seq
        + ", which is not pending", null);
  }

  private int fallback(String why, Throwable cause) {
    lastFailure = why + (cause == null ? "" : " (" + cause + ")");
    fallbacks++;
    if (!warned) {
      warned = true;
      PacerRegistry.recordFallbackWarning(queryName());
      LOG.warn("{}: {}; admitting what is pending without a decision, as plain Spark would (never"
          + " stalls, never drops; the driver is told later). Further fallbacks are logged at"
          + " DEBUG and counted in the source metric pacerFallbacks", this, lastFailure);
    } else {
      LOG.debug("{}: {}", this, lastFailure);
    }
    return pending.size() - 1;
  }

  private ObjectNode request(String name, String queryId, long batchId, Offset start, ReadLimit limit) {
    ObjectNode req = OffsetSnapshot.JSON.createObjectNode();
    req.put("version", WIRE_VERSION);
    req.put("query", name);
    req.put("query_id", queryId);
    req.put("run", runId);
    req.put("batch_id", batchId);
    req.put("ask", ++asks); // a call the driver sees after a later one of this run is stale
    req.put("first_batch_id", firstBatchId);
    req.put("run_started", runStarted); // orders this run among the query's runs (the driver's rule)
    req.put("trigger", triggerStamp(queryId));
    req.put("source", sourceName);
    req.put("source_checkpoint", sourceCheckpoint);
    ObjectNode opts = req.putObject("options");
    pacerOptions.forEach(opts::put);
    if (start == null) {
      req.putNull("start");
    } else {
      req.put("start", start.json());
    }
    req.put("limit", String.valueOf(limit));
    req.put("available_now", availableNow);
    req.put("caller_waiting", callerWaiting(queryId));
    req.put("single_batch", singleBatch(queryId));
    req.put("admissible", capToLimit(pending.size() - 1, limit) + 1);
    req.put("now", nowMs() / 1000.0);
    ArrayNode snaps = req.putArray("snapshots");
    for (OffsetSnapshot s : pending) {
      snaps.add(s.toJson());
    }
    return req;
  }

  /** Lowers {@code end} so the admitted snapshots stay within the delegate's read limit. */
  private int capToLimit(int end, ReadLimit limit) {
    if (end <= 0 || limit == null || limit instanceof ReadAllAvailable) {
      return end;
    }
    List<ReadLimit> limits = new ArrayList<>();
    if (limit instanceof CompositeReadLimit) {
      limits.addAll(List.of(((CompositeReadLimit) limit).getReadLimits()));
    } else {
      limits.add(limit);
    }
    int capped = end;
    for (ReadLimit one : limits) {
      capped = Math.min(capped, lastWithin(one));
    }
    return Math.max(capped, 0);
  }

  /** The last pending index whose running sum stays within {@code one}; 0 when unmeasurable. */
  private int lastWithin(ReadLimit one) {
    long cap;
    if (one instanceof ReadMaxRows) {
      cap = ((ReadMaxRows) one).maxRows();
    } else if (one instanceof ReadMaxFiles) {
      cap = ((ReadMaxFiles) one).maxFiles();
    } else if (one instanceof ReadMaxBytes) {
      cap = ((ReadMaxBytes) one).maxBytes();
    } else {
      return Integer.MAX_VALUE; // a lower bound (ReadMinRows) or unknown kind: the delegate's own
    }
    long sum = 0;
    int index = -1;
    for (OffsetSnapshot s : pending) {
      Long size = one instanceof ReadMaxRows ? s.rows
          : one instanceof ReadMaxFiles ? s.files : s.bytes;
      if (size == null) {
        return 0;
      }
      sum += size;
      if (sum > cap && index >= 0) {
        return index;
      }
      index++;
    }
    return index;
  }

  /** The id of the batch Spark is constructing (the stream's currentBatchId), -1 when unknown. */
  private long currentBatchId() {
    String id = session.sparkContext().getLocalProperty(QUERY_ID_PROPERTY);
    try {
      Object execution = execution(id);
      if (execution == null) {
        return -1L;
      }
      Method batchId;
      Object owner = execution;
      try { // StreamExecution.currentBatchId() of older releases (3.x)
        batchId = execution.getClass().getMethod("currentBatchId");
      } catch (NoSuchMethodException gone) {
        // 4.2 and 4.3 have none: the batch being constructed is the execution context's
        // (MicroBatchExecution.getLatestExecutionContext().batchId())
        owner = execution.getClass().getMethod("getLatestExecutionContext").invoke(execution);
        if (owner == null) {
          return -1L;
        }
        batchId = owner.getClass().getMethod("batchId");
      }
      return ((Number) batchId.invoke(owner)).longValue();
    } catch (ReflectiveOperationException | RuntimeException unknown) {
      LOG.debug("no current batch id for query {}", id, unknown);
    }
    return -1L;
  }

  /**
   * Whether a caller waits for this query's data right now ({@code processAllAvailable()} or
   * {@code awaitOffset} in another thread): Spark ends such a wait at the first trigger that finds
   * no new data, and a snapshot pacer holds looks like none, so the driver then drains what it
   * holds. Spark calls {@code latestOffset} holding the query's progress lock, so a waiter is
   * either parked on its condition or queued for the lock: neither can slip in between this look
   * and the trigger's end. False when the query or its lock cannot be read (Spark internals
   * moved), as before this check existed.
   */
  boolean callerWaiting(String queryId) {
    try {
      Object execution = execution(queryId);
      if (execution == null) {
        return false;
      }
      Object lock = method(execution, "awaitProgressLock").invoke(execution);
      Object condition = method(execution, "awaitProgressLockCondition").invoke(execution);
      if (!(lock instanceof java.util.concurrent.locks.ReentrantLock)
          || !(condition instanceof java.util.concurrent.locks.Condition)) {
        return false;
      }
      java.util.concurrent.locks.ReentrantLock progressLock =
          (java.util.concurrent.locks.ReentrantLock) lock;
      if (!progressLock.isHeldByCurrentThread()) {
        return progressLock.hasQueuedThreads();
      }
      return progressLock.hasWaiters((java.util.concurrent.locks.Condition) condition)
          || progressLock.hasQueuedThreads();
    } catch (ReflectiveOperationException | RuntimeException unknown) {
      LOG.debug("cannot tell whether a caller waits for query {}", queryId, unknown);
      return false;
    }
  }

  /**
   * Whether the query runs one batch and stops ({@code trigger(once=True)}, or {@code availableNow}
   * falling back to one batch where a source does not support it): Spark's {@code SingleBatchExecutor}.
   * Plain Spark reads everything available in that batch, so the driver drains what it holds. Read once
   * per run (the trigger never changes); false when it cannot be read.
   */
  boolean singleBatch(String queryId) {
    if (singleBatch == null) {
      try {
        Object execution = execution(queryId);
        if (execution == null) {
          return false;
        }
        Object executor = method(execution, "triggerExecutor").invoke(execution);
        if (executor == null) {
          return false;
        }
        singleBatch = executor.getClass().getSimpleName().startsWith("SingleBatchExecutor");
      } catch (ReflectiveOperationException | RuntimeException unknown) {
        LOG.debug("cannot tell the trigger of query {}", queryId, unknown);
        singleBatch = false;
      }
    }
    return singleBatch;
  }

  /**
   * When the trigger now running started (Spark's progress context, {@code currentTriggerStartTimestamp},
   * ms): the same for every source of the query asked in one trigger, another in the next one, even
   * when the batch id stays (a trigger that ran nothing). -1 when it cannot be read.
   */
  long triggerStamp(String queryId) {
    try {
      Object execution = execution(queryId);
      if (execution == null) {
        return -1L;
      }
      List<Object> owners = new ArrayList<>();
      try { // 4.x: the execution context of the batch being constructed holds the trigger's progress
        owners.add(method(execution, "getLatestExecutionContext").invoke(execution));
      } catch (NoSuchMethodException older) {
        // 3.x: the execution is its own progress reporter
      }
      owners.add(execution);
      for (Object owner : owners) {
        for (Class<?> c = owner == null ? null : owner.getClass(); c != null; c = c.getSuperclass()) {
          for (java.lang.reflect.Field f : c.getDeclaredFields()) {
            if (f.getName().endsWith("currentTriggerStartTimestamp") && f.getType() == long.class) {
              f.setAccessible(true);
              return f.getLong(owner);
            }
          }
        }
      }
    } catch (ReflectiveOperationException | RuntimeException unknown) {
      LOG.debug("no trigger start for query {}", queryId, unknown);
    }
    return -1L;
  }

  /**
   * The {@code StreamExecution} of query {@code queryId} in this source's session, null when unknown:
   * {@code StreamingQueryWrapper.streamingQuery()}, by name (the classes moved package between Spark
   * releases; 4.3: execution.streaming.runtime).
   */
  private Object execution(String queryId) throws ReflectiveOperationException {
    if (queryId == null) {
      return null;
    }
    StreamingQuery query = session.streams().get(UUID.fromString(queryId));
    return query == null ? null : query.getClass().getMethod("streamingQuery").invoke(query);
  }

  /** The no-argument method {@code name} of {@code owner}'s class or a superclass, made accessible. */
  private static Method method(Object owner, String name) throws NoSuchMethodException {
    for (Class<?> c = owner.getClass(); c != null; c = c.getSuperclass()) {
      try {
        Method m = c.getDeclaredMethod(name);
        m.setAccessible(true);
        return m;
      } catch (NoSuchMethodException notHere) {
        // look in the superclass
      }
    }
    throw new NoSuchMethodException(owner.getClass().getName() + "." + name + "()");
  }

  String queryName() {
    if (queryName != null) {
      return queryName;
    }
    String name = queryOption;
    if (name == null) {
      String id = session.sparkContext().getLocalProperty(QUERY_ID_PROPERTY);
      if (id == null) {
        return "<not started>";
      }
      name = id;
      try {
        StreamingQuery query = session.streams().get(UUID.fromString(id));
        if (query != null && query.name() != null) {
          name = query.name();
        }
      } catch (RuntimeException notFound) {
        LOG.debug("query {} not found in the session's StreamingQueryManager", id, notFound);
      }
    }
    queryName = name;
    return name;
  }
}
