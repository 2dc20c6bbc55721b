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
   * Chooses the snapshot the next micro-batch ends at.
   *
   * @param queryName the streaming query's name (or {@code pacer.query}, or its id)
   * @param requestJson the pending snapshots and the context, as JSON
   * @return the {@code seq} of the last snapshot to admit, or a negative number for "no batch now"
   */
  int decide(String queryName, String requestJson);
}
