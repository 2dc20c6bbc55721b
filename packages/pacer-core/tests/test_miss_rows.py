"""Misses as the rows see them: the recorder counts missed datasets and their rows exactly (running counters),
and the report's headline ``deadline_miss_ratio`` is rows-weighted, with the dataset ratio beside it."""

from __future__ import annotations

from pacer import Controller, Dataset, Operator, OperatorDAG
from pacer.clock import ManualClock
from pacer.model import BatchReport, QuerySpec
from pacer.recorder import RECENT, QueryRecord
from pacer.report import REQUIRED_QUERY_KEYS, build_report, validate_report

DEADLINE = 10.0


def _controller() -> tuple[Controller, ManualClock]:
    clock = ManualClock()
    c = Controller(clock=clock, cores=2, timer=None)
    dag = OperatorDAG.chain(Operator("scan#0", "scan"), Operator("sink#1", "sink"))
    c.add_query(QuerySpec(id="q", dag=dag, deadline=DEADLINE))
    return c, clock


def _one(c: Controller, clock: ManualClock, n: int, rows: int, latency: float) -> BatchReport:
    """Dataset ``n`` of ``rows`` rows arrives now and completes alone ``latency`` seconds later."""
    c.arrive("q", Dataset(f"q-{n}", clock.now, 10 * rows, rows))
    batch = c.poll("q")
    assert batch is not None and len(batch.datasets) == 1
    c.start(batch.id)
    clock.now += latency
    report = c.complete(batch.id)
    clock.now += 1.0
    return report


def test_a_big_late_dataset_weighs_by_its_rows() -> None:
    c, clock = _controller()
    late = _one(c, clock, 0, 900, DEADLINE + 2.0)
    assert late.dataset_rows == (900,)
    for n in range(1, 10):
        _one(c, clock, n, 10, 0.5)
    record = c.recorder.record("q")
    assert (record.miss_datasets, record.miss_rows, record.misses) == (1, 900, 1)
    report = build_report(runtime="sim", config={}, controller=c, start=0.0, end=clock.now)
    validate_report(report)
    q = report["queries"]["q"]
    assert q["miss_datasets"] == 1 and q["miss_rows"] == 900 and q["rows_processed"] == 990
    assert q["deadline_miss_ratio_datasets"] == 0.1
    assert q["deadline_miss_ratio_rows"] == round(900 / 990, 6) == 0.909091
    assert q["deadline_miss_ratio"] == q["deadline_miss_ratio_rows"]


def test_small_late_datasets_weigh_little() -> None:
    c, clock = _controller()
    _one(c, clock, 0, 900, 0.5)
    for n in range(1, 10):
        _one(c, clock, n, 10, DEADLINE + 0.001)
    q = build_report(runtime="sim", config={}, controller=c, start=0.0, end=clock.now)["queries"]["q"]
    assert (q["miss_datasets"], q["miss_rows"]) == (9, 90)
    assert q["deadline_miss_ratio_datasets"] == 0.9
    assert q["deadline_miss_ratio"] == q["deadline_miss_ratio_rows"] == round(90 / 990, 6)


def test_zero_row_datasets_fall_back_to_the_dataset_ratio() -> None:
    c, clock = _controller()
    _one(c, clock, 0, 0, DEADLINE + 1.0)
    _one(c, clock, 1, 0, 1.0)
    q = build_report(runtime="sim", config={}, controller=c, start=0.0, end=clock.now)["queries"]["q"]
    assert (q["miss_datasets"], q["miss_rows"], q["rows_processed"]) == (1, 0, 0)
    assert q["deadline_miss_ratio_rows"] == 0.0 and q["deadline_miss_ratio_datasets"] == 0.5
    assert q["deadline_miss_ratio"] == 0.5


def test_no_datasets_no_misses() -> None:
    c, _ = _controller()
    q = build_report(runtime="sim", config={}, controller=c, start=0.0, end=1.0)["queries"]["q"]
    assert all(k in q for k in REQUIRED_QUERY_KEYS)
    assert (q["miss_datasets"], q["miss_rows"], q["deadline_miss_ratio"], q["deadline_miss_ratio_rows"],
            q["deadline_miss_ratio_datasets"]) == (0, 0, 0.0, 0.0, 0.0)


