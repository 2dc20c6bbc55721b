package io.pacer.spark;

import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.when;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Function;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.SparkDataStream;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;

/**
 * The stand-ins {@link PacedStream}'s unit tests run on: a session whose context has no local
 * properties (no query id: batch id -1), a counting delegate with or without admission control, a
 * {@link PacedStream} over it that measures a snapshot as its offset delta, and a decider that
 * records every request and answers what the test says.
 */
final class Fakes {

  private Fakes() {}

  /** A SparkSession and SparkContext that start nothing: Mockito mocks. */
  static SparkSession session() {
    SparkSession session = mock(SparkSession.class);
    SparkContext context = mock(SparkContext.class);
    when(session.sparkContext()).thenReturn(context);
    return session;
  }

  /** An offset that is a count of rows. */
  static final class Count extends Offset {
    final long value;

    Count(long value) {
      this.value = value;
    }

    @Override
    public String json() {
      return Long.toString(value);
    }
  }

  /** A delegate whose latest offset is {@link #available} rows; commits are recorded. */
  static class Counter implements SparkDataStream {
    volatile long available;
    final List<Long> commits = new CopyOnWriteArrayList<>();
    boolean stopped;

    @Override
    public Offset initialOffset() {
      return new Count(0);
    }

    @Override
    public Offset deserializeOffset(String json) {
      return new Count(Long.parseLong(json));
    }

    @Override
    public void commit(Offset end) {
      commits.add(((Count) end).value);
    }

    @Override
    public void stop() {
      stopped = true;
    }
  }

  /** A delegate with admission control: it advances at most {@code maxRows} per call, as Kafka does. */
  static final class LimitedCounter extends Counter implements SupportsAdmissionControl {
    int calls;

    @Override
    public Offset latestOffset(Offset start, ReadLimit limit) {
      calls++;
      long from = start == null ? 0 : ((Count) start).value;
      if (limit instanceof ReadMaxRows) {
        return new Count(Math.min(available, from + ((ReadMaxRows) limit).maxRows()));
      }
      return new Count(available);
    }
  }

  /** A paced stream over a {@link Counter}: rows = the offset delta, files = 1, bytes = 10 a row. */
  static final class Stream extends PacedStream {
    final Counter counter;
    /** When set, snapshots are unmeasurable (rows, files and bytes unknown). */
    boolean unmeasured;
    /** The stream's clock, epoch milliseconds (negative: the system's). */
    long clockMs = -1;

    Stream(SparkSession session, Counter counter, String query) {
      super(session, counter, "counter", query, Map.of("pacer.deadline", "5s"));
      this.counter = counter;
    }

    @Override
    long nowMs() {
      return clockMs < 0 ? super.nowMs() : clockMs;
    }

    @Override
    Offset plainLatestOffset() {
      return new Count(counter.available);
    }

    @Override
    OffsetSnapshot measure(long seq, Offset prev, Offset next, long nowMs) {
      if (unmeasured) {
        return new OffsetSnapshot(seq, next, nowMs, null, null, null, false, null, null);
      }
      long rows = ((Count) next).value - (prev == null ? 0 : ((Count) prev).value);
      return new OffsetSnapshot(seq, next, nowMs, rows, 1L, rows * 10, false, null, null);
    }

    @Override
    void commitDelegate(Offset end) {
      counter.commit(end);
    }

    /** Spark's call: the offset the next batch ends at, from {@code start}, as a count. */
    long next(long start, ReadLimit limit) {
      return ((Count) latestOffset(new Count(start), limit)).value;
    }

    long next(long start) {
      return next(start, ReadLimit.allAvailable());
    }
  }

  /** A decider that records each request and answers with {@code answer} (the parsed request in). */
  static final class Decider implements PacerDecider {
    final List<JsonNode> requests = new CopyOnWriteArrayList<>();
    final List<JsonNode> stops = new ArrayList<>();
    volatile Function<JsonNode, String> answer = request -> "{\"seq\": -1}";

    @Override
    public String decide(String queryName, String requestJson) {
      JsonNode request = parse(requestJson);
      requests.add(request);
      return answer.apply(request);
    }

    @Override
    public void stopped(String queryName, String eventJson) {
      stops.add(parse(eventJson));
    }

    JsonNode last() {
      return requests.get(requests.size() - 1);
    }

    /** The answer that ends the batch at the newest pending snapshot. */
    static String newest(JsonNode request) {
      JsonNode snaps = request.get("snapshots");
      return "{\"seq\": " + snaps.get(snaps.size() - 1).get("seq").asLong() + "}";
    }

    private static JsonNode parse(String json) {
      try {
        return OffsetSnapshot.JSON.readTree(json);
      } catch (Exception unreadable) {
        throw new AssertionError("the source sent unreadable JSON: " + json, unreadable);
      }
    }
  }
}
