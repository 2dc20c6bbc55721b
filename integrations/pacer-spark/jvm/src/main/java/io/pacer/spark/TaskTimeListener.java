package io.pacer.spark;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import org.apache.spark.executor.TaskMetrics;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;

/**
 * The core-seconds each streaming query's tasks executed: every finished task's executor run time, times the cores a
 * task holds, summed per query (the {@code sql.streaming.queryId} property Spark sets on a stream's jobs) and for the
 * whole application. The Python driver reads a query's running total at each batch's completion and attributes what
 * grew since its last read to that batch ({@code pacer_spark.jvm.task_time}).
 *
 * <p>A task's stage names its query: the stage's properties are read when it is submitted and kept for the newest
 * {@link #STAGES_KEPT} stages (a task may end after its stage completed: a speculative copy, a killed one).
 */
public final class TaskTimeListener extends SparkListener {

  /** The job property Spark sets to the streaming query's id ({@code StreamExecution.QUERY_ID_KEY}). */
  public static final String QUERY_ID_KEY = "sql.streaming.queryId";

  /** Stages whose query is remembered. */
  static final int STAGES_KEPT = 10_000;

  private final int taskCpus;
  private final Map<Integer, String> stageQuery =
      new LinkedHashMap<Integer, String>() {
        @Override
        protected boolean removeEldestEntry(Map.Entry<Integer, String> eldest) {
          return size() > STAGES_KEPT;
        }
      };
  private final ConcurrentHashMap<String, LongAdder> queryMs = new ConcurrentHashMap<>();
  private final LongAdder allMs = new LongAdder();

  /** {@code taskCpus}: the cores one task holds ({@code spark.task.cpus}). */
  public TaskTimeListener(int taskCpus) {
    this.taskCpus = Math.max(1, taskCpus);
  }

  @Override
  public void onStageSubmitted(SparkListenerStageSubmitted submitted) {
    Properties properties = submitted.properties();
    String query = properties == null ? null : properties.getProperty(QUERY_ID_KEY);
    if (query != null) {
      synchronized (stageQuery) {
        stageQuery.put(submitted.stageInfo().stageId(), query);
      }
    }
  }

  @Override
  public void onTaskEnd(SparkListenerTaskEnd ended) {
    TaskMetrics metrics = ended.taskMetrics();
    if (metrics == null) {
      return;
    }
    long coreMs = Math.max(0L, metrics.executorRunTime()) * taskCpus;
    allMs.add(coreMs);
    String query;
    synchronized (stageQuery) {
      query = stageQuery.get(ended.stageId());
    }
    if (query != null) {
      queryMs.computeIfAbsent(query, key -> new LongAdder()).add(coreMs);
    }
  }

  /** Core-milliseconds the tasks of streaming query {@code queryId} executed so far (0 before its first task). */
  public long queryCoreMs(String queryId) {
    LongAdder total = queryMs.get(queryId);
    return total == null ? 0L : total.sum();
  }

  /** Core-milliseconds every task of the application executed since this listener was added. */
  public long allCoreMs() {
    return allMs.sum();
  }
}
