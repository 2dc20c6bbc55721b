package io.pacer.spark;

import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Properties;
import java.util.concurrent.atomic.LongAdder;
import org.apache.spark.executor.TaskMetrics;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerEvent;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.scheduler.TaskInfo;
import org.apache.spark.sql.streaming.StreamingQueryListener;

/**
 * What the tasks of each streaming query's batches cost, from Spark's own task metrics: per (query id, batch id) and
 * per query, every finished task attempt's executor run time times the cores a task holds (core-ms), its executor CPU
 * time, and apart from those, the attempts that failed or were killed and their run time. The query and batch are the
 * job properties Spark sets on a stream's jobs ({@code sql.streaming.queryId}, {@code streaming.sql.batchId}), read
 * from a task's stage when it is submitted and kept for the newest {@link #STAGES_KEPT} stages (a task may end after
 * its stage completed: a speculative copy, a killed one).
 *
 * <p>A batch's figures are complete once this listener has seen the batch's progress event: Spark posts it after the
 * batch's jobs ended, and a listener sees the events of its queue in the order they were posted. {@link #batchCost}
 * says whether it has. The newest {@link #BATCHES_KEPT} batches are kept; the per-query and application totals cover
 * every task, a stage of no streaming batch included.
 *
 * <p>Read over Py4J by {@code pacer_spark.jvm.task_time}: each reader returns one comma-separated string of longs (one
 * call, whatever the figures).
 */
public final class TaskTimeListener extends SparkListener {

  /** The job property Spark sets to the streaming query's id ({@code StreamExecution.QUERY_ID_KEY}). */
  public static final String QUERY_ID_KEY = "sql.streaming.queryId";

  /** The job property Spark sets to the micro-batch's id ({@code MicroBatchExecution.BATCH_ID_KEY}). */
  public static final String BATCH_ID_KEY = "streaming.sql.batchId";

  /** The batch id of a query's stage whose job carries none (a job the stream thread ran between batches). */
  public static final long NO_BATCH = -1L;

  /** Stages whose query and batch are remembered. */
  static final int STAGES_KEPT = 10_000;

  /** Batches whose figures are kept (the newest, by their first task or progress event). */
  static final int BATCHES_KEPT = 10_000;

  /** A streaming query's batch. */
  private static final class BatchKey {
    final String query;
    final long batch;

    BatchKey(String query, long batch) {
      this.query = query;
      this.batch = batch;
    }

    @Override
    public boolean equals(Object other) {
      return other instanceof BatchKey
          && ((BatchKey) other).batch == batch
          && ((BatchKey) other).query.equals(query);
    }

    @Override
    public int hashCode() {
      return Objects.hash(query, batch);
    }
  }

  /** Running sums of task attempts: what they executed, and the failed or killed ones among them. */
  private static final class TaskCost {
    long tasks;
    long runCoreMs;
    long cpuNs;
    long failedTasks;
    long failedRunCoreMs;
    boolean reported;

    void add(long coreMs, long cpuNs, boolean failed) {
      tasks += 1;
      runCoreMs += coreMs;
      this.cpuNs += cpuNs;
      if (failed) {
        failedTasks += 1;
        failedRunCoreMs += coreMs;
      }
    }

    /** tasks, run core-ms, CPU ms, failed tasks, failed run core-ms, reported (1) or not (0). */
    String figures() {
      return tasks + "," + runCoreMs + "," + cpuNs / 1_000_000L + "," + failedTasks + "," + failedRunCoreMs + ","
          + (reported ? 1 : 0);
    }
  }