def _report(rows: tuple[int, ...], latencies: tuple[float, ...], dataset_rows: tuple[int, ...] = ()) -> BatchReport:
    return BatchReport(
        batch_id="b", query_id="q", seq=0, admitted_at=0.0, started_at=0.0, completed_at=12.0, bytes=0,
        rows=sum(rows), dataset_latencies=tuple((f"d{i}", lat) for i, lat in enumerate(latencies)),
        earliest_arrival=0.0, interval_s=0.0, dataset_rows=dataset_rows,
    )


def test_one_batch_with_late_and_timely_datasets_counts_the_late_ones_rows() -> None:
    record = QueryRecord(deadline=DEADLINE)
    record.completed(_report((900, 10, 5), (12.0, 7.0, 10.5), dataset_rows=(900, 10, 5)))
    assert (record.miss_datasets, record.miss_rows, record.rows_processed) == (2, 905, 915)


def test_a_report_without_per_dataset_rows_still_counts() -> None:
    """BatchReport stays backward compatible: without ``dataset_rows`` the late datasets get their even share
    of the batch's rows (exact for one dataset, or every dataset late)."""
    record = QueryRecord(deadline=DEADLINE)
    record.completed(_report((900,), (12.0,)))
    record.completed(_report((6, 4), (12.0, 11.0)))
    record.completed(_report((6, 4), (12.0, 1.0)))
    assert (record.miss_datasets, record.miss_rows) == (4, 900 + 10 + 5)


def test_miss_totals_stay_exact_past_the_recent_window() -> None:
    c, clock = _controller()
    total = 3 * RECENT
    miss_datasets = miss_rows = rows = 0
    for n in range(total):
        size = n % 7 + (1000 if n % 4 == 1 else 1)  # the big datasets are on time
        late = n % 4 == 0
        _one(c, clock, n, size, DEADLINE + 0.5 if late else 0.25)
        rows += size
        miss_datasets += late
        miss_rows += size if late else 0
    record = c.recorder.record("q")
    assert len(c.reports("q")) == RECENT < record.batches == total  # the window dropped the early batches
    assert (record.miss_datasets, record.miss_rows, record.rows_processed) == (miss_datasets, miss_rows, rows)
    q = build_report(runtime="sim", config={}, controller=c, start=0.0, end=clock.now)["queries"]["q"]
    assert (q["miss_datasets"], q["miss_rows"], q["rows_processed"]) == (miss_datasets, miss_rows, rows)
    assert q["deadline_miss_ratio_datasets"] == round(miss_datasets / total, 6) == 0.25
    assert q["deadline_miss_ratio"] == q["deadline_miss_ratio_rows"] == round(miss_rows / rows, 6)
    assert q["deadline_miss_ratio_rows"] < 0.01  # rows weigh the small late datasets little


def test_a_dataset_whose_rows_arrived_over_a_span_counts_only_the_rows_old_enough_to_be_late() -> None:
    """A Kafka snapshot dated by its oldest record holds rows that arrived up to the next snapshot's oldest
    (``Dataset.newest``): finishing 5 s past the deadline of its oldest row, over a 10 s span, half its rows
    (the older half) are late, not all of them; past the whole span, all of them."""
    c, clock = _controller()
    clock.now = 10.0
    c.arrive("q", Dataset("spread", 0.0, 1000, 100, newest=10.0))
    c.arrive("q", Dataset("spread-too-late", 10.0, 1000, 100, newest=12.0))
    batch = c.poll("q")
    assert batch is not None and len(batch.datasets) == 2
    c.start(batch.id)
    clock.now = 23.0  # latencies 23 s (13 over, span 10: all late) and 13 s (3 over, span 2: all late)
    report = c.complete(batch.id)
    assert report.dataset_spans == (10.0, 2.0)
    c.arrive("q", Dataset("half", 20.0, 1000, 100, newest=30.0))
    c.arrive("q", Dataset("on-time", 30.0, 1000, 100, newest=32.0))
    clock.now = 32.0
    batch = c.poll("q")
    assert batch is not None
    c.start(batch.id)
    clock.now = 35.0  # "half": 15 s old, 5 s over a 10 s span -> 50 rows; "on-time": 5 s, within the deadline
    c.complete(batch.id)
    record = c.recorder.record("q")
    assert (record.miss_datasets, record.miss_rows) == (3, 100 + 100 + 50)
