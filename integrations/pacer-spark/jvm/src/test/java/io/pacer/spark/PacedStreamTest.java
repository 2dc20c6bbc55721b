package io.pacer.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.mockito.Mockito.verify;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * {@link PacedStream}'s decisions when the decider answers: snapshots (one per change of the
 * delegate's latest offset), the answer ending the batch, the read-limit caps, the bound on what
 * waits, and the commits per admitted snapshot. Fail-open is {@link PacedStreamFailOpenTest}'s.
 */
class PacedStreamTest {

  private final String query = "q-" + UUID.randomUUID();
  private final SparkSession session = Fakes.session();
  private final Fakes.Decider decider = new Fakes.Decider();

  @BeforeEach
  void register() {
    PacerRegistry.register("test", session, query, decider, 10_000L);
  }

  @AfterEach
  void clear() {
    PacerRegistry.clear();
  }

  private List<Long> seqs(JsonNode request) {
    List<Long> seqs = new ArrayList<>();
    request.get("snapshots").forEach(s -> seqs.add(s.get("seq").asLong()));
    return seqs;
  }

  private List<Long> rows(JsonNode request) {
    List<Long> rows = new ArrayList<>();
    request.get("snapshots").forEach(s -> rows.add(s.get("rows").asLong()));
    return rows;
  }

  @Test
  void eachChangeOfTheLatestOffsetIsOneSnapshotAndTheAnswerEndsTheBatch() {
    Fakes.Counter counter = new Fakes.Counter();
    Fakes.Stream stream = new Fakes.Stream(session, counter, query);

    counter.available = 5;
    assertEquals(0, stream.next(0), "seq -1 (no batch now): the batch does not start");
    JsonNode first = decider.last();
    assertEquals(PacedStream.WIRE_VERSION, first.get("version").asInt());
    assertEquals(query, first.get("query").asText());
    assertEquals("5s", first.get("options").get("pacer.deadline").asText());
    assertEquals(List.of(0L), seqs(first));
    assertEquals(List.of(5L), rows(first));

    assertEquals(0, stream.next(0), "an offset that did not move adds no snapshot");
    assertEquals(List.of(0L), seqs(decider.last()));

    counter.available = 8;
    decider.answer = request -> "{\"seq\": 0}";
    assertEquals(5, stream.next(0), "the batch ends at the snapshot the decider named");
    assertEquals(List.of(0L, 1L), seqs(decider.last()));
    assertEquals(List.of(5L, 3L), rows(decider.last()));
    assertEquals(2, decider.last().get("admissible").asInt());

    decider.answer = Fakes.Decider::newest;
    assertEquals(8, stream.next(5), "the snapshot not admitted waits for the next batch");
    assertEquals(List.of(1L), seqs(decider.last()));

    JsonNode arrivals = decider.requests.get(2).get("snapshots");
    assertTrue(arrivals.get(0).get("arrival").asDouble() <= arrivals.get(1).get("arrival").asDouble(),
        "snapshots are dated oldest first");
    assertEquals("0", stream.metrics(Optional.empty()).get("pacerPendingSnapshots"));
    assertEquals("2", stream.metrics(Optional.empty()).get("pacerObservedSnapshots"));
    assertEquals("0", stream.metrics(Optional.empty()).get("pacerFallbacks"));
  }

  @Test
  void nothingPendingAndNothingToReportAsksNobody() {
    Fakes.Stream stream = new Fakes.Stream(session, new Fakes.Counter(), query);
    assertEquals(0, stream.next(0));
    assertTrue(decider.requests.isEmpty(), "no snapshot, no progress, no failed-open record: no call");
  }

  @Test
  void theAnswersPoolIsSetOnTheStreamThread() {
    Fakes.Counter counter = new Fakes.Counter();
    Fakes.Stream stream = new Fakes.Stream(session, counter, query);
    counter.available = 3;
    decider.answer = request -> "{\"seq\": 0, \"pool\": \"pacer-w4\"}";
    assertEquals(3, stream.next(0));
    verify(session.sparkContext()).setLocalProperty("spark.scheduler.pool", "pacer-w4");
  }

  @Test
  void anErrorAnswerFailsTheQueryNamingIt() {
    Fakes.Counter counter = new Fakes.Counter();
    Fakes.Stream stream = new Fakes.Stream(session, counter, query);
    counter.available = 3;
    decider.answer = request -> "{\"seq\": -1, \"error\": \"unknown option pacer.dedline\"}";
    IllegalArgumentException failed = assertThrows(IllegalArgumentException.class, () -> stream.next(0));
    assertEquals("pacer: unknown option pacer.dedline", failed.getMessage());
  }

