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
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.read.streaming.CompositeReadLimit;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadAllAvailable;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxBytes;
import org.apache.spark.sql.connector.read.streaming.ReadMaxFiles;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.streaming.SerializedOffset;
import org.apache.spark.sql.execution.streaming.Source;
import org.apache.spark.sql.streaming.StreamingQuery;
import org.apache.spark.sql.types.StructType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A V1 streaming source that forwards everything to the source Spark built for
 * {@code pacer.source} and decides one thing: the offset each micro-batch ends at.
 *
 * <p>Every change of the delegate's latest offset is one {@link OffsetSnapshot} (a pacer dataset).
 * The Python decider registered for the query in {@link PacerRegistry} chooses the snapshot the
 * batch ends at, or none now. The delegate's read limit stays a cap: each snapshot is taken under
 * it, and a batch spans several snapshots only while their measured sum stays within it. Without a
 * decider (or when it fails) the source admits everything observed and warns once.
 *
 * <p>Spark calls every method here from the query's stream execution thread.
 */
public final class PacerSource implements Source, SupportsTriggerAvailableNow,
    ReportsSourceMetrics {

  private static final Logger LOG = LoggerFactory.getLogger(PacerSource.class);
  private static final String QUERY_ID_PROPERTY = "sql.streaming.queryId";
  /** How many limit-sized snapshots one trigger may observe from a delegate with a read limit. */
  static final int MAX_OBSERVATIONS_PER_TRIGGER = 100;

  private final SparkSession session;
  private final Source delegate;
  private final String sourceName;
  private final String queryOption;
  private final Map<String, String> pacerOptions;
  private final boolean fileSource;
  /** This source instance's id: a new one after every (re)start of the query. */
  private final String runId = UUID.randomUUID().toString();

  /** Observed snapshots after the last admitted one, oldest first. */
  private final ArrayDeque<OffsetSnapshot> pending = new ArrayDeque<>();
  /** Admitted snapshots whose batch is not committed yet, oldest first. */
  private final ArrayDeque<OffsetSnapshot> admitted = new ArrayDeque<>();
  private Offset lastObserved;
  private long nextSeq;
  private boolean availableNow;
  private boolean availableNowObserved;
  private boolean warned;
  private String queryName;
  /** The delegate's starting offsets as JSON (see {@link #startingOffsetsJson}); read once. */
  private String startingJson;
  private boolean startingJsonRead;

  PacerSource(SparkSession session, Source delegate, String sourceName, String queryOption,
      Map<String, String> pacerOptions) {
    this.session = session;
    this.delegate = delegate;
    this.sourceName = sourceName;
    this.queryOption = queryOption;
    this.pacerOptions = Map.copyOf(pacerOptions);
    this.fileSource = delegate.getClass().getName().endsWith(".FileStreamSource");
  }

  // ---------------------------------------------------------------- forwarded

  @Override
  public StructType schema() {
    return delegate.schema();
  }

  @Override
  public Option<org.apache.spark.sql.execution.streaming.Offset> getOffset() {
    throw new UnsupportedOperationException("PacerSource supports admission control: Spark calls"
        + " latestOffset(start, limit), never getOffset()");
  }

  @Override
  public Dataset<Row> getBatch(Option<org.apache.spark.sql.execution.streaming.Offset> start,
      org.apache.spark.sql.execution.streaming.Offset end) {
    return delegate.getBatch(start, end);
  }

  @Override
  public Offset initialOffset() {
    return delegate.initialOffset();
  }

  @Override
  public Offset deserializeOffset(String json) {
    return delegate.deserializeOffset(json);
  }

  @Override
  public ReadLimit getDefaultReadLimit() {
    return delegate instanceof SupportsAdmissionControl
        ? ((SupportsAdmissionControl) delegate).getDefaultReadLimit()
        : ReadLimit.allAvailable();
  }

  @Override
  public synchronized void prepareForTriggerAvailableNow() {
    availableNow = true;
    if (delegate instanceof SupportsTriggerAvailableNow) {
      ((SupportsTriggerAvailableNow) delegate).prepareForTriggerAvailableNow();
    }
  }

  @Override
  public synchronized Offset reportLatestOffset() {
    Offset reported = delegate instanceof SupportsAdmissionControl
        ? ((SupportsAdmissionControl) delegate).reportLatestOffset()
        : null;
    return reported != null ? reported : lastObserved;
  }

  @Override
  public void commit(org.apache.spark.sql.execution.streaming.Offset end) {
    commit((Offset) end);
  }

  /**
   * Commits every admitted snapshot up to {@code end} to the delegate in order, so that a source
   * that acts per log entry (FileStreamSource's cleanSource) sees each entry of a batch that
   * spans several.
   */
  @Override
  public synchronized void commit(Offset end) {
    String endJson = end.json();
    boolean known = admitted.stream().anyMatch(s -> s.json.equals(endJson));
    if (known) {
      while (!admitted.isEmpty()) {
        OffsetSnapshot s = admitted.pollFirst();
        if (s.json.equals(endJson)) {
          delegate.commit(asV1(end));
          return;
        }
        delegate.commit(asV1(s.offset));
      }
    }
    delegate.commit(asV1(end)); // a V1 Source takes only its V1 overload
  }

  @Override
  public void stop() {
    delegate.stop();
  }

  @Override
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
    return "PacerSource[query=" + queryName() + ", source=" + sourceName + ", delegate=" + delegate
        + "]";
  }

  // ---------------------------------------------------------------- the decision

  @Override
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
   */
  private void observe(Offset start, ReadLimit limit) {
    if (lastObserved == null) {
      lastObserved = start;
    }
    boolean limited = limit != null && !(limit instanceof ReadAllAvailable);
    for (int i = 0; i < MAX_OBSERVATIONS_PER_TRIGGER; i++) {
      Offset next = observeOnce(limit);
      if (next == null || (lastObserved != null && next.json().equals(lastObserved.json()))) {
        return;
      }
      pending.addLast(measure(lastObserved, next));
      lastObserved = next;
      if (!limited) {
        return;
      }
    }
  }

  private Offset observeOnce(ReadLimit limit) {
    if (delegate instanceof SupportsAdmissionControl) {
      return ((SupportsAdmissionControl) delegate).latestOffset(lastObserved, limit);
    }
    if (availableNow && availableNowObserved) {
      return lastObserved; // a plain Source has no availableNow bound: stop at the first look
    }
    Option<org.apache.spark.sql.execution.streaming.Offset> got = delegate.getOffset();
    availableNowObserved = availableNow;
    return got.isDefined() ? got.get() : null;
  }

  private OffsetSnapshot measure(Offset prev, Offset next) {
    long now = System.currentTimeMillis();
    long seq = nextSeq++;
    if (fileSource) {
      try {
        Dataset<Row> batch = delegate.getBatch(
            prev == null ? Option.empty() : Option.apply(asV1(prev)), asV1(next));
        // the analyzed plan only: optimizing a streaming relation outside the query is refused
        LogicalPlan plan =
            ((org.apache.spark.sql.classic.Dataset<Row>) batch).queryExecution().analyzed();
        long files = 0;
        long bytes = 0;
        for (LogicalPlan leaf : CollectionConverters.asJava(plan.collectLeaves())) {
          if (leaf instanceof LogicalRelation
              && ((LogicalRelation) leaf).relation() instanceof HadoopFsRelation) {
            HadoopFsRelation relation = (HadoopFsRelation) ((LogicalRelation) leaf).relation();
            files += relation.location().inputFiles().length;
            bytes += relation.location().sizeInBytes();
          }
        }
        return new OffsetSnapshot(seq, next, now, null, files, bytes, false);
      } catch (Exception unmeasured) { // AnalysisException is a checked exception in Java's eyes
        LOG.warn("cannot measure snapshot {} of {}: {}", seq, sourceName, unmeasured.toString());
        return new OffsetSnapshot(seq, next, now, null, null, null, false);
      }
    }
    Long rows = OffsetSnapshot.partitionOffsetRows(
        prev == null ? startingOffsetsJson() : prev.json(), next.json());
    Long bytes = rows == null ? null : rows * (long) delegate.schema().defaultSize();
    return new OffsetSnapshot(seq, next, now, rows, null, bytes, true);
  }

  /**
   * Where a query without a committed offset starts, as {@code {topic: {partition: offset}}}, so
   * that its first snapshot is measured too; null where unknown.
   *
   * <p>Kafka's V1 source resolves its {@code startingOffsets} (earliest, latest, per partition, by
   * timestamp) once, on its first {@code latestOffset}, into the private lazy value
   * {@code initialPartitionOffsets} (also written to its metadata log), and starts its first batch
   * there: read it by reflection, as a map of Kafka {@code TopicPartition} to offset. Any other
   * delegate has no such member and gets null (its first snapshot's rows stay unknown).
   */
  private String startingOffsetsJson() {
    if (startingJsonRead) {
      return startingJson;
    }
    startingJsonRead = true;
    Method initial;
    try {
      initial = delegate.getClass().getDeclaredMethod("initialPartitionOffsets");
    } catch (NoSuchMethodException notKafka) {
      return null;
    }
    try {
      initial.setAccessible(true);
      Object offsets = initial.invoke(delegate);
      if (!(offsets instanceof scala.collection.Map)) {
        return null;
      }
      @SuppressWarnings("unchecked")
      Map<Object, Object> byPartition =
          CollectionConverters.asJava((scala.collection.Map<Object, Object>) offsets);
      ObjectNode json = OffsetSnapshot.JSON.createObjectNode();
      for (Map.Entry<Object, Object> e : byPartition.entrySet()) {
        Object partition = e.getKey();
        String topic = (String) partition.getClass().getMethod("topic").invoke(partition);
        Object number = partition.getClass().getMethod("partition").invoke(partition);
        ObjectNode perTopic = json.has(topic) ? (ObjectNode) json.get(topic) : json.putObject(topic);
        perTopic.put(String.valueOf(number), ((Number) e.getValue()).longValue());
      }
      startingJson = json.toString();
    } catch (ReflectiveOperationException | RuntimeException unreadable) {
      LOG.debug("cannot read the starting offsets of {}", delegate, unreadable);
    }
    return startingJson;
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
      JsonNode answer = OffsetSnapshot.JSON.readTree(decider.decide(name, request(name, start, limit)));
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

  private String queryName() {
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

  private static org.apache.spark.sql.execution.streaming.Offset asV1(Offset offset) {
    return offset instanceof org.apache.spark.sql.execution.streaming.Offset
        ? (org.apache.spark.sql.execution.streaming.Offset) offset
        : SerializedOffset.apply(offset.json());
  }
}
