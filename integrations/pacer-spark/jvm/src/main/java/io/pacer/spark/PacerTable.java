package io.pacer.spark;

import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.catalog.Column;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The V2 table {@code format("pacer")} hands Spark.
 *
 * <p>For a V2-only delegate (rate, socket, ...) it wraps the delegate's table: same schema, only
 * the {@code MICRO_BATCH_READ} capability, and a scan whose {@code toMicroBatchStream} is a
 * {@link PacerMicroBatchStream} around the delegate's. For a delegate with a V1 streaming source
 * (file formats, Kafka) {@code delegate} is null: a table without read capabilities, which makes
 * Spark's {@code ResolveDataSource} fall back to the V1 {@code StreamSourceProvider} path
 * ({@link PacerSource}) exactly as before this class existed.
 */
final class PacerTable implements SupportsRead {

  private final SparkSession session;
  private final Table delegate;
  private final StructType schema;
  private final String sourceName;
  private final String queryOption;
  private final Map<String, String> pacerOptions;

  PacerTable(SparkSession session, Table delegate, StructType schema, String sourceName,
      String queryOption, Map<String, String> pacerOptions) {
    this.session = session;
    this.delegate = delegate;
    this.schema = schema;
    this.sourceName = sourceName;
    this.queryOption = queryOption;
    this.pacerOptions = pacerOptions;
  }

  @Override
  public String name() {
    return "pacer[" + (delegate == null ? sourceName : delegate.name()) + "]";
  }

  @Override
  public StructType schema() {
    return delegate == null ? schema : delegate.schema();
  }

  @Override
  public Column[] columns() {
    return delegate == null ? SupportsRead.super.columns() : delegate.columns();
  }

  @Override
  public Set<TableCapability> capabilities() {
    return delegate != null && delegate.capabilities().contains(TableCapability.MICRO_BATCH_READ)
        ? Set.of(TableCapability.MICRO_BATCH_READ)
        : Set.of();
  }

  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
    if (delegate == null) {
      throw new UnsupportedOperationException(name() + " is read through its V1 source");
    }
    CaseInsensitiveStringMap forwarded =
        new CaseInsensitiveStringMap(PacerSourceProvider.forwardedOptions(options));
    ScanBuilder builder = ((SupportsRead) delegate).newScanBuilder(forwarded);
    return () -> new PacerScan(builder.build(), forwarded);
  }

  @Override
  public String toString() {
    return name();
  }

  /** The delegate's scan, whose micro-batch stream is paced. */
  private final class PacerScan implements Scan {
    private final Scan scan;
    private final CaseInsensitiveStringMap options;

    PacerScan(Scan scan, CaseInsensitiveStringMap options) {
      this.scan = scan;
      this.options = options;
    }

    @Override
    public StructType readSchema() {
      return scan.readSchema();
    }

    @Override
    public String description() {
      return "pacer[" + scan.description() + "]";
    }

    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
      PacerMicroBatchStream stream = new PacerMicroBatchStream(session, scan.toMicroBatchStream(
          checkpointLocation), scan.readSchema(), options, sourceName, queryOption, pacerOptions);
      stream.sourceCheckpoint = checkpointLocation;
      return stream;
    }

    @Override
    public CustomMetric[] supportedCustomMetrics() {
      return scan.supportedCustomMetrics();
    }

    @Override
    public CustomTaskMetric[] reportDriverMetrics() {
      return scan.reportDriverMetrics();
    }

    @Override
    public ColumnarSupportMode columnarSupportMode() {
      return scan.columnarSupportMode();
    }
  }
}