  @Test
  void aReadLimitSplitsTheBacklogIntoLimitSizedSnapshotsAndCapsTheBatch() {
    Fakes.LimitedCounter counter = new Fakes.LimitedCounter();
    Fakes.Stream stream = new Fakes.Stream(session, counter, query);
    counter.available = 100;
    decider.answer = Fakes.Decider::newest; // everything, which the limit must cut

    assertEquals(30, stream.next(0, ReadLimit.maxRows(30)));
    assertEquals(List.of(30L, 30L, 30L, 10L), rows(decider.last()));
    assertEquals(1, decider.last().get("admissible").asInt(), "the request says how many fit the limit");
    assertEquals(5, counter.calls, "asked until the delegate stopped advancing");

    assertEquals(90, stream.next(30, ReadLimit.maxRows(65)), "65 rows: 30 + 30 fit, 30 + 30 + 10 do not");
    assertEquals(100, stream.next(90, ReadLimit.maxRows(1000)));
  }

  @Test
  void everyPartOfACompositeLimitCaps() {
    Fakes.Counter counter = new Fakes.Counter();
    Fakes.Stream stream = new Fakes.Stream(session, counter, query);
    decider.answer = Fakes.Decider::newest;
    long start = 0;
    for (long available : new long[] {10, 20, 30, 40}) { // four snapshots of 10 rows, 1 file, 100 bytes
      counter.available = available;
      decider.answer = request -> "{\"seq\": -1}";
      assertEquals(start, stream.next(start));
    }
    decider.answer = Fakes.Decider::newest;
    ReadLimit limit = ReadLimit.compositeLimit(new ReadLimit[] {
        ReadLimit.maxRows(1000), ReadLimit.maxFiles(3), ReadLimit.maxBytes(250)});
    assertEquals(20, stream.next(0, limit), "250 bytes: two snapshots of 100");
    assertEquals(40, stream.next(20, ReadLimit.maxFiles(3)));
  }

  @Test
  void aFirstSnapshotLargerThanTheLimitIsStillAdmittedAlone() {
    Fakes.Counter counter = new Fakes.Counter();
    Fakes.Stream stream = new Fakes.Stream(session, counter, query);
    counter.available = 50;
    decider.answer = request -> "{\"seq\": -1}";
    assertEquals(0, stream.next(0));
    counter.available = 60;
    decider.answer = Fakes.Decider::newest;
    assertEquals(50, stream.next(0, ReadLimit.maxRows(20)), "never stalls on an oversized snapshot");
  }

  @Test
  void unmeasurableSnapshotsGoOneABatchUnderALimit() {
    Fakes.Counter counter = new Fakes.Counter();
    Fakes.Stream stream = new Fakes.Stream(session, counter, query);
    stream.unmeasured = true;
    counter.available = 5;
    decider.answer = request -> "{\"seq\": -1}";
    stream.next(0);
    counter.available = 9;
    decider.answer = Fakes.Decider::newest;
    assertEquals(5, stream.next(0, ReadLimit.maxRows(1_000_000)), "size unknown: one snapshot at a time");
    assertEquals(9, stream.next(5, ReadLimit.allAvailable()), "no limit: no cap");
  }

  @Test
  void whatWaitsIsBoundedForASourceThatNeverRunsOut() {
    Fakes.LimitedCounter counter = new Fakes.LimitedCounter();
    Fakes.Stream stream = new Fakes.Stream(session, counter, query);
    counter.available = Long.MAX_VALUE / 2;
    for (int trigger = 0; trigger < 3; trigger++) {
      assertEquals(0, stream.next(0, ReadLimit.maxRows(1)));
    }
    assertEquals(String.valueOf(PacedStream.MAX_PENDING),
        stream.metrics(Optional.empty()).get("pacerPendingSnapshots"));
    assertEquals(PacedStream.MAX_PENDING, decider.last().get("snapshots").size());
    assertEquals(PacedStream.MAX_PENDING + 0L, Long.parseLong(
        stream.metrics(Optional.empty()).get("pacerObservedSnapshots")), "no look once the list is full");
  }

