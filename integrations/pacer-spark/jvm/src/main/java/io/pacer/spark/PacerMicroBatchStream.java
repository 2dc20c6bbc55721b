package io.pacer.spark;

import com.fasterxml.jackson.databind.JsonNode;
import java.lang.reflect.Method;
import java.util.Map;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The DataSource V2 counterpart of {@link PacerSource}: wraps the {@link MicroBatchStream} of a
 * V2-only source (rate, rate-micro-batch, socket, ...) and decides, through the same
 * {@link PacedStream} logic, the offset each micro-batch ends at; everything else is forwarded.
 *
 * <p>Rows of a snapshot: rate ({@code RateStreamMicroBatchStream}, offsets in seconds since the
 * start): the rows its {@code valueAtSecond} gives between the two offsets; rate-micro-batch
 * ({@code {"offset": rows, ...}}) and socket ({@code LongOffset} of lines): the offset delta;
 * Kafka-shaped offsets: the partition deltas; otherwise unknown (null).
 */
public final class PacerMicroBatchStream extends PacedStream implements MicroBatchStream,
    SupportsTriggerAvailableNow, ReportsSourceMetrics {

  private final MicroBatchStream stream;
  private final long rowBytes;
  private final String kind;
  private final CaseInsensitiveStringMap options;
  /** The rate source's creation time (ms), once read. */
  private Long rateCreatedMs;

  PacerMicroBatchStream(SparkSession session, MicroBatchStream delegate, StructType schema,
      CaseInsensitiveStringMap options, String sourceName, String queryOption,
      Map<String, String> pacerOptions) {
    super(session, delegate, sourceName, queryOption, pacerOptions);
    this.stream = delegate;
    this.rowBytes = schema == null ? 0L : schema.defaultSize();
    this.options = options;
    this.kind = delegate.getClass().getSimpleName();
  }

  // ---------------------------------------------------------------- forwarded

  @Override
  public Offset latestOffset() {
    throw new UnsupportedOperationException("PacerMicroBatchStream supports admission control:"
        + " Spark calls latestOffset(start, limit), never latestOffset()");
  }

  @Override
  public InputPartition[] planInputPartitions(Offset start, Offset end) {
    return stream.planInputPartitions(start, end);
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return stream.createReaderFactory();
  }

  @Override
  public Offset initialOffset() {
    return stream.initialOffset();
  }

  @Override
  public Offset deserializeOffset(String json) {
    return stream.deserializeOffset(json);
  }

  @Override
  public void commit(Offset end) {
    super.commit(end);
  }

  @Override
  public void stop() {
    super.stop();
  }

  @Override
  void commitDelegate(Offset end) {
    stream.commit(end);
  }

  @Override
  Offset plainLatestOffset() {
    return stream.latestOffset();
  }

  // ---------------------------------------------------------------- measuring

  @Override
  OffsetSnapshot measure(long seq, Offset prev, Offset next, long now) {
    Long rows = prev == null ? null : rows(prev.json(), next.json());
    Long bytes = rows == null || rowBytes <= 0 ? null : rows * rowBytes;
    if (prev == null) {
      return new OffsetSnapshot(seq, next, now, rows, null, bytes, bytes != null, null, null);
    }
    Long last = rateTimeMs(next.json()); // the rows of rate's last second before next are its newest
    return new OffsetSnapshot(seq, next, now, rows, null, bytes, bytes != null, rateTimeMs(prev.json()),
        last == null ? null : last - 1000L);
  }

  /**
   * The {@code timestamp} of the first row after rate's offset {@code prevJson} (seconds since its
   * start): its creation time (kept in its metadata log, a member Spark does not publish: read
   * by reflection) plus those seconds; null for any other delegate or where unreadable.
   */
  private Long rateTimeMs(String prevJson) {
    if (!kind.equals("RateStreamMicroBatchStream")) {
      return null;
    }
    try {
      if (rateCreatedMs == null) {
        Method created = stream.getClass().getDeclaredMethod("creationTimeMs");
        created.setAccessible(true);
        rateCreatedMs = ((Number) created.invoke(stream)).longValue();
      }
      return rateCreatedMs + Long.parseLong(prevJson.trim()) * 1000L;
    } catch (ReflectiveOperationException | RuntimeException unreadable) {
      return null;
    }
  }

  private Long rows(String prevJson, String nextJson) {
    try {
      if (kind.equals("RateStreamMicroBatchStream")) { // offsets: seconds since the stream started
        return rateValue(Long.parseLong(nextJson.trim())) - rateValue(Long.parseLong(prevJson.trim()));
      }
      if (kind.equals("TextSocketMicroBatchStream")) { // offsets: lines received
        return Math.max(0L, Long.parseLong(nextJson.trim()) - Long.parseLong(prevJson.trim()));
      }
      JsonNode prev = OffsetSnapshot.JSON.readTree(prevJson);
      JsonNode next = OffsetSnapshot.JSON.readTree(nextJson);
      if (kind.equals("RatePerMicroBatchStream") && next.path("offset").canConvertToLong()
          && prev.path("offset").canConvertToLong()) {
        return Math.max(0L, next.get("offset").asLong() - prev.get("offset").asLong());
      }
    } catch (Exception unmeasurable) {
      return null;
    }
    return OffsetSnapshot.partitionOffsetRows(prevJson, nextJson);
  }

  /** Rows rate has produced by {@code seconds}: its own {@code RateStreamProvider.valueAtSecond}. */
  private long rateValue(long seconds) throws ReflectiveOperationException {
    long rowsPerSecond = options.getLong("rowsPerSecond", 1L);
    String rampUp = options.getOrDefault("rampUpTime", "0s");
    Class<?> utils = Class.forName("org.apache.spark.network.util.JavaUtils");
    long rampUpSeconds = (Long) utils.getMethod("timeStringAsSec", String.class).invoke(null, rampUp);
    Class<?> provider =
        Class.forName("org.apache.spark.sql.execution.streaming.sources.RateStreamProvider");
    Method value = provider.getMethod("valueAtSecond", long.class, long.class, long.class);
    return (Long) value.invoke(null, seconds, rowsPerSecond, rampUpSeconds);
  }
}
