package io.pacer.spark;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.hadoop.fs.FileStatus;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.PartitioningAwareFileIndex;
import org.apache.spark.sql.execution.streaming.SerializedOffset;
import org.apache.spark.sql.execution.streaming.Source;
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
 * batch ends at, or none now (the logic shared with the V2 {@link PacerMicroBatchStream} is in
 * {@link PacedStream}). Here: the V1 forwarding, and the measure of a snapshot (files and bytes of
 * a file source's batch, rows of Kafka's partition offsets).
 */
public final class PacerSource extends PacedStream implements Source,
    SupportsTriggerAvailableNow, ReportsSourceMetrics {

  private static final Logger LOG = LoggerFactory.getLogger(PacerSource.class);
  /** A Kafka jump of more rows than this is cut into pieces ({@link #kafkaSteps}). */
  static final long KAFKA_PIECE_ROWS = 4096;
  /** Into at most this many pieces. */
  static final int KAFKA_PIECES = 16;
  /** Of which at most this many parts by its records' times, the rest by rows. */
  static final int KAFKA_TIME_PIECES = 8;

  private final Source source;
  private final boolean fileSource;
  /** The delegate's starting offsets as JSON (see {@link #startingOffsetsJson}); read once. */
  private String startingJson;
  private boolean startingJsonRead;
  /** Reads the Kafka timestamps of a Kafka delegate's snapshots (null for any other delegate). */
  private final KafkaRecordTimes kafkaTimes;

  PacerSource(SparkSession session, Source delegate, String sourceName, String queryOption,
      Map<String, String> pacerOptions, Map<String, String> sourceOptions) {
    super(session, delegate, sourceName, queryOption, pacerOptions);
    this.source = delegate;
    this.fileSource = delegate.getClass().getName().endsWith(".FileStreamSource");
    this.kafkaTimes = !fileSource && KafkaRecordTimes.applies(sourceOptions)
        ? new KafkaRecordTimes(sourceOptions) : null;
  }

  // ---------------------------------------------------------------- forwarded

  @Override
  public StructType schema() {
    return source.schema();
  }

  @Override
  public Option<org.apache.spark.sql.execution.streaming.Offset> getOffset() {
    throw new UnsupportedOperationException("PacerSource supports admission control: Spark calls"
        + " latestOffset(start, limit), never getOffset()");
  }

  @Override
  public Dataset<Row> getBatch(Option<org.apache.spark.sql.execution.streaming.Offset> start,
      org.apache.spark.sql.execution.streaming.Offset end) {
    return source.getBatch(start, end);
  }

  @Override
  public Offset initialOffset() {
    return source.initialOffset();
  }

  @Override
  public Offset deserializeOffset(String json) {
    return source.deserializeOffset(json);
  }

  @Override
  public void commit(org.apache.spark.sql.execution.streaming.Offset end) {
    commit((Offset) end);
  }

  @Override
  public void commit(Offset end) {
    super.commit(end);
  }

  @Override
  public void stop() {
    try {
      super.stop();
    } finally {
      if (kafkaTimes != null) {
        kafkaTimes.close();
      }
    }
  }

  @Override
  void sourceTimeMetrics(Map<String, String> metrics) {
    if (kafkaTimes != null) {
      metrics.put("pacerSourceTimeMs", Long.toString(kafkaTimes.spentMs()));
      metrics.put("pacerSourceTimeFetches", Long.toString(kafkaTimes.fetches()));
    }
  }

  @Override
  void commitDelegate(Offset end) {
    source.commit(asV1(end)); // a V1 Source takes only its V1 overload
  }

  @Override
  Offset plainLatestOffset() {
    Option<org.apache.spark.sql.execution.streaming.Offset> got = source.getOffset();
    return got.isDefined() ? got.get() : null;
  }

  /**
   * A file source's offset is the last batch of its own metadata log ({@code {"logOffset": N}}),
   * and every log batch holds at most the source's {@code maxFilesPerTrigger} files: a jump of
   * several log batches (after a restart, the backlog an earlier run logged but never read) is cut
   * at each of them, so a batch after a restart still honours the read limit.
   */
  @Override
  List<Offset> steps(Offset prev, Offset next, int room) {
    if (!fileSource) {
      return kafkaTimes == null ? List.of(next) : kafkaSteps(prev, next, room);
    }
    long from = prev == null ? -1L : logOffset(prev.json());
    long to = logOffset(next.json());
    if (from == Long.MIN_VALUE || to == Long.MIN_VALUE || to - from <= 1) {
      return List.of(next);
    }
    List<Offset> steps = new ArrayList<>();
    for (long n = from + 1; n <= to && steps.size() < room; n++) {
      steps.add(n == to ? next : SerializedOffset.apply("{\"logOffset\":" + n + "}"));
    }
    return steps;
  }

  /**
   * A Kafka jump of more than {@link #KAFKA_PIECE_ROWS} rows (a backlog that waited through a start, an outage,
   * a long batch) cut into up to {@link #KAFKA_PIECES} pieces, each dated by its own oldest and newest records
   * (a dataset's rows are taken as spread evenly between them), so the deadline sees how old each part of the
   * backlog is and a catch-up can take it a part at a time. First at {@link #KAFKA_TIME_PIECES} moments evenly
   * spaced over the records' times ({@link KafkaRecordTimes#timeCuts}), so that a burst and the trickle after
   * it are never one piece read as evenly spread (pacer-spark's README gives the measured effect); then each of
   * those parts by rows, the pieces left given to the largest parts.
   */
  private List<Offset> kafkaSteps(Offset prev, Offset next, int room) {
    String prevJson = prev == null ? startingOffsetsJson() : prev.json();
    Long rows = OffsetSnapshot.partitionOffsetRows(prevJson, next.json());
    int budget = Math.min(KAFKA_PIECES, room);
    if (rows == null || rows <= KAFKA_PIECE_ROWS || budget <= 1) {
      return List.of(next);
    }
    try {
      List<String> bounds = new ArrayList<>();
      bounds.add(prevJson);
      bounds.addAll(kafkaTimes.timeCuts(prevJson, next.json(), Math.min(KAFKA_TIME_PIECES, budget)));
      bounds.remove(next.json());
      bounds.add(next.json());
      List<Long> partRows = new ArrayList<>();
      for (int i = 1; i < bounds.size(); i++) {
        Long between = OffsetSnapshot.partitionOffsetRows(bounds.get(i - 1), bounds.get(i));
        partRows.add(between == null ? 0L : between);
      }
      int[] pieces = KafkaPieces.allot(partRows, budget, KAFKA_PIECE_ROWS);
      List<Offset> steps = new ArrayList<>();
      for (int i = 1; i < bounds.size(); i++) {
        if (partRows.get(i - 1) == 0) {
          continue; // the same offsets as the cut before: no piece
        }
        com.fasterxml.jackson.databind.JsonNode from = OffsetSnapshot.JSON.readTree(bounds.get(i - 1));
        com.fasterxml.jackson.databind.JsonNode to = OffsetSnapshot.JSON.readTree(bounds.get(i));
        for (int k = 1; k < pieces[i - 1]; k++) {
          steps.add(SerializedOffset.apply(KafkaPieces.between(from, to, k, pieces[i - 1]).toString()));
        }
        steps.add(i == bounds.size() - 1 ? next : SerializedOffset.apply(bounds.get(i)));
      }
      return steps;
    } catch (Exception notKafka) {
      return List.of(next);
    }
  }

  /** N of a file source offset {@code {"logOffset": N}}; {@link Long#MIN_VALUE} for another form. */
  private static long logOffset(String json) {
    try {
      com.fasterxml.jackson.databind.JsonNode node = OffsetSnapshot.JSON.readTree(json);
      return node.isObject() && node.size() == 1 && node.path("logOffset").canConvertToLong()
          ? node.get("logOffset").asLong() : Long.MIN_VALUE;
    } catch (Exception notJson) {
      return Long.MIN_VALUE;
    }
  }

  // ---------------------------------------------------------------- measuring

  @Override
  OffsetSnapshot measure(long seq, Offset prev, Offset next, long now) {
    if (fileSource) {
      try {
        Dataset<Row> batch = source.getBatch(
            prev == null ? Option.empty() : Option.apply(asV1(prev)), asV1(next));
        // the analyzed plan only: optimizing a streaming relation outside the query is refused
        LogicalPlan plan =
            ((org.apache.spark.sql.classic.Dataset<Row>) batch).queryExecution().analyzed();
        long files = 0;
        long bytes = 0;
        Long oldest = null;
        Long newest = null;
        for (LogicalPlan leaf : CollectionConverters.asJava(plan.collectLeaves())) {
          if (leaf instanceof LogicalRelation
              && ((LogicalRelation) leaf).relation() instanceof HadoopFsRelation) {
            FileIndex location = ((HadoopFsRelation) ((LogicalRelation) leaf).relation()).location();
            files += location.inputFiles().length;
            bytes += location.sizeInBytes();
            if (location instanceof PartitioningAwareFileIndex) { // listed already: no further I/O
              for (FileStatus status
                  : CollectionConverters.asJava(((PartitioningAwareFileIndex) location).allFiles())) {
                oldest = oldest == null ? status.getModificationTime()
                    : Math.min(oldest, status.getModificationTime());
                newest = newest == null ? status.getModificationTime()
                    : Math.max(newest, status.getModificationTime());
              }
            }
          }
        }
        return new OffsetSnapshot(seq, next, now, null, files, bytes, false, oldest, newest);
      } catch (Exception unmeasured) { // AnalysisException is a checked exception in Java's eyes
        LOG.warn("cannot measure snapshot {} of {}: {}", seq, sourceName, unmeasured.toString());
        return new OffsetSnapshot(seq, next, now, null, null, null, false, null, null);
      }
    }
    String prevJson = prev == null ? startingOffsetsJson() : prev.json();
    Long rows = OffsetSnapshot.partitionOffsetRows(prevJson, next.json());
    Long bytes = rows == null ? null : rows * (long) source.schema().defaultSize();
    long[] recordTimes = kafkaTimes == null ? null : kafkaTimes.spanMs(prevJson, next.json());
    return recordTimes == null ? new OffsetSnapshot(seq, next, now, rows, null, bytes, true, null, null)
        : new OffsetSnapshot(seq, next, now, rows, null, bytes, true, recordTimes[0], recordTimes[1]);
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
      initial = source.getClass().getDeclaredMethod("initialPartitionOffsets");
    } catch (NoSuchMethodException notKafka) {
      return null;
    }
    try {
      initial.setAccessible(true);
      Object offsets = initial.invoke(source);
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
      LOG.debug("cannot read the starting offsets of {}", source, unreadable);
    }
    return startingJson;
  }

  private static org.apache.spark.sql.execution.streaming.Offset asV1(Offset offset) {
    return offset instanceof org.apache.spark.sql.execution.streaming.Offset
        ? (org.apache.spark.sql.execution.streaming.Offset) offset
        : SerializedOffset.apply(offset.json());
  }
}
