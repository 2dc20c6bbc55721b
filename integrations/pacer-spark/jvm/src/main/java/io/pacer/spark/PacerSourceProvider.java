package io.pacer.spark;

import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.util.CaseInsensitiveMap;
import org.apache.spark.sql.execution.datasources.DataSource;
import org.apache.spark.sql.execution.datasources.FileFormat;
import org.apache.spark.sql.execution.streaming.Source;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.sources.StreamSourceProvider;
import org.apache.spark.sql.types.StructType;
import scala.Option;
import scala.Tuple2;
import scala.jdk.javaapi.CollectionConverters;

/**
 * {@code spark.readStream.format("pacer").option("pacer.source", NAME)}: creates the source Spark
 * itself creates for {@code format(NAME)} with every other option, and wraps it in a
 * {@link PacerSource} that decides only where each micro-batch ends.
 */
public final class PacerSourceProvider implements StreamSourceProvider, DataSourceRegister {

  /** The option naming the wrapped source, e.g. {@code csv} or {@code kafka}. */
  public static final String SOURCE_OPTION = "pacer.source";
  /** The option naming the query for the registry (default: the streaming query's name). */
  public static final String QUERY_OPTION = "pacer.query";

  @Override
  public String shortName() {
    return "pacer";
  }

  @Override
  public Tuple2<String, StructType> sourceSchema(SQLContext sqlContext, Option<StructType> schema,
      String providerName, scala.collection.immutable.Map<String, String> parameters) {
    DataSource delegate = delegateDataSource(sqlContext.sparkSession(), schema, parameters);
    DataSource.SourceInfo info = delegate.sourceInfo();
    return new Tuple2<>("pacer[" + info.name() + "]", info.schema());
  }

  @Override
  public Source createSource(SQLContext sqlContext, String metadataPath, Option<StructType> schema,
      String providerName, scala.collection.immutable.Map<String, String> parameters) {
    SparkSession session = sqlContext.sparkSession();
    Map<String, String> options = originalOptions(parameters);
    DataSource delegate = delegateDataSource(session, schema, parameters);
    Map<String, String> pacerOptions = new LinkedHashMap<>();
    for (Map.Entry<String, String> e : options.entrySet()) {
      if (e.getKey().startsWith("pacer.") && !e.getKey().equals(SOURCE_OPTION)) {
        pacerOptions.put(e.getKey(), e.getValue());
      }
    }
    return new PacerSource(session, delegate.createSource(metadataPath), sourceName(options),
        options.get(QUERY_OPTION), pacerOptions);
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
          + " text, orc, kafka, ...");
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
          + " to wrap (csv, json, parquet, text, orc, kafka, ...)");
    }
    Map<String, String> forwarded = new LinkedHashMap<>();
    for (Map.Entry<String, String> e : options.entrySet()) {
      if (!e.getKey().startsWith("pacer.")) {
        forwarded.put(e.getKey(), e.getValue());
      }
    }
    DataSource dataSource = newDataSource(session, name, schema, toScala(forwarded));
    Class<?> providing;
    try {
      // providingClass, not lookupDataSource: it falls back from file V2 sources to their V1 format
      providing = dataSource.providingClass();
    } catch (Throwable notFound) {
      throw new IllegalArgumentException("pacer.source \"" + name + "\" is not a data source Spark"
          + " knows (" + notFound.getMessage() + "). Use a name format() accepts (csv, json,"
          + " parquet, text, orc, kafka with the spark-sql-kafka package on the classpath, ...) or a"
          + " provider class name.", notFound);
    }
    if (!StreamSourceProvider.class.isAssignableFrom(providing)
        && !FileFormat.class.isAssignableFrom(providing)) {
      throw new IllegalArgumentException("pacer.source \"" + name + "\" (" + providing.getName()
          + ") has no DataSource V1 streaming source, which format(\"pacer\") wraps: use a file"
          + " format (csv, json, parquet, text, orc) or kafka. V2-only sources such as rate and"
          + " socket are not supported yet.");
    }
    return dataSource;
  }

  @SuppressWarnings("unchecked")
  private static scala.collection.immutable.Map<String, String> toScala(Map<String, String> map) {
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
