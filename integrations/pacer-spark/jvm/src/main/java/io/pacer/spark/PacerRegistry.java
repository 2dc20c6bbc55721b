package io.pacer.spark;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The JVM-wide registry of deciders, one per query name, as PySpark keeps its foreachBatch and
 * listener callbacks: Python registers an object per query, the source looks it up on every
 * decision, so a decider can be replaced or removed while the query runs.
 *
 * <p>The name {@value #ANY_QUERY} registers a decider for every query that has none of its own.
 */
public final class PacerRegistry {

  /** The name under which a decider serves every query without one of its own. */
  public static final String ANY_QUERY = "*";

  private static final Map<String, PacerDecider> DECIDERS = new ConcurrentHashMap<>();
  private static final Map<String, AtomicLong> FALLBACK_WARNINGS = new ConcurrentHashMap<>();
  private static final Map<String, AtomicLong> DECISIONS = new ConcurrentHashMap<>();

  private PacerRegistry() {}

  /** Registers (or replaces) the decider of {@code queryName}. */
  public static void register(String queryName, PacerDecider decider) {
    if (queryName == null || decider == null) {
      throw new IllegalArgumentException("register(queryName, decider) needs both, got "
          + queryName + ", " + decider);
    }
    DECIDERS.put(queryName, decider);
  }

  /** Removes the decider of {@code queryName}; returns whether there was one. */
  public static boolean unregister(String queryName) {
    return DECIDERS.remove(queryName) != null;
  }

  /** Removes every decider (the Python session is going away). */
  public static void clear() {
    DECIDERS.clear();
  }

  /** The decider for {@code queryName}: its own, else the {@value #ANY_QUERY} one, else null. */
  public static PacerDecider lookup(String queryName) {
    PacerDecider own = DECIDERS.get(queryName);
    return own != null ? own : DECIDERS.get(ANY_QUERY);
  }

  /** Whether {@code queryName} has a decider of its own. */
  public static boolean isRegistered(String queryName) {
    return DECIDERS.containsKey(queryName);
  }

  /** How many times a source of {@code queryName} warned that it admits everything (once per source). */
  public static long fallbackWarnings(String queryName) {
    AtomicLong n = FALLBACK_WARNINGS.get(queryName);
    return n == null ? 0L : n.get();
  }

  /** How many decisions the Python side answered for {@code queryName}. */
  public static long decisions(String queryName) {
    AtomicLong n = DECISIONS.get(queryName);
    return n == null ? 0L : n.get();
  }

  static void recordFallbackWarning(String queryName) {
    FALLBACK_WARNINGS.computeIfAbsent(queryName, k -> new AtomicLong()).incrementAndGet();
  }

  static void recordDecision(String queryName) {
    DECISIONS.computeIfAbsent(queryName, k -> new AtomicLong()).incrementAndGet();
  }
}
