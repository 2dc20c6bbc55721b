package io.pacer.spark;

import java.lang.reflect.InvocationTargetException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Before a {@code format("pacer")} query on Kafka starts: every topic its {@code subscribe} option
 * names exists on the cluster at {@code kafka.bootstrap.servers}.
 *
 * <p>Spark's Kafka source on a missing topic fails only once its offset requests have timed out
 * ({@code kafka.default.api.timeout.ms} x {@code fetchOffset.numRetries}), with Kafka's {@code
 * UnknownTopicOrPartitionException: This server does not host this topic-partition} in a trace
 * that names no topic. This asks the cluster once, with a consumer of its own built from the
 * source's {@code kafka.*} options (the query's brokers and security settings), and refuses the
 * query with a message naming the topic, the servers and what to do ({@link #missingMessage}, the
 * words of {@code pacer run}'s own check, {@code pacer_spark.run.kafka_run.missing_topic_message}).
 * Where the cluster cannot be asked (no Kafka client, no broker answering within {@link #TIMEOUT})
 * it says so at WARN and lets the query start: Spark's own errors follow. With Spark's deprecated
 * consumer-based offset fetching ({@code spark.sql.streaming.kafka.useDeprecatedOffsetFetching}),
 * where a broker may create a subscribed topic, a missing topic is only warned of. {@code
 * subscribePattern} and {@code assign} are not checked. Kafka's client is reached by reflection,
 * as in {@link KafkaRecordTimes}.
 */
final class KafkaTopicCheck {

  private static final Logger LOG = LoggerFactory.getLogger(KafkaTopicCheck.class);
  /** How long the cluster is asked for its topics before the check gives up (and warns). */
  static final Duration TIMEOUT = Duration.ofSeconds(10);

  private KafkaTopicCheck() {}

  /** The topics of a {@code subscribe} option (comma-separated); empty without one. */
  static List<String> subscribed(Map<String, String> sourceOptions) {
    List<String> topics = new ArrayList<>();
    for (Map.Entry<String, String> e : sourceOptions.entrySet()) {
      if (e.getKey().equalsIgnoreCase("subscribe") && e.getValue() != null) {
        for (String t : e.getValue().split(",")) {
          if (!t.isBlank()) {
            topics.add(t.trim());
          }
        }
      }
    }
    return topics;
  }

  static String servers(Map<String, String> sourceOptions) {
    for (Map.Entry<String, String> e : sourceOptions.entrySet()) {
      if (e.getKey().equalsIgnoreCase("kafka.bootstrap.servers")) {
        return e.getValue();
      }
    }
    return null;
  }

  /**
   * One line: {@code topic} does not exist at {@code servers}, which topics do (the ten nearest the
   * name asked for first, by the prefix they share with it: a typo's target leads), and how to create
   * it (as {@code pacer_spark.run.kafka_run.missing_topic_message} says it).
   */
  static String missingMessage(String servers, String topic, Set<String> existing) {
    List<String> others = new ArrayList<>();
    for (String t : new TreeSet<>(existing)) {
      if (!t.startsWith("__")) {
        others.add(t);
      }
    }
    others.sort(Comparator.comparingInt((String t) -> -sharedPrefix(t, topic))
        .thenComparing(Comparator.naturalOrder()));
    String listed = others.isEmpty() ? " (it has no topic yet)"
        : " (it has " + others.size() + ": " + String.join(", ", others.subList(0, Math.min(10, others.size())))
            + (others.size() > 10 ? ", ..." : "") + ")";
    return "Kafka topic '" + topic + "' does not exist on the cluster at " + servers + listed
        + "; create it with `pacer kafka create-topic --bootstrap-servers " + servers + " --topic " + topic
        + " --partitions N` (no records), or fill it with `pacer produce --bootstrap-servers " + servers
        + " --topic " + topic + " --workload W --rate R --duration S` (creates it), or correct the query's"
        + " subscribe option, then start the query again";
  }
  /** How many leading characters {@code a} and {@code b} share. */
  static int sharedPrefix(String a, String b) {
    int n = 0;
    while (n < a.length() && n < b.length() && a.charAt(n) == b.charAt(n)) {
      n++;
    }
    return n;
  }


  /**
   * Check {@code sourceOptions}' subscribed topics (a no-op for any other source).
   *
   * @param warnOnly whether a missing topic is only logged (a broker may create it)
   * @throws IllegalArgumentException a subscribed topic does not exist (unless {@code warnOnly})
   */
  static void check(Map<String, String> sourceOptions, boolean warnOnly) {
    List<String> topics = subscribed(sourceOptions);
    String servers = servers(sourceOptions);
    if (topics.isEmpty() || servers == null) {
      return;
    }
    Set<String> existing;
    try {
      existing = listTopics(sourceOptions);
    } catch (ReflectiveOperationException | RuntimeException | LinkageError e) {
      Throwable cause = e instanceof InvocationTargetException ? e.getCause() : e;
      LOG.warn("pacer could not ask the Kafka cluster at {} whether topic(s) {} exist ({}); the query"
          + " starts, and Spark's Kafka source reports what it finds", servers, topics, String.valueOf(cause));
      return;
    }
    for (String topic : topics) {
      if (!existing.contains(topic)) {
        String message = missingMessage(servers, topic, existing);
        if (warnOnly) {
          LOG.warn("{} (the query starts: with deprecated offset fetching a broker may create it)", message);
          return;
        }
        throw new IllegalArgumentException(message);
      }
    }
  }

  @SuppressWarnings("unchecked")
  private static Set<String> listTopics(Map<String, String> sourceOptions)
      throws ReflectiveOperationException {
    Properties props = new Properties();
    for (Map.Entry<String, String> e : sourceOptions.entrySet()) {
      if (e.getKey().toLowerCase(Locale.ROOT).startsWith("kafka.")) {
        props.put(e.getKey().substring("kafka.".length()), e.getValue());
      }
    }
    String bytes = "org.apache.kafka.common.serialization.ByteArrayDeserializer";
    props.put("key.deserializer", bytes);
    props.put("value.deserializer", bytes);
    props.put("enable.auto.commit", "false");
    props.put("allow.auto.create.topics", "false");
    props.remove("group.id");
    Class<?> kind = Class.forName("org.apache.kafka.clients.consumer.KafkaConsumer");
    Object consumer = kind.getConstructor(Properties.class).newInstance(props);
    try {
      Map<String, ?> topics = (Map<String, ?>) kind.getMethod("listTopics", Duration.class)
          .invoke(consumer, TIMEOUT);
      return new TreeSet<>(topics.keySet());
    } finally {
      try {
        kind.getMethod("close", Duration.class).invoke(consumer, Duration.ofSeconds(2));
      } catch (ReflectiveOperationException | RuntimeException ignored) {
        LOG.debug("closing pacer's Kafka topic-check consumer failed", ignored);
      }
    }
  }
}
