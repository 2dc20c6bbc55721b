package io.pacer.spark;

import com.codahale.metrics.Counter;
import com.codahale.metrics.Gauge;
import com.codahale.metrics.MetricRegistry;
import java.util.Collections;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.SparkEnv;
import org.apache.spark.metrics.source.Source;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One paced query's figures in Spark's metrics system, so that the sinks a user configured (JMX, the
 * Prometheus servlet, Graphite, CSV) export them with configuration only, as they do Spark's own
 * streaming metrics ({@code spark.sql.streaming.metricsEnabled}).
 *
 * <p>Source {@code pacer.<query name>}: a gauge per figure the driver sends with each admission
 * (deadline, batch and held rows, the oldest held row's age, the previous batch's late rows, busy
 * core-seconds and trigger time...) and counters of batches, late rows and batches by reason. The
 * metrics system takes a source's metrics when it is registered, so the set is fixed here and the
 * gauges read the newest figures; a query's source is registered on its first admission and
 * removed when its run stops.
 */
public final class PacerMetricsSource implements Source {

  private static final Logger LOG = LoggerFactory.getLogger(PacerMetricsSource.class);

  /** The figures each query exports as gauges (the driver's metric names, less their prefix). */
  static final String[] GAUGES = {
    "pacerDeadlineMs", "pacerBatchDatasets", "pacerBatchRows", "pacerPredictedBatchMs",
    "pacerDatasetsHeld", "pacerRowsHeld", "pacerOldestHeldAgeMs", "pacerPreviousBatchRowsLate",
    "pacerPreviousBatchBusyCoreSeconds", "pacerPreviousBatchTriggerMs",
    // observe mode's advice (pacer.observe): what pacing would do, replayed from the recording
    "pacerAdvicePacedRowsLatePct", "pacerAdvicePacedBatchesRatio", "pacerAdvicePacedBusyRatio",
    "pacerAdviceReplayBusyRatio", "pacerAdviceFewestExecutors",
    // the application's executors, where pacer scales them (pacer_spark.driver.scaling.METRICS)
    "pacerExecutorsRunning", "pacerExecutorsHeld", "pacerExecutorsWanted", "pacerExecutorsRecommended",
    "pacerScalingUps",
    "pacerScalingDowns", "pacerScalingRefused", "pacerScalingUngrantedExecutors"
  };

  private static final Map<String, PacerMetricsSource> SOURCES = new ConcurrentHashMap<>();

  private final String name;
  private final MetricRegistry registry = new MetricRegistry();
  private volatile Map<String, String> latest = Collections.emptyMap();
  private final Counter batches;
  private final Counter rowsLate;
  private final Counter catchUp;
  private final Counter readCap;
  private final Counter failOpen;

  private PacerMetricsSource(String query) {
    this.name = "pacer." + query;
    for (String figure : GAUGES) {
      String metric = Character.toLowerCase(figure.charAt(5)) + figure.substring(6);
      registry.register(metric, (Gauge<Double>) () -> number(latest.get(figure)));
    }
    batches = registry.counter("batches");
    rowsLate = registry.counter("rowsLate");
    catchUp = registry.counter("catchUpBatches");
    readCap = registry.counter("readCapBatches");
    failOpen = registry.counter("failOpenBatches");
  }

  @Override
  public String sourceName() {
    return name;
  }

  @Override
  public MetricRegistry metricRegistry() {
    return registry;
  }

  /**
   * The driver's figures of {@code query}'s newest admitted batch (or, with {@code failedOpen}, an
   * admission made without its answer): registers the query's source on first use. Never throws:
   * a metrics system that cannot take it is logged once and pacing goes on.
   */
  static void admitted(String query, Map<String, String> figures, boolean failedOpen) {
    PacerMetricsSource source = SOURCES.computeIfAbsent(query, PacerMetricsSource::register);
    if (source == null) {
      return;
    }
    source.batches.inc();
    if (failedOpen) {
      source.failOpen.inc();
      return;
    }
    source.latest = figures;
    source.rowsLate.inc((long) number(figures.get("pacerPreviousBatchRowsLate")));
    String reason = figures.getOrDefault("pacerReason", "");
    if (reason.equals("catch-up")) {
      source.catchUp.inc();
    } else if (reason.equals("read cap")) {
      source.readCap.inc();
    }
  }

  /** Removes {@code query}'s source from the metrics system (its run stopped). */
  static void stopped(String query) {
    PacerMetricsSource source = SOURCES.remove(query);
    SparkEnv env = SparkEnv.get();
    if (source != null && env != null) {
      env.metricsSystem().removeSource(source);
    }
  }

  private static PacerMetricsSource register(String query) {
    SparkEnv env = SparkEnv.get();
    if (env == null) {
      return null;
    }
    PacerMetricsSource source = new PacerMetricsSource(query);
    try {
      env.metricsSystem().registerSource(source);
    } catch (RuntimeException refused) {
      LOG.warn("pacer: Spark's metrics system did not take the source of query {}: {}", query,
          refused.toString());
    }
    return source;
  }

  private static double number(String text) {
    if (text == null || text.isEmpty()) {
      return Double.NaN;
    }
    try {
      return Double.parseDouble(text);
    } catch (NumberFormatException notANumber) {
      return Double.NaN;
    }
  }
}
