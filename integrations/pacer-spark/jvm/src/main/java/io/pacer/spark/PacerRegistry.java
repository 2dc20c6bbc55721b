package io.pacer.spark;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.sql.SparkSession;

/**
 * The JVM-wide registry of deciders, as PySpark keeps its foreachBatch and listener callbacks:
 * Python registers an object, the source looks it up on every decision, so a decider can be
 * replaced or removed while the query runs.
 *
 * <p>Every registration belongs to an <em>owner</em> (one Python {@code PacerBridge}, i.e. one
 * {@code attach()}), names a query (or {@value #ANY_QUERY} for every query) and may name the
 * SparkSession it was made for. A source looks up the decider for its query name and its own
 * session: a registration for that session beats one for another session, an exact name beats
 * {@value #ANY_QUERY}, and the newest registration beats older ones. So two sessions may pace
 * queries of the same name, a query on a session nobody attached to is paced by the newest
 * attachment of the SparkContext, and an owner that goes away removes only its own registrations.
 */
public final class PacerRegistry {

  /** The name under which a decider serves every query without one of its own. */
  public static final String ANY_QUERY = "*";
  /** The owner of registrations made through {@link #register(String, PacerDecider)}. */
  public static final String DEFAULT_OWNER = "default";
  /** How long a source waits for a decider's answer unless its registration says otherwise. */
  public static final long DEFAULT_TIMEOUT_MS = 120_000L;

  /** One registration. */
  static final class Entry {
    final String owner;
    final String name;
    final SparkSession session;
    final PacerDecider decider;
    final long timeoutMs;
    final long order;

    Entry(String owner, String name, SparkSession session, PacerDecider decider, long timeoutMs,
        long order) {
      this.owner = owner;
      this.name = name;
      this.session = session;
      this.decider = decider;
      this.timeoutMs = timeoutMs;
      this.order = order;
    }
  }

  private static final List<Entry> ENTRIES = new ArrayList<>();
  private static final AtomicLong ORDER = new AtomicLong();
  private static final Map<String, AtomicLong> FALLBACK_WARNINGS = new ConcurrentHashMap<>();
  private static final Map<String, AtomicLong> DECISIONS = new ConcurrentHashMap<>();

  private PacerRegistry() {}

  /**
   * Registers (or replaces) {@code owner}'s decider of {@code queryName} for {@code session}.
   *
   * @param owner who registers (one per Python bridge); {@link #unregisterOwner} removes them all
   * @param session the session whose queries it decides first; null: no preference
   * @param queryName a query name, or {@value #ANY_QUERY}
   * @param decider the Python object (through Py4J's callback server)
   * @param timeoutMs how long a source waits for one answer before it admits without one
   */
  public static synchronized void register(String owner, SparkSession session, String queryName,
      PacerDecider decider, long timeoutMs) {
    if (owner == null || queryName == null || decider == null || timeoutMs <= 0) {
      throw new IllegalArgumentException("register(owner, session, queryName, decider, timeoutMs)"
          + " needs an owner, a name, a decider and a timeout > 0, got " + owner + ", "
          + queryName + ", " + decider + ", " + timeoutMs);
    }
    ENTRIES.removeIf(e -> e.owner.equals(owner) && e.name.equals(queryName));
    ENTRIES.add(new Entry(owner, queryName, session, decider, timeoutMs,
        ORDER.incrementAndGet()));
  }

  /** Registers {@code decider} for {@code queryName} under {@link #DEFAULT_OWNER}, any session. */
  public static void register(String queryName, PacerDecider decider) {
    register(DEFAULT_OWNER, null, queryName, decider, DEFAULT_TIMEOUT_MS);
  }

  /** Removes {@code owner}'s decider of {@code queryName}; returns whether there was one. */
  public static synchronized boolean unregister(String owner, String queryName) {
    return ENTRIES.removeIf(e -> e.owner.equals(owner) && e.name.equals(queryName));
  }

  /** Removes the {@link #DEFAULT_OWNER}'s decider of {@code queryName}. */
  public static boolean unregister(String queryName) {
    return unregister(DEFAULT_OWNER, queryName);
  }

  /** Removes every registration of {@code owner} (its Python side is going away); returns how many. */
  public static synchronized int unregisterOwner(String owner) {
    int before = ENTRIES.size();
    ENTRIES.removeIf(e -> e.owner.equals(owner));
    return before - ENTRIES.size();
  }

  /** Removes every registration. */
  public static synchronized void clear() {
    ENTRIES.clear();
  }

  /** The registration deciding {@code queryName} of a source created in {@code session}, or null. */
  static synchronized Entry lookupEntry(String queryName, SparkSession session) {
    Entry best = null;
    for (Entry e : ENTRIES) {
      if (!e.name.equals(queryName) && !e.name.equals(ANY_QUERY)) {
        continue;
      }
      if (best == null || rank(e, queryName, session) > rank(best, queryName, session)
          || (rank(e, queryName, session) == rank(best, queryName, session)
              && e.order > best.order)) {
        best = e;
      }
    }
    return best;
  }

  private static int rank(Entry e, String queryName, SparkSession session) {
    return (e.session != null && e.session == session ? 2 : 0)
        + (e.name.equals(queryName) ? 1 : 0);
  }

  /** The decider for {@code queryName} in any session: its own, else the {@value #ANY_QUERY} one. */
  public static PacerDecider lookup(String queryName) {
    Entry e = lookupEntry(queryName, null);
    return e == null ? null : e.decider;
  }

  /** Whether {@code queryName} has a decider of its own (of any owner). */
  public static synchronized boolean isRegistered(String queryName) {
    return ENTRIES.stream().anyMatch(e -> e.name.equals(queryName));
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
