package io.pacer.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.lang.reflect.Method;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
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
  /** How many limit-sized snapshots one trigger may observe from a delegate with a read limit. */
  static final int MAX_OBSERVATIONS_PER_TRIGGER = 100;

  final SparkSession session;
  final SparkDataStream delegate;
  final String sourceName;
  private final String queryOption;
  private final Map<String, String> pacerOptions;
  /** This source instance's id: a new one after every (re)start of the query. */
  private final String runId = UUID.randomUUID().toString();

  /** Observed snapshots after the last admitted one, oldest first. */
  private final ArrayDeque<OffsetSnapshot> pending = new ArrayDeque<>();
  /** Admitted snapshots whose batch is not committed yet, oldest first. */
  private final ArrayDeque<OffsetSnapshot> admitted = new ArrayDeque<>();
  Offset lastObserved;
  private long nextSeq;
  boolean availableNow;
  private boolean availableNowObserved;
  private boolean warned;
  /** When the delegate was last asked for its latest offset (-1: never). */
  private long lastLookMs = -1;
  private String queryName;

  PacedStream(SparkSession session, SparkDataStream delegate, String sourceName,
      String queryOption, Map<String, String> pacerOptions) {
    this.session = session;
    this.delegate = delegate;
    this.sourceName = sourceName;
    this.queryOption = queryOption;
    this.pacerOptions = Map.copyOf(pacerOptions);
  }

  /** The delegate's latest offset where it has no admission control (null: none yet). */
  abstract Offset plainLatestOffset();

  /** The snapshot {@code seq}: what could be measured of the delta {@code prev} to {@code next}. */
  abstract OffsetSnapshot measure(long seq, Offset prev, Offset next, long nowMs);

  /** Forwards one commit to the delegate. */
  abstract void commitDelegate(Offset end);

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

  public void stop() {
    delegate.stop();
  }

  public synchronized Map<String, String> metrics(Optional<Offset> latestConsumedOffset) {
    Map<String, String> metrics = new LinkedHashMap<>();
    if (delegate instanceof ReportsSourceMetrics) {
      metrics.putAll(((ReportsSourceMetrics) delegate).metrics(latestConsumedOffset));
    }
    metrics.put("pacer.query", String.valueOf(queryName));
    metrics.put("pacer.pendingSnapshots", Integer.toString(pending.size()));
    metrics.put("pacer.observedSnapshots", Long.toString(nextSeq));
    metrics.put("pacer.fallback", Boolean.toString(warned));
    return metrics;
  }

  @Override
  public String toString() {
    return getClass().getSimpleName() + "[query=" + queryName() + ", source=" + sourceName
        + ", delegate=" + delegate + "]";
  }

  // ---------------------------------------------------------------- the decision

  public synchronized Offset latestOffset(Offset start, ReadLimit limit) {
    observe(start, limit);
    if (pending.isEmpty()) {
      return start;
    }
    int end = consult(start, limit);
    if (end < 0 && availableNow) {
      end = 0; // availableNow stops at the first empty batch: never hold back there
    }
    end = capToLimit(end, limit);
    if (end < 0) {
      return start;
    }
    OffsetSnapshot last = null;
    for (int i = 0; i <= end; i++) {
      last = pending.pollFirst();
      admitted.addLast(last);
    }
    return last.offset;
  }

  /**
   * Asks the delegate for its latest offset; each change is one new snapshot. Under a read limit
   * the delegate advances at most one limit per call, so it is asked again (up to
   * {@link #MAX_OBSERVATIONS_PER_TRIGGER} times) until it stops advancing: pacer sees the whole
   * backlog as limit-sized snapshots, and lastProgress's latestOffset shows it.
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
    long nowMs = System.currentTimeMillis();
    long sinceMs = lastLookMs < 0 ? nowMs : lastLookMs;
    lastLookMs = nowMs;
    boolean limited = limit != null && !(limit instanceof ReadAllAvailable);
    List<Offset[]> deltas = new ArrayList<>();
    for (int i = 0; i < MAX_OBSERVATIONS_PER_TRIGGER; i++) {
      Offset next = observeOnce(limit);
      if (next == null || (lastObserved != null && next.json().equals(lastObserved.json()))) {
        break;
      }
      deltas.add(new Offset[] {lastObserved, next});
      lastObserved = next;
      if (!limited) {
        break;
      }
    }
    for (int i = 0; i < deltas.size(); i++) {
      long arrivalMs = sinceMs + (nowMs - sinceMs) * i / deltas.size();
      pending.addLast(measure(nextSeq++, deltas.get(i)[0], deltas.get(i)[1], arrivalMs));
    }
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

  /** The index into {@code pending} of the last snapshot to admit; -1 for none now. */
  private int consult(Offset start, ReadLimit limit) {
    String name = queryName();
    PacerDecider decider = PacerRegistry.lookup(name);
    if (decider == null) {
      return fallback("no pacer decider is registered for query \"" + name + "\"", null);
    }
    long seq;
    String refusal = null;
    try {
      JsonNode answer =
          OffsetSnapshot.JSON.readTree(decider.decide(name, request(name, start, limit)));
      if (answer.hasNonNull("error")) {
        refusal = answer.get("error").asText();
      }
      seq = answer.path("seq").asLong(-1);
      JsonNode pool = answer.get("pool");
      if (pool != null && !pool.isNull()) {
        // the stream thread submits the batch's jobs: its local property picks their pool
        session.sparkContext().setLocalProperty("spark.scheduler.pool", pool.asText());
      }
    } catch (Throwable failed) {
      return fallback("the pacer decider of query \"" + name + "\" failed", failed);
    }
    if (refusal != null) { // the query's pacer options are wrong: fail it, naming the problem
      throw new IllegalArgumentException("pacer: " + refusal);
    }
    PacerRegistry.recordDecision(name);
    if (seq < 0) {
      return -1;
    }
    int index = 0;
    for (OffsetSnapshot s : pending) {
      if (s.seq == seq) {
        return index;
      }
      index++;
    }
    return fallback("the pacer decider of query \"" + name + "\" answered seq " + seq
        + ", which is not pending", null);
  }

  private int fallback(String why, Throwable cause) {
    if (!warned) {
      warned = true;
      PacerRegistry.recordFallbackWarning(queryName());
      LOG.warn("{}: {}admitting every observed offset from now on, as plain Spark would (never"
          + " stalls, never drops)", this, why + (cause == null ? "; " : " (" + cause + "); "));
    }
    return pending.size() - 1;
  }

  private String request(String name, Offset start, ReadLimit limit) {
    ObjectNode req = OffsetSnapshot.JSON.createObjectNode();
    req.put("version", 2);
    req.put("query", name);
    req.put("query_id", session.sparkContext().getLocalProperty(QUERY_ID_PROPERTY));
    req.put("run", runId);
    req.put("batch_id", currentBatchId());
    req.put("source", sourceName);
    ObjectNode opts = req.putObject("options");
    pacerOptions.forEach(opts::put);
    if (start == null) {
      req.putNull("start");
    } else {
      req.put("start", start.json());
    }
    req.put("limit", String.valueOf(limit));
    req.put("available_now", availableNow);
    req.put("admissible", capToLimit(pending.size() - 1, limit) + 1);
    req.put("now", System.currentTimeMillis() / 1000.0);
    ArrayNode snaps = req.putArray("snapshots");
    for (OffsetSnapshot s : pending) {
      snaps.add(s.toJson());
    }
    return req.toString();
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
    if (id == null) {
      return -1L;
    }
    try {
      StreamingQuery query = session.streams().get(UUID.fromString(id));
      if (query == null) {
        return -1L;
      }
      // StreamingQueryWrapper.streamingQuery(), by name: the classes moved package between Spark
      // releases (4.3: execution.streaming.runtime)
      Object execution = query.getClass().getMethod("streamingQuery").invoke(query);
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
