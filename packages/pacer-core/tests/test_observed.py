"""Observe mode's recording (:mod:`pacer.observed`): written once per batch, read back exactly, refused clearly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pacer.model import BatchReport
from pacer.observed import SCHEMA, ObservedError, Recorder, read


def _batch(seq: int, completed_at: float, latencies: tuple[float, ...], rows: tuple[int, ...],
           busy_core_s: float | None = 0.5) -> BatchReport:
    return BatchReport(batch_id=f"q#{seq}", query_id="q", seq=seq, admitted_at=completed_at - 1.0,
                       started_at=completed_at - 0.8, completed_at=completed_at, bytes=64 * sum(rows),
                       rows=sum(rows), dataset_latencies=tuple((f"d{seq}.{i}", lat) for i, lat in enumerate(latencies)),
                       earliest_arrival=completed_at - max(latencies), interval_s=1.0, engine_s=0.8,
                       dataset_rows=rows, busy_core_s=busy_core_s)


def test_each_batch_is_recorded_once_and_read_back_with_its_arrivals(tmp_path: Path) -> None:
    """A batch's datasets arrived their latency before it completed; a report given twice is written once; a second
    run's header keeps every batch and its own settings win."""
    path = tmp_path / "rec" / "q.jsonl"
    recorder = Recorder(path, {"query": "q", "cores": 4, "partitions": 8})
    first = [_batch(1, 102.0, (2.0, 1.5), (10, 30)), _batch(2, 104.0, (1.0,), (20,), busy_core_s=None)]
    assert recorder.record(first) == 2
    assert recorder.record([*first, _batch(3, 106.5, (0.5,), (5,))]) == 1
    again = Recorder(path, {"query": "q", "cores": 2, "partitions": 8}, after=3)  # the query's next run
    assert again.record([*first, _batch(3, 106.5, (0.5,), (5,))]) == 0
    observation = read(path)
    assert observation.header == {"schema": SCHEMA, "query": "q", "cores": 2, "partitions": 8}
    assert [b.seq for b in observation.batches] == [1, 2, 3]
    assert observation.batches[0].arrivals == ((100.0, 10), (100.5, 30))
    assert observation.batches[1].busy_core_s is None and observation.batches[2].trigger_s == pytest.approx(0.8)
    assert observation.start == 100.0 and observation.duration_s == 6.5
    assert observation.rates() == [40.0, 0.0, 0.0, 20.0, 0.0, 0.0, 5.0]


def test_the_batches_are_the_cost_fit_s_points_the_first_apart(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    recorder = Recorder(path, {"query": "q"})
    recorder.record([_batch(seq, 100.0 + seq, (0.5,), (rows,)) for seq, rows in
                     enumerate([500, 10, 400, 20, 300, 30, 200], 1)])
    kinds = [(p.kind, p.rows) for p in read(path).cost_points()]
    assert kinds == [("first", 500), *(("batch", n) for n in (10, 400, 20, 300, 30, 200))]


def test_an_arrival_dated_before_its_run_started_counts_from_the_start(tmp_path: Path) -> None:
    """A backlog dated by the data's own time (hours old) arrived for the replay when the observed run started."""
    path = tmp_path / "q.jsonl"
    Recorder(path, {"query": "q", "started_at": 99.0}).record([_batch(1, 102.0, (7200.0, 1.0), (10, 20))])
    observation = read(path)
    assert observation.batches[0].arrivals == ((99.0, 10), (101.0, 20))
    assert observation.rates() == [10.0, 0.0, 20.0]


def test_a_line_still_being_written_is_not_read_yet(tmp_path: Path) -> None:
    """Observe mode's live advice reads the recording while the driver appends to it: text after the last newline
    is a batch still being written, left out (not a malformed line)."""
    path = tmp_path / "q.jsonl"
    Recorder(path, {"query": "q"}).record([_batch(1, 102.0, (0.5,), (10,)), _batch(2, 103.0, (0.5,), (20,))])
    whole = path.read_text()
    path.write_text(whole + whole.splitlines()[-1][:25])  # a third line cut short
    assert [b.seq for b in read(path).batches] == [1, 2]


def test_the_arrivals_come_as_often_as_they_were_recorded(tmp_path: Path) -> None:
    """The replay's arrival period is the median gap between recorded arrivals, within 0.05-1 s."""
    def period(times: list[float]) -> float:
        path = tmp_path / f"{len(times)}.jsonl"
        Recorder(path, {"query": "q"}).record(
            [_batch(i, t + 0.5, (0.5,), (10,)) for i, t in enumerate(times, 1)])
        return read(path).arrival_period_s()

    assert period([100.0, 101.0, 102.0, 103.0]) == 1.0  # a file a second
    assert period([100.0, 100.4, 100.8, 101.3, 101.7]) == pytest.approx(0.4)  # Kafka, read every 0.4 s
    assert period([100.0, 100.01, 100.02]) == 0.05 and period([100.0, 104.0]) == 1.0 and period([100.0]) == 1.0


@pytest.mark.parametrize(("text", "says"), [
    ("", "holds no batch"),
    (json.dumps({"schema": "pacer.report/1"}) + "\n", "not a 'pacer.observed/1' recording"),
    (json.dumps({"seq": 1}) + "\n", "a batch before any header"),
    (json.dumps({"schema": SCHEMA}) + "\n{not json\n", ":2: not a line of"),
    (json.dumps({"schema": SCHEMA}) + "\n" + json.dumps({"seq": 1}) + "\n", ":2: not a line of"),
    (json.dumps({"schema": SCHEMA}) + "\n", "observe the query longer"),
])
def test_a_file_that_is_no_recording_is_refused_naming_the_line(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(ObservedError, match=says):
        read(path)


def test_a_missing_recording_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ObservedError, match="cannot read the recording .*missing.jsonl"):
        read(tmp_path / "missing.jsonl")
