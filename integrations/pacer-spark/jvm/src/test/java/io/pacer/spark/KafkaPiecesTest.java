package io.pacer.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.List;
import org.junit.jupiter.api.Test;

/** {@link KafkaPieces}: how a Kafka jump's parts share the pieces, and the offsets between two cuts. */
class KafkaPiecesTest {

  @Test
  void aBurstAndTheTrickleBehindItShareThePiecesByRows() {
    // a 100 000-record burst in the first part, then 2 000 records spread over the other seven
    List<Long> parts = List.of(100_000L, 300L, 300L, 300L, 300L, 300L, 300L, 200L);
    assertArrayEquals(new int[] {9, 1, 1, 1, 1, 1, 1, 1}, KafkaPieces.allot(parts, 16, 4096));
  }

  @Test
  void anEmptyPartGetsNoPieceAndSmallPartsNoMoreThanOne() {
    assertArrayEquals(new int[] {1, 0, 1}, KafkaPieces.allot(List.of(3000L, 0L, 4000L), 16, 4096));
    assertArrayEquals(new int[] {3, 0}, KafkaPieces.allot(List.of(10_000L, 0L), 16, 4096));
  }

  @Test
  void thePiecesNeverExceedTheBudget() {
    int[] pieces = KafkaPieces.allot(List.of(1_000_000L, 1_000_000L), 5, 4096);
    assertEquals(5, pieces[0] + pieces[1]);
    assertArrayEquals(new int[] {3, 2}, pieces);
  }

  @Test
  void betweenSplitsEachPartitionInProportionAndStartsANewOneAtItsEnd() throws Exception {
    JsonNode from = OffsetSnapshot.JSON.readTree("{\"t\":{\"0\":100,\"1\":0}}");
    JsonNode to = OffsetSnapshot.JSON.readTree("{\"t\":{\"0\":200,\"1\":40,\"2\":7}}");
    assertEquals("{\"t\":{\"0\":125,\"1\":10,\"2\":7}}", KafkaPieces.between(from, to, 1, 4).toString());
  }
}
