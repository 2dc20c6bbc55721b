package io.pacer.spark;

import com.fasterxml.jackson.databind.JsonNode;
import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The Kafka timestamps of the oldest and the newest record of a snapshot: in each partition that
 * grew, one fetch of the record at the snapshot's start offset and one of the record before its
 * end offset, with a consumer of pacer's own built from the source's {@code kafka.*} options (the
 * same brokers and security settings as the query's).
 *
 * <p>Kafka's client is on the classpath wherever Spark's Kafka source is, but not at compile
 * time (this jar is compiled against the pyspark wheel's jars only), so it is reached by
 * reflection. The consumer is assigned partitions and seeks; it joins no group and commits
 * nothing. Every failure (no client, an unreachable broker, a fetch that times out) gives null:
 * the snapshot keeps the moment it was first seen as its arrival, and the reason is logged once.
 * The time spent fetching is counted ({@link #spentMs}, the source metric
 * {@code pacerSourceTimeMs}).
 */
final class KafkaRecordTimes implements AutoCloseable {

  private static final Logger LOG = LoggerFactory.getLogger(KafkaRecordTimes.class);
  /** How long one snapshot's fetch may take before its records' times are given up. */
  static final Duration FETCH_TIMEOUT = Duration.ofSeconds(2);

  private final Properties props = new Properties();
  private Object consumer;
  private Class<?> partitionClass;
  private boolean broken;
  private long failures;
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
   * The least Kafka timestamp (ms) among the records at {@code prevJson}'s offsets and the greatest
   * among the last records before {@code nextJson}'s, over the partitions where {@code nextJson}
   * is ahead ({@code {topic: {partition: offset}}}); null when unknown.
   */
  synchronized long[] spanMs(String prevJson, String nextJson) {
    if (broken || prevJson == null) {
      return null;
    }
    long t0 = System.nanoTime();
    try {
      Map<Object, long[]> ranges = ranges(prevJson, nextJson);
      return ranges.isEmpty() ? null : fetchSpan(ranges);
    } catch (ReflectiveOperationException | LinkageError missing) { // no Kafka client to read them with
      broken = true;
      Throwable cause = missing.getCause() != null ? missing.getCause() : missing;
      LOG.warn("pacer: cannot read Kafka record timestamps ({}); this query's arrivals are the moments"
          + " pacer first saw the data", cause.toString());
      return null;
    } catch (RuntimeException failed) { // one fetch failed (a timeout, a leader moving): this snapshot only
      if (failures++ == 0) {
        LOG.warn("pacer: reading Kafka record timestamps failed ({}); that snapshot is dated when pacer"
            + " saw it, later ones are read again (the driver's report counts source_time_missing)",
            failed.toString());
      } else {
        LOG.debug("reading Kafka record timestamps failed again", failed);
      }
      return null;
    } finally {
      spentNanos += System.nanoTime() - t0;
      fetches++;
    }
  }

  /**
   * Where the records of the jump from {@code prevJson} to {@code nextJson} cross {@code pieces - 1} evenly
   * spaced moments between its oldest and its newest record: each a {@code {topic: {partition: offset}}}
   * JSON like {@code nextJson} (a partition that did not grow keeps its offset), in time order, each
   * partition's offset within its range; the same cut twice is given once. Kafka finds them
   * ({@code offsetsForTimes}: the first offset at or after a moment). Empty where the times are unknown,
   * the jump spans less than a second, or a lookup fails (the jump is then cut by rows alone).
   */
  synchronized List<String> timeCuts(String prevJson, String nextJson, int pieces) {
    if (broken || prevJson == null || pieces < 2) {
      return List.of();
    }
    long t0 = System.nanoTime();
    try {
      Map<Object, long[]> ranges = ranges(prevJson, nextJson);
      long[] span = ranges.isEmpty() ? null : fetchSpan(ranges);
      if (span == null || span[1] - span[0] < 1000) {
        return List.of();
      }
      Object kafka = consumer();
      Method lookup = kafka.getClass().getMethod("offsetsForTimes", Map.class, Duration.class);
      Method topicOf = partitionClass.getMethod("topic");
      Method partitionOf = partitionClass.getMethod("partition");
      List<String> cuts = new ArrayList<>();
      String last = null;
      for (int k = 1; k < pieces; k++) {
        Map<Object, Long> moments = new HashMap<>();
        long moment = span[0] + (span[1] - span[0]) * k / pieces;
        for (Object tp : ranges.keySet()) {
          moments.put(tp, moment);
        }
        Map<?, ?> found = (Map<?, ?>) lookup.invoke(kafka, moments, FETCH_TIMEOUT);
        com.fasterxml.jackson.databind.node.ObjectNode cut =
            (com.fasterxml.jackson.databind.node.ObjectNode) OffsetSnapshot.JSON.readTree(nextJson);
        for (Map.Entry<Object, long[]> e : ranges.entrySet()) {
          Object at = found.get(e.getKey()); // an OffsetAndTimestamp; null: no record that late
          long offset = at == null ? e.getValue()[1] : (Long) at.getClass().getMethod("offset").invoke(at);
          offset = Math.max(e.getValue()[0], Math.min(e.getValue()[1], offset));
          ((com.fasterxml.jackson.databind.node.ObjectNode) cut.get((String) topicOf.invoke(e.getKey())))
              .put(Integer.toString((Integer) partitionOf.invoke(e.getKey())), offset);
        }
        String json = cut.toString();
        if (!json.equals(last)) {
          cuts.add(json);
          last = json;
        }
      }
      return cuts;
    } catch (Exception failed) { // reflection, a timeout, a JSON surprise: cut by rows alone
      LOG.debug("pacer: cutting a Kafka jump by its records' times failed", failed);
      return List.of();
    } finally {
      spentNanos += System.nanoTime() - t0;
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

  /** Per partition that grew, its {start, end} offsets. */
  private Map<Object, long[]> ranges(String prevJson, String nextJson) throws ReflectiveOperationException {
    Map<Object, long[]> ranges = new HashMap<>();
    JsonNode prev;
    JsonNode next;
    try {
      prev = OffsetSnapshot.JSON.readTree(prevJson);
      next = OffsetSnapshot.JSON.readTree(nextJson);
    } catch (Exception notJson) {
      return ranges;
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
          ranges.put(partition.newInstance(topic.getKey(), Integer.parseInt(part.getKey())),
              new long[] {before.asLong(), part.getValue().asLong()});
        }
      }
    }
    return ranges;
  }

  /**
   * Reads each partition's first record at or after its start (the oldest), then seeks to the
   * offset before its end and reads on until its position reaches the end (the newest: the last
   * record read below the end, so transaction markers and compacted gaps are passed over).
   */
  private long[] fetchSpan(Map<Object, long[]> ranges) throws ReflectiveOperationException {
    Object kafka = consumer();
    Class<?> kind = kafka.getClass();
    kind.getMethod("assign", java.util.Collection.class).invoke(kafka, new ArrayList<>(ranges.keySet()));
    Method seek = kind.getMethod("seek", partitionClass, long.class);
    Method position = kind.getMethod("position", partitionClass);
    Method pause = kind.getMethod("pause", java.util.Collection.class);
    Constructor<?> partition = partitionClass.getConstructor(String.class, int.class);
    for (Map.Entry<Object, long[]> e : ranges.entrySet()) {
      seek.invoke(kafka, e.getKey(), e.getValue()[0]);
    }
    Method poll = kind.getMethod("poll", Duration.class);
    Map<Object, Long> oldest = new HashMap<>();
    Map<Object, long[]> newest = new HashMap<>(); // {offset, timestamp} of the last record read below the end
    Set<Object> done = new HashSet<>();
    Set<Object> jumped = new HashSet<>();
    long deadline = System.nanoTime() + FETCH_TIMEOUT.toNanos();
    Class<?> recordClass = null;
    Method topic = null;
    Method partitionOf = null;
    Method offsetOf = null;
    Method timestampOf = null;
    while (done.size() < ranges.size() && System.nanoTime() < deadline) {
      Object records = poll.invoke(kafka, Duration.ofMillis(100));
      for (Object record : (Iterable<?>) records) {
        if (record.getClass() != recordClass) { // looked up once per fetch, not once per record
          recordClass = record.getClass();
          topic = recordClass.getMethod("topic");
          partitionOf = recordClass.getMethod("partition");
          offsetOf = recordClass.getMethod("offset");
          timestampOf = recordClass.getMethod("timestamp");
        }
        Object tp = partition.newInstance(topic.invoke(record), partitionOf.invoke(record));
        long offset = (Long) offsetOf.invoke(record);
        long[] range = ranges.get(tp);
        if (range == null || offset < range[0] || offset >= range[1] || done.contains(tp)) {
          continue;
        }
        long timestamp = (Long) timestampOf.invoke(record);
        oldest.putIfAbsent(tp, timestamp);
        long[] last = newest.get(tp);
        if (last == null || offset > last[0]) {
          newest.put(tp, new long[] {offset, timestamp});
        }
      }
      for (Map.Entry<Object, long[]> e : ranges.entrySet()) {
        Object tp = e.getKey();
        long end = e.getValue()[1];
        if (done.contains(tp) || !oldest.containsKey(tp)) {
          continue;
        }
        if (!jumped.contains(tp) && newest.get(tp)[0] < end - 1) {
          seek.invoke(kafka, tp, end - 1);
          jumped.add(tp);
        } else if ((Long) position.invoke(kafka, tp) >= end) {
          done.add(tp);
          pause.invoke(kafka, List.of(tp));
        }
      }
    }
    kind.getMethod("unsubscribe").invoke(kafka);
    if (done.size() < ranges.size()) {
      LOG.debug("pacer: Kafka timestamps of {} of {} partitions fetched within {}", done.size(),
          ranges.size(), FETCH_TIMEOUT);
    }
    Long first = oldest.values().stream().filter(t -> t >= 0).min(Long::compare).orElse(null);
    if (first == null) {
      return null;
    }
    long last = newest.values().stream().mapToLong(n -> n[1]).filter(t -> t >= 0).max().orElse(first);
    return new long[] {first, Math.max(first, last)};
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
