package io.pacer.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Iterator;
import java.util.Map;
import org.apache.spark.sql.connector.read.streaming.Offset;

/**
 * One observed change of the delegate's latest offset: one pacer dataset.
 *
 * <p>{@code offset} is the delegate's own offset object (a batch may end at it); rows, files and
 * bytes are what could be measured from the delta to the previous snapshot (null when unknown).
 * {@code sourceTimeMs} is the oldest data's own time where the delegate has one (a Kafka record's
 * timestamp, a file's modification time, the rate source's {@code timestamp} column), else null:
 * the decider then dates the snapshot at {@code arrivalMs}, the moment it could first be seen.
 * {@code sourceNewestMs} is the newest data's own time (the Kafka timestamp of the record before
 * the snapshot's end offset, the newest file's modification time, rate's last second), else null:
 * the snapshot's rows are dated as spread between the two.
 */
final class OffsetSnapshot {

  static final ObjectMapper JSON = new ObjectMapper();

  final long seq;
  final Offset offset;
  final String json;
  final long arrivalMs;
  final Long rows;
  final Long files;
  final Long bytes;
  final boolean bytesEstimated;
  final Long sourceTimeMs;
  final Long sourceNewestMs;

  OffsetSnapshot(long seq, Offset offset, long arrivalMs, Long rows, Long files, Long bytes,
      boolean bytesEstimated, Long sourceTimeMs, Long sourceNewestMs) {
    this.seq = seq;
    this.offset = offset;
    this.json = offset.json();
    this.arrivalMs = arrivalMs;
    this.rows = rows;
    this.files = files;
    this.bytes = bytes;
    this.bytesEstimated = bytesEstimated;
    this.sourceTimeMs = sourceTimeMs;
    this.sourceNewestMs = sourceTimeMs == null ? null : sourceNewestMs;
  }

  /** This snapshot as one element of the request's {@code snapshots} array. */
  ObjectNode toJson() {
    ObjectNode node = JSON.createObjectNode();
    node.put("seq", seq);
    node.put("offset", json);
    node.put("arrival", arrivalMs / 1000.0);
    putNullable(node, "rows", rows);
    putNullable(node, "files", files);
    putNullable(node, "bytes", bytes);
    node.put("bytes_estimated", bytesEstimated);
    putSeconds(node, "source_time", sourceTimeMs);
    putSeconds(node, "source_newest", sourceNewestMs);
    return node;
  }

  private static void putSeconds(ObjectNode node, String field, Long ms) {
    if (ms == null) {
      node.putNull(field);
    } else {
      node.put(field, ms / 1000.0);
    }
  }

  private static void putNullable(ObjectNode node, String field, Long value) {
    if (value == null) {
      node.putNull(field);
    } else {
      node.put(field, value.longValue());
    }
  }

  /**
   * Rows between two offsets written as {@code {topic: {partition: offset}}} (Kafka's form), or
   * null when either is not of that form or a partition of {@code next} is missing in {@code prev}.
   */
  static Long partitionOffsetRows(String prevJson, String nextJson) {
    if (prevJson == null) {
      return null;
    }
    try {
      JsonNode prev = JSON.readTree(prevJson);
      JsonNode next = JSON.readTree(nextJson);
      if (!next.isObject() || !prev.isObject() || next.size() == 0) {
        return null;
      }
      long rows = 0;
      for (Iterator<Map.Entry<String, JsonNode>> topics = next.fields(); topics.hasNext(); ) {
        Map.Entry<String, JsonNode> topic = topics.next();
        JsonNode prevTopic = prev.get(topic.getKey());
        if (!topic.getValue().isObject() || prevTopic == null || !prevTopic.isObject()) {
          return null;
        }
        for (Iterator<Map.Entry<String, JsonNode>> parts = topic.getValue().fields();
            parts.hasNext(); ) {
          Map.Entry<String, JsonNode> part = parts.next();
          JsonNode before = prevTopic.get(part.getKey());
          if (!part.getValue().canConvertToLong() || before == null || !before.canConvertToLong()) {
            return null;
          }
          rows += Math.max(0L, part.getValue().asLong() - before.asLong());
        }
      }
      return rows;
    } catch (Exception notJson) {
      return null;
    }
  }
}
