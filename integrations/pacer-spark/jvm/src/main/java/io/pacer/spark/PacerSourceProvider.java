package io.pacer.spark;

import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.util.CaseInsensitiveMap;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.execution.datasources.DataSource;
import org.apache.spark.sql.execution.datasources.FileFormat;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Utils;
import org.apache.spark.sql.execution.streaming.Source;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.sources.StreamSourceProvider;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import scala.Option;
import scala.Tuple2;
import scala.jdk.javaapi.CollectionConverters;

/**
 * {@code spark.readStream.format("pacer").option("pacer.source", NAME)}: creates the source Spark
 * itself creates for {@code format(NAME)} with every other option, and wraps it so that pacer
 * decides only where each micro-batch ends.
 *
 * <p>Two paths, as Spark's own {@code ResolveDataSource} chooses them. Spark first asks the
 * {@link TableProvider} side for a table: for a delegate with a V1 streaming source (file formats,
 * Kafka) that table has no read capability, so Spark falls back to the {@link StreamSourceProvider}
 * side and {@link #createSource} wraps the delegate's V1 {@code Source} in a {@link PacerSource}.
 * For a V2-only delegate (rate, rate-micro-batch, socket, a {@code TableProvider} of one's own)
 * the table is a {@link PacerTable} with {@code MICRO_BATCH_READ}, whose scan wraps the delegate's
 * {@code MicroBatchStream} in a {@link PacerMicroBatchStream}.
 */
