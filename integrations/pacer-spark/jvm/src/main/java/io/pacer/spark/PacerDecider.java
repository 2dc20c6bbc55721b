package io.pacer.spark;

/**
 * What the driver's Python side implements (through the Py4J callback server) to decide where a
 * micro-batch of a {@code format("pacer")} source ends.
 *
 * <p>The wire format of {@code requestJson} and of the answer is documented in
 * {@code integrations/pacer-spark/jvm/README.md}.
 */
public interface PacerDecider {

  /**
   * Chooses the snapshot the next micro-batch ends at, and the scheduler pool it runs in.
   *
   * <p>Called on the query's stream thread, before the batch is planned: a decider may block here
   * until the batch's turn comes (pacer's FIFO/EDF gate).
   *
   * @param queryName the streaming query's name (or {@code pacer.query}, or its id)
   * @param requestJson the pending snapshots and the context, as JSON
   * @return JSON {@code {"seq": N, "pool": NAME}}: {@code seq} of the last snapshot to admit, or a
   *     negative number for "no batch now"; {@code pool} the fair-scheduler pool for the batch's
   *     jobs (null or absent: leave the thread's pool as it is)
   */
  String decide(String queryName, String requestJson);

  /**
   * The source run {@code run} of query {@code queryName} stopped (the query stopped, failed or is
   * restarting): no batch of that run waits for its turn any more. Called on the stream thread
   * while Spark stops the source, bounded by the registration's timeout; failures are logged.
   *
   * @param queryName as in {@link #decide}
   * @param eventJson {@code {"version": 6, "run": ID, "spark_run_id": UUID|null, "query_id":
   *     UUID|null, "failed_open": [...], "progress": [...], "options": {...}, "source": NAME,
   *     "first_batch_id": N, "run_started": MICROS}}: the admissions made without an answer that no
   *     later request reported, and the progress entries no request carried (whether the last
   *     batch's trigger ended); the run's identity and order, because the driver may handle the event
   *     after a later run's first ask
   */
  void stopped(String queryName, String eventJson);
}
