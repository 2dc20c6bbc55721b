package io.pacer.spark;

import com.fasterxml.jackson.databind.JsonNode;
import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The Kafka timestamp of the oldest record of a snapshot: one fetch of the record at the
 * snapshot's start offset in each partition that grew, with a consumer of pacer's own built from
 * the source's {@code kafka.*} options (the same brokers and security settings as the query's).
 *
 * <p>Kafka's client is on the classpath wherever Spark's Kafka source is, but not at compile
 * time (this jar is compiled against the pyspark wheel's jars only), so it is reached by
 * reflection. The consumer is assigned partitions and seeks; it joins no group and commits
 * nothing. Every failure (no client, an unreachable broker, a fetch that times out) gives null:
 * the snapshot keeps the moment it was first seen as its arrival, and the reason is logged once.
 * The time spent fetching is counted ({@link #spentMs}, the source metric
 * {@code pacer.sourceTimeMs}).
 */
final class KafkaRecordTimes implements AutoCloseable {

  private static final Logger LOG = LoggerFactory.getLogger(KafkaRecordTimes.class);
  /** How long one snapshot's fetch may take before its records' times are given up. */
  static final Duration FETCH_TIMEOUT = Duration.ofSeconds(2);

  private final Properties props = new Properties();
  private Object consumer;
  private Class<?> partitionClass;
  private boolean broken;
  private long spentNanos;
  private long fetches;

  KafkaRecordTimes(Map<String, String> sourceOptions) {
    for (Map.Entry<String, String> e : sourceOptions.entrySet()) {
      String key = e.getKey();
      if (key.toLowerCase(Locale.ROOT).startsWith("kafka.")) {
        props.put(key.substring("kafka.".length()), e.getValue());
      }
    }
    String bytes = "org.apache.kafka.common.serialization.ByteArrayDeserializer";
    props.put("key.deserializer", bytes);
    props.put("value.deserializer", bytes);
    props.put("enable.auto.commit", "false");
    props.put("max.partition.fetch.bytes", "65536"); // one record is wanted; Kafka sends one at least
    props.remove("group.id");
  }

  /** Whether {@code options} configure a Kafka source this can read ({@code kafka.bootstrap.servers}). */
  static boolean applies(Map<String, String> sourceOptions) {
    return sourceOptions.keySet().stream()
        .anyMatch(k -> k.equalsIgnoreCase("kafka.bootstrap.servers"));
  }

  /**
   * The least Kafka timestamp (ms) among the records at {@code prevJson}'s offsets in the
   * partitions where {@code nextJson} is ahead ({@code {topic: {partition: offset}}}); null when
   * unknown.
   */
  synchronized Long oldestMs(String prevJson, String nextJson) {
    if (broken || prevJson == null) {
      return null;
    }
    long t0 = System.nanoTime();
    try {
      Map<Object, Long> starts = starts(prevJson, nextJson);
      return starts.isEmpty() ? null : fetchOldest(starts);
    } catch (ReflectiveOperationException | RuntimeException | LinkageError failed) {
      broken = true;
      Throwable cause = failed.getCause() != null ? failed.getCause() : failed;
      LOG.warn("pacer: cannot read Kafka record timestamps ({}); this query's arrivals are the moments"
          + " pacer first saw the data", cause.toString());
      return null;
    } finally {
      spentNanos += System.nanoTime() - t0;
      fetches++;
    }
  }

  /** Milliseconds spent fetching so far. */
  synchronized long spentMs() {
    return spentNanos / 1_000_000L;
  }

  /** Snapshots whose times were fetched so far. */
  synchronized long fetches() {
    return fetches;
  }

  private Map<Object, Long> starts(String prevJson, String nextJson) throws ReflectiveOperationException {
    Map<Object, Long> starts = new HashMap<>();
    JsonNode prev;
    JsonNode next;
    try {
      prev = OffsetSnapshot.JSON.readTree(prevJson);
      next = OffsetSnapshot.JSON.readTree(nextJson);
    } catch (Exception notJson) {
      return starts;
    }
    if (partitionClass == null) {
      partitionClass = Class.forName("org.apache.kafka.common.TopicPartition");
    }
    Constructor<?> partition = partitionClass.getConstructor(String.class, int.class);
    for (Iterator<Map.Entry<String, JsonNode>> topics = next.fields(); topics.hasNext(); ) {
      Map.Entry<String, JsonNode> topic = topics.next();
      for (Iterator<Map.Entry<String, JsonNode>> parts = topic.getValue().fields(); parts.hasNext(); ) {
        Map.Entry<String, JsonNode> part = parts.next();
        JsonNode before = prev.path(topic.getKey()).path(part.getKey());
        if (before.canConvertToLong() && part.getValue().canConvertToLong()
            && part.getValue().asLong() > before.asLong() && before.asLong() >= 0) {
          starts.put(partition.newInstance(topic.getKey(), Integer.parseInt(part.getKey())), before.asLong());
        }
      }
    }
    return starts;
  }

  private Long fetchOldest(Map<Object, Long> starts) throws ReflectiveOperationException {
    Object kafka = consumer();
    Class<?> kind = kafka.getClass();
    kind.getMethod("assign", java.util.Collection.class).invoke(kafka, new ArrayList<>(starts.keySet()));
    Method seek = kind.getMethod("seek", partitionClass, long.class);
    for (Map.Entry<Object, Long> e : starts.entrySet()) {
      seek.invoke(kafka, e.getKey(), e.getValue());
    }
    Method poll = kind.getMethod("poll", Duration.class);
    Map<Object, Long> found = new HashMap<>();
    long deadline = System.nanoTime() + FETCH_TIMEOUT.toNanos();
    while (found.size() < starts.size() && System.nanoTime() < deadline) {
      Object records = poll.invoke(kafka, Duration.ofMillis(100));
      for (Object record : (Iterable<?>) records) {
        Object tp = partitionClass.getConstructor(String.class, int.class).newInstance(
            record.getClass().getMethod("topic").invoke(record),
            record.getClass().getMethod("partition").invoke(record));
        if (!found.containsKey(tp)) { // the first record at or after the start: the oldest
          found.put(tp, (Long) record.getClass().getMethod("timestamp").invoke(record));
          kind.getMethod("pause", java.util.Collection.class).invoke(kafka, List.of(tp));
        }
      }
    }
    kind.getMethod("unsubscribe").invoke(kafka);
    if (found.size() < starts.size()) {
      LOG.debug("pacer: Kafka timestamps of {} of {} partitions fetched within {}", found.size(),
          starts.size(), FETCH_TIMEOUT);
    }
    return found.values().stream().filter(t -> t >= 0).min(Long::compare).orElse(null);
  }

  private Object consumer() throws ReflectiveOperationException {
    if (consumer == null) {
      Class<?> kind = Class.forName("org.apache.kafka.clients.consumer.KafkaConsumer");
      consumer = kind.getConstructor(Properties.class).newInstance(props);
    }
    return consumer;
  }

  @Override
  public synchronized void close() {
    if (consumer != null) {
      try {
        consumer.getClass().getMethod("close", Duration.class).invoke(consumer, Duration.ofSeconds(2));
      } catch (ReflectiveOperationException | RuntimeException ignored) {
        LOG.debug("closing pacer's Kafka timestamp consumer failed", ignored);
      }
      consumer = null;
    }
  }
}