  private final int taskCpus;
  private final Map<Integer, BatchKey> stageBatch =
      new LinkedHashMap<Integer, BatchKey>() {
        @Override
        protected boolean removeEldestEntry(Map.Entry<Integer, BatchKey> eldest) {
          return size() > STAGES_KEPT;
        }
      };
  private final Map<BatchKey, TaskCost> batchCost =
      new LinkedHashMap<BatchKey, TaskCost>() {
        @Override
        protected boolean removeEldestEntry(Map.Entry<BatchKey, TaskCost> eldest) {
          return size() > BATCHES_KEPT;
        }
      };
  private final Map<String, TaskCost> queryCost = new HashMap<>();
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
      BatchKey key = new BatchKey(query, batchOf(properties.getProperty(BATCH_ID_KEY)));
      synchronized (this) {
        stageBatch.put(submitted.stageInfo().stageId(), key);
      }
    }
  }

  private static long batchOf(String text) {
    if (text == null) {
      return NO_BATCH;
    }
    try {
      return Long.parseLong(text.trim());
    } catch (NumberFormatException notANumber) {
      return NO_BATCH;
    }
  }

  @Override
  public void onTaskEnd(SparkListenerTaskEnd ended) {
    TaskMetrics metrics = ended.taskMetrics();
    long coreMs = metrics == null ? 0L : Math.max(0L, metrics.executorRunTime()) * taskCpus;
    long cpuNs = metrics == null ? 0L : Math.max(0L, metrics.executorCpuTime());
    TaskInfo info = ended.taskInfo();
    boolean failed = info != null ? !info.successful() : !(ended.reason() instanceof org.apache.spark.Success$);
    allMs.add(coreMs);
    synchronized (this) {
      BatchKey key = stageBatch.get(ended.stageId());
      if (key == null) {
        return;
      }
      queryCost.computeIfAbsent(key.query, query -> new TaskCost()).add(coreMs, cpuNs, failed);
      batchCost.computeIfAbsent(key, batch -> new TaskCost()).add(coreMs, cpuNs, failed);
    }
  }

  /** A batch's progress event: every task of the batch ended before Spark posted it, so its figures are complete. */
  @Override
  public void onOtherEvent(SparkListenerEvent event) {
    if (event instanceof StreamingQueryListener.QueryProgressEvent) {
      var progress = ((StreamingQueryListener.QueryProgressEvent) event).progress();
      BatchKey key = new BatchKey(progress.id().toString(), progress.batchId());
      synchronized (this) {
        batchCost.computeIfAbsent(key, batch -> new TaskCost()).reported = true;
      }
    }
  }

  /**
   * The figures of batch {@code batchId} of streaming query {@code queryId}: "tasks,run core-ms,CPU ms,failed
   * tasks,failed run core-ms,reported" (run core-ms counts every attempt, the failed and killed ones included;
   * reported: 1 once the batch's progress event came, so that every task of it is counted). All 0 for a batch
   * unknown (no task yet, or no longer kept).
   */
  public synchronized String batchCost(String queryId, long batchId) {
    TaskCost cost = batchCost.get(new BatchKey(queryId, batchId));
    return (cost == null ? new TaskCost() : cost).figures();
  }

  /** The figures of every task of streaming query {@code queryId} so far, as {@link #batchCost} gives a batch's. */
  public synchronized String queryCost(String queryId) {
    TaskCost cost = queryCost.get(queryId);
    return (cost == null ? new TaskCost() : cost).figures();
  }

  /**
   * The figures of the kept batches of streaming query {@code queryId} whose id is above {@code batchId}, summed as
   * {@link #queryCost} sums them (reported: 0): what a reader that has taken the batches up to {@code batchId} has
   * still to take.
   */
  public synchronized String queryCostAfter(String queryId, long batchId) {
    TaskCost sum = new TaskCost();
    for (Map.Entry<BatchKey, TaskCost> entry : batchCost.entrySet()) {
      BatchKey key = entry.getKey();
      if (key.batch > batchId && key.query.equals(queryId)) {
        TaskCost cost = entry.getValue();
        sum.tasks += cost.tasks;
        sum.runCoreMs += cost.runCoreMs;
        sum.cpuNs += cost.cpuNs;
        sum.failedTasks += cost.failedTasks;
        sum.failedRunCoreMs += cost.failedRunCoreMs;
      }
    }
    return sum.figures();
  }

  /** Core-milliseconds the tasks of streaming query {@code queryId} executed so far (0 before its first task). */
  public synchronized long queryCoreMs(String queryId) {
    TaskCost cost = queryCost.get(queryId);
    return cost == null ? 0L : cost.runCoreMs;
  }

  /** Core-milliseconds every task of the application executed since this listener was added. */
  public long allCoreMs() {
    return allMs.sum();
  }
}
