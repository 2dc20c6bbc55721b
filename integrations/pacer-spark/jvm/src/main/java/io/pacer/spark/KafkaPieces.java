package io.pacer.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

/** The arithmetic of cutting a Kafka jump into pieces ({@link PacerSource}'s {@code kafkaSteps}). */
final class KafkaPieces {

  private KafkaPieces() {}

  /**
   * How many pieces each part of a jump is cut into: one for each part with rows (none for an empty
   * one), then the rest of {@code budget} one at a time to the part whose pieces are largest, while
   * they hold more than {@code pieceRows} rows.
   */
  static int[] allot(List<Long> partRows, int budget, long pieceRows) {
    int[] pieces = new int[partRows.size()];
    int left = budget;
    for (int i = 0; i < pieces.length; i++) {
      if (partRows.get(i) > 0) {
        pieces[i] = 1;
        left--;
      }
    }
    while (left > 0) {
      int widest = -1;
      for (int i = 0; i < pieces.length; i++) {
        if (pieces[i] > 0 && partRows.get(i) / pieces[i] > pieceRows
            && (widest < 0 || partRows.get(i) / pieces[i] > partRows.get(widest) / pieces[widest])) {
          widest = i;
        }
      }
      if (widest < 0) {
        break;
      }
      pieces[widest]++;
      left--;
    }
    return pieces;
  }

  /**
   * The offsets {@code k / n} of the way from {@code from} to {@code to} ({@code {topic: {partition:
   * offset}}}), each partition's offsets split in proportion; a partition {@code from} lacks starts at its end.
   */
  static ObjectNode between(JsonNode from, JsonNode to, int k, int n) {
    ObjectNode step = OffsetSnapshot.JSON.createObjectNode();
    for (Iterator<Map.Entry<String, JsonNode>> topics = to.fields(); topics.hasNext(); ) {
      Map.Entry<String, JsonNode> topic = topics.next();
      ObjectNode parts = step.putObject(topic.getKey());
      for (Iterator<Map.Entry<String, JsonNode>> it = topic.getValue().fields(); it.hasNext(); ) {
        Map.Entry<String, JsonNode> part = it.next();
        long end = part.getValue().asLong();
        long start = from.path(topic.getKey()).path(part.getKey()).asLong(end);
        parts.put(part.getKey(), start + (end - start) * k / n);
      }
    }
    return step;
  }
}