  @Test
  void withoutALimitTheDelegateIsStillLookedAtSparselyPastAHundredSnapshots() {
    Fakes.Counter counter = new Fakes.Counter();
    Fakes.Stream stream = new Fakes.Stream(session, counter, query);
    for (int i = 0; i < PacedStream.MAX_PENDING; i++) { // one snapshot every 10 ms, none admitted
      stream.clockMs = 10L * i;
      counter.available = i + 1;
      assertEquals(0, stream.next(0));
    }
    assertEquals(PacedStream.MAX_PENDING, decider.last().get("snapshots").size());

    stream.clockMs = 1000; // the oldest waited 1 s, the last look was 10 ms ago: due
    counter.available = 101;
    assertEquals(0, stream.next(0));
    assertEquals(PacedStream.MAX_PENDING + 1, decider.last().get("snapshots").size());

    stream.clockMs = 1005; // 5 ms since the last look, under a hundredth of the oldest's wait: not due
    counter.available = 102;
    assertEquals(0, stream.next(0));
    assertEquals(PacedStream.MAX_PENDING + 1, decider.last().get("snapshots").size());

    stream.clockMs = 1011; // due again: what came since the last look is one snapshot, dated from that look
    counter.available = 103;
    decider.answer = Fakes.Decider::newest;
    assertEquals(103, stream.next(0), "the batch takes every row the delegate had");
    JsonNode snaps = decider.last().get("snapshots");
    assertEquals(PacedStream.MAX_PENDING + 2, snaps.size());
    assertEquals(2, snaps.get(snaps.size() - 1).get("rows").asLong());
    assertEquals(1.0, snaps.get(snaps.size() - 1).get("arrival").asDouble(), 1e-9);
  }

  @Test
  void withoutALimitWhatWaitsIsStillBounded() {
    Fakes.Counter counter = new Fakes.Counter();
    Fakes.Stream stream = new Fakes.Stream(session, counter, query);
    long clock = 1000;
    for (int i = 0; i < PacedStream.MAX_PENDING_UNLIMITED + 10; i++) { // each look 2 % later: every one due
      clock += clock / 50;
      stream.clockMs = clock;
      counter.available = i + 1;
      assertEquals(0, stream.next(0));
    }
    assertEquals(String.valueOf(PacedStream.MAX_PENDING_UNLIMITED),
        stream.metrics(Optional.empty()).get("pacerPendingSnapshots"));
    decider.answer = Fakes.Decider::newest;
    assertEquals(PacedStream.MAX_PENDING_UNLIMITED, stream.next(0), "the batch ends at the last snapshot seen");
    assertEquals(PacedStream.MAX_PENDING_UNLIMITED + 10, stream.next(PacedStream.MAX_PENDING_UNLIMITED),
        "the rest is seen at the next look");
  }

  @Test
  void aCommitReachesTheDelegateOncePerAdmittedSnapshotInOrder() {
    Fakes.Counter counter = new Fakes.Counter();
    Fakes.Stream stream = new Fakes.Stream(session, counter, query);
    for (long available : new long[] {4, 7, 9}) {
      counter.available = available;
      decider.answer = request -> "{\"seq\": -1}";
      stream.next(0);
    }
    decider.answer = Fakes.Decider::newest;
    assertEquals(9, stream.next(0));
    stream.commit(new Fakes.Count(9));
    assertEquals(List.of(4L, 7L, 9L), counter.commits, "a batch spanning three snapshots commits each");
    stream.commit(new Fakes.Count(9));
    assertEquals(List.of(4L, 7L, 9L, 9L), counter.commits, "a commit not admitted here goes through alone");
  }

  @Test
  void stopTellsTheDeciderAndStopsTheDelegate() {
    Fakes.Counter counter = new Fakes.Counter();
    Fakes.Stream stream = new Fakes.Stream(session, counter, query);
    stream.stop();
    assertTrue(counter.stopped);
    assertEquals(1, decider.stops.size());
    assertFalse(decider.stops.get(0).get("run").asText().isEmpty());
    assertEquals(0, decider.stops.get(0).get("failed_open").size());
    assertEquals(stream.runStarted(), decider.stops.get(0).get("run_started").asLong(),
        "the stop event carries the run's start stamp: the driver may hear it after a later run");
  }

  @Test
  void everyRequestCarriesItsRunsStartStampAndALaterRunHasAHigherOne() {
    Fakes.Counter counter = new Fakes.Counter();
    Fakes.Stream earlier = new Fakes.Stream(session, counter, query);
    Fakes.Stream later = new Fakes.Stream(session, counter, query);
    counter.available = 2;
    earlier.next(0);
    later.next(0);
    long first = decider.requests.get(0).get("run_started").asLong();
    long second = decider.requests.get(1).get("run_started").asLong();
    assertEquals(earlier.runStarted(), first);
    assertTrue(first < second, "runs created one after the other are ordered: " + first + " < " + second);
    assertTrue(Math.abs(first / 1000L - System.currentTimeMillis()) < 60_000L, "microseconds of the wall clock");
    long stamp = PacedStream.runStamp();
    assertTrue(PacedStream.runStamp() > stamp, "never the same stamp twice, even within one microsecond");
  }
}