public final class PacerSourceProvider implements StreamSourceProvider, TableProvider,
    DataSourceRegister {

  /** The option naming the wrapped source, e.g. {@code csv} or {@code kafka}. */
  public static final String SOURCE_OPTION = "pacer.source";
  /** The option naming the query for the registry (default: the streaming query's name). */
  public static final String QUERY_OPTION = "pacer.query";

  /** The schema this instance's {@link #inferSchema} returned (not a user-specified one). */
  private StructType inferred;

  @Override
  public String shortName() {
    return "pacer";
  }

  // ---------------------------------------------------------------- V1: StreamSourceProvider

  @Override
  public Tuple2<String, StructType> sourceSchema(SQLContext sqlContext, Option<StructType> schema,
      String providerName, scala.collection.immutable.Map<String, String> parameters) {
    DataSource delegate = delegateDataSource(sqlContext.sparkSession(), schema, parameters);
    if (!isV1(delegate)) { // Spark builds the V1 relation of a V2 source too, as a fallback shim
      Table table = delegateTable(delegate, originalOptions(parameters), schema);
      return new Tuple2<>("pacer[" + table.name() + "]", table.schema());
    }
    DataSource.SourceInfo info = delegate.sourceInfo();
    return new Tuple2<>("pacer[" + info.name() + "]", info.schema());
  }

  @Override
  public Source createSource(SQLContext sqlContext, String metadataPath, Option<StructType> schema,
      String providerName, scala.collection.immutable.Map<String, String> parameters) {
    SparkSession session = sqlContext.sparkSession();
    Map<String, String> options = originalOptions(parameters);
    DataSource delegate = delegateDataSource(session, schema, parameters);
    if (!isV1(delegate)) {
      throw new IllegalArgumentException("pacer.source \"" + sourceName(options) + "\" has only a"
          + " DataSource V2 micro-batch stream, which format(\"pacer\") wraps through its V2 table;"
          + " Spark asked for a V1 source instead: remove " + PacerSourceProvider.class.getName()
          + " from spark.sql.streaming.disabledV2MicroBatchReaders");
    }
    if (sourceName(options).equalsIgnoreCase("kafka")) { // a missing topic said now, naming it
      KafkaTopicCheck.check(forwarded(options), Boolean.parseBoolean(session.conf().get(
          "spark.sql.streaming.kafka.useDeprecatedOffsetFetching", "false").trim()));
    }
    PacerSource source = new PacerSource(session, delegate.createSource(metadataPath),
        sourceName(options), options.get(QUERY_OPTION), pacerOptions(options), forwarded(options));
    source.sourceCheckpoint = metadataPath;
    return source;
  }

  // ---------------------------------------------------------------- V2: TableProvider

  /** True: a user-specified schema reaches {@link #getTable} (file sources need one). */
  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    DataSource delegate = delegateDataSource(SparkSession.active(), Option.empty(),
        toScala(options.asCaseSensitiveMap()));
    inferred = isV1(delegate) ? new StructType()
        : delegateTable(delegate, originalOptions(toScala(options.asCaseSensitiveMap())),
            Option.empty()).schema();
    return inferred;
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    SparkSession session = SparkSession.active();
    scala.collection.immutable.Map<String, String> parameters = toScala(properties);
    Map<String, String> options = originalOptions(parameters);
    Option<StructType> userSchema = schema == inferred ? Option.empty() : Option.apply(schema);
    DataSource delegate = delegateDataSource(session, userSchema, parameters);
    Table table = isV1(delegate) ? null : delegateTable(delegate, options, userSchema);
    if (table != null && !table.capabilities().contains(TableCapability.MICRO_BATCH_READ)) {
      throw new IllegalArgumentException("pacer.source \"" + sourceName(options) + "\" ("
          + table.name() + ") cannot be read in micro-batches, which format(\"pacer\") paces");
    }
    return new PacerTable(session, table, schema, sourceName(options), options.get(QUERY_OPTION),
        pacerOptions(options));
  }

  /** The delegate's V2 table, as Spark's DataSourceV2Utils builds it for {@code format(NAME)}. */
  private static Table delegateTable(DataSource delegate, Map<String, String> options,
      Option<StructType> schema) {
    TableProvider provider = (TableProvider) delegate.providingInstance();
    Table table = DataSourceV2Utils.getTableFromProvider(provider,
        new CaseInsensitiveStringMap(forwarded(options)), schema);
    if (!(table instanceof SupportsRead)) {
      throw new IllegalArgumentException("pacer.source \"" + sourceName(options) + "\" ("
          + table.name() + ") cannot be read");
    }
    return table;
  }

  /** Whether Spark reads the delegate through a V1 streaming source (file formats, Kafka). */
  private static boolean isV1(DataSource delegate) {
    Class<?> providing = delegate.providingClass();
    return StreamSourceProvider.class.isAssignableFrom(providing)
        || FileFormat.class.isAssignableFrom(providing);
  }

  /** The options of {@code options} that go to the delegate: every one not starting with pacer. */
  static Map<String, String> forwardedOptions(CaseInsensitiveStringMap options) {
    return forwarded(options.asCaseSensitiveMap());
  }

  private static Map<String, String> forwarded(Map<String, String> options) {
    Map<String, String> forwarded = new LinkedHashMap<>();
    for (Map.Entry<String, String> e : options.entrySet()) {
      if (!e.getKey().toLowerCase(java.util.Locale.ROOT).startsWith("pacer.")) {
        forwarded.put(e.getKey(), e.getValue());
      }
    }
    return forwarded;
  }

  private static Map<String, String> pacerOptions(Map<String, String> options) {
    Map<String, String> pacerOptions = new LinkedHashMap<>();
    for (Map.Entry<String, String> e : options.entrySet()) {
      if (e.getKey().startsWith("pacer.") && !e.getKey().equals(SOURCE_OPTION)) {
        pacerOptions.put(e.getKey(), e.getValue());
      }
    }
    return pacerOptions;
  }

  private static Map<String, String> originalOptions(
      scala.collection.immutable.Map<String, String> parameters) {
    scala.collection.immutable.Map<String, String> original = parameters;
    if (parameters instanceof CaseInsensitiveMap) {
      original = ((CaseInsensitiveMap<String>) parameters).originalMap();
    }
    Map<String, String> options = new LinkedHashMap<>();
    for (Map.Entry<String, String> e : CollectionConverters.asJava(original).entrySet()) {
      String key = e.getKey();
      String lower = key.toLowerCase(java.util.Locale.ROOT);
      options.put(lower.startsWith("pacer.") ? lower : key, e.getValue());
    }
    return options;
  }

  private static String sourceName(Map<String, String> options) {
    String name = options.get(SOURCE_OPTION);
    if (name == null || name.isBlank()) {
      throw new IllegalArgumentException("format(\"pacer\") needs .option(\"pacer.source\", NAME)"
          + " naming the source to wrap, as you would pass it to format(): csv, json, parquet,"
          + " text, orc, kafka, rate, socket, ...");
    }
    return name.trim();
  }

  /** The DataSource Spark would build for {@code format(pacer.source)} with the other options. */
  static DataSource delegateDataSource(SparkSession session, Option<StructType> schema,
      scala.collection.immutable.Map<String, String> parameters) {
    Map<String, String> options = originalOptions(parameters);
    String name = sourceName(options);
    if (name.equalsIgnoreCase("pacer")) {
      throw new IllegalArgumentException("pacer.source cannot be \"pacer\" itself: name the source"
          + " to wrap (csv, json, parquet, text, orc, kafka, rate, ...)");
    }
    DataSource dataSource = newDataSource(session, name, schema, toScala(forwarded(options)));
    Class<?> providing;
    try {
      // providingClass, not lookupDataSource: it falls back from file V2 sources to their V1 format
      providing = dataSource.providingClass();
    } catch (Throwable notFound) {
      throw new IllegalArgumentException("pacer.source \"" + name + "\" is not a data source Spark"
          + " knows (" + notFound.getMessage() + "). Use a name format() accepts (csv, json,"
          + " parquet, text, orc, kafka with the spark-sql-kafka package on the classpath, rate,"
          + " socket, ...) or a provider class name. For kafka in a Python process whose JVM started"
          + " without the connector (an earlier session): pacer_spark.add_kafka_connector(spark).",
          notFound);
    }
    if (!StreamSourceProvider.class.isAssignableFrom(providing)
        && !FileFormat.class.isAssignableFrom(providing)
        && !TableProvider.class.isAssignableFrom(providing)) {
      throw new IllegalArgumentException("pacer.source \"" + name + "\" (" + providing.getName()
          + ") has neither a DataSource V1 streaming source nor a DataSource V2 table, which"
          + " format(\"pacer\") wraps: use a file format (csv, json, parquet, text, orc), kafka,"
          + " or a V2 micro-batch source such as rate, rate-micro-batch or socket.");
    }
    return dataSource;
  }

  @SuppressWarnings("unchecked")
  static scala.collection.immutable.Map<String, String> toScala(Map<String, String> map) {
    return (scala.collection.immutable.Map<String, String>) scala.collection.immutable.Map$.MODULE$
        .from(CollectionConverters.asScala(map));
  }

  /**
   * {@code DataSource(session, className, userSpecifiedSchema = schema, options = options)}, every
   * other argument at its default: by reflection, because the case class grows arguments between
   * Spark releases (4.3 added the streaming source name).
   */
  private static DataSource newDataSource(SparkSession session, String className,
      Option<StructType> schema, scala.collection.immutable.Map<String, String> options) {
    Constructor<?> widest = null;
    for (Constructor<?> c : DataSource.class.getConstructors()) {
      if (widest == null || c.getParameterCount() > widest.getParameterCount()) {
        widest = c;
      }
    }
    if (widest == null || widest.getParameterCount() < 7) {
      throw new IllegalStateException("this Spark's DataSource has no constructor pacer knows");
    }
    Object[] args = new Object[widest.getParameterCount()];
    try {
      for (int i = 2; i < args.length; i++) {
        Method byDefault = DataSource.class.getMethod("$lessinit$greater$default$" + (i + 1));
        args[i] = byDefault.invoke(null);
      }
      args[0] = session;
      args[1] = className;
      args[3] = schema;
      args[6] = options;
      return (DataSource) widest.newInstance(args);
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("cannot build Spark's DataSource for " + className + ": "
          + e, e);
    }
  }
}
