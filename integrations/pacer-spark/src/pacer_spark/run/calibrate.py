"""``pacer calibrate --runtime spark``: measure what a workload's batches cost this Spark, into an engine profile.

One session, one query at a time (each alone on the engine), every batch sized by the calibration:

1. **large** batches: its traffic at ``rate`` rows/s under a fixed trigger of each of ``intervals`` seconds
   (``static``): batches of ``rate × interval`` rows, ``repeats`` of each size;
2. **tiny** batches: the workload's ``pacer-gen`` traffic at :data:`TINY_RATE` rows/s, admitted as each 1 s dataset
   arrives (``asap``): the fixed cost of a batch, with Spark's no-data batches between them where the query has a
   watermark; measured after the large ones, on a JVM they warmed (a new session's compilation would otherwise be
   counted as every batch's fixed cost);
3. on a cluster, **executor start-up**: one executor more asked of the cluster manager, timed until it registers,
   then let go (local mode has none to start).

The profile also carries what pacer-sim reads to count as Spark does (``pacer run --runtime sim --calibrated FILE``):
each task's share of the fixed part (from the tiny batches), and executor warm-up and state reload where measured;
local mode adds and removes no executor, so neither is measured there, and the profile says why
(:func:`not_measured`).

Each query's first ``WARM_UP_BATCHES`` batches are left out of the fixed and per-byte costs (a new query compiles
its plan and opens its state stores) and measured apart (points of kind ``first``): what a query's first batch costs
beyond its size, which every new query pays once.
What each batch cost is what pacer records of it on Spark (engine time less gate waits; its own tasks' run time by
batch id): :func:`pacer.engine_profile.fit_profile` turns the points into the profile.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from pacer.engine_profile import CostPoint, EngineProfile, EngineProfileError, fit_profile
from pacer_spark.jvm import task_time

#: Rows per second of the tiny batches' traffic: one 1 s dataset of this many rows per batch.
TINY_RATE = 20.0
#: Tiny batches measured.
TINY_BATCHES = 6
#: Batches left out at the start of every query.
WARM_UP_BATCHES = 1
#: Seconds a query's backlog may take after its traffic ended.
DRAIN_TIMEOUT_S = 120.0
#: Seconds a step's query may take to end its running trigger when it stops.
STOP_TIMEOUT_S = 10.0
#: Seconds to wait for Spark's listeners to deliver a stopped query's last task ends.
LISTENERS_WAIT_S = 5.0
#: Seconds an executor asked for may take to register before start-up counts as not measured.
STARTUP_TIMEOUT_S = 60.0


def measure_profile(spark: Any, workload: str, *, rate: float, intervals: Sequence[float], repeats: int,
                    tiny_batches: int = TINY_BATCHES, checkpoint_root: str | None = None,
                    note: Callable[[str], None] = lambda _: None) -> EngineProfile:
    """The engine profile of ``workload`` on ``spark`` (module docstring: what runs).

    :raises EngineProfileError: a step that ran no batch to measure, or a query that failed (its root cause named).
    """
    import pacer_spark

    if not intervals or any(not t > 0 for t in intervals) or repeats < 1 or not rate > 0:
        raise ValueError(f"calibration needs intervals > 0 s, repeats >= 1 and a rate > 0; got {list(intervals)}, "
                         f"{repeats} and {rate}")
    root = checkpoint_root or tempfile.mkdtemp(prefix="pacer-calibrate-")
    session = pacer_spark.attach(spark, admission="asap", paced=False, checkpoint_root=root)
    points: list[CostPoint] = []
    try:
        # The tiny batches last, on a JVM the large steps warmed: measured first, a new session's compilation fell on
        # them (LR2 on a loaded local[2]: 0.8-1.0 s each against 0.4-0.9 s for the large batches of 250 KB-1.3 MB).
        steps: list[tuple[str, str, float, float | None, int]] = [("large", f"large-{t:g}s", rate, t, repeats)
                                                                  for t in intervals]
        steps.append(("tiny", "tiny", TINY_RATE, None, tiny_batches))
        for kind, query_id, step_rate, interval, batches in steps:
            seconds = (batches + WARM_UP_BATCHES + 0.5) * (interval or 1.0)
            note(f"{query_id}: {step_rate:g} rows/s for {seconds:g} s"
                 + (f" under a {interval:g} s trigger" if interval else ", a batch per 1 s dataset"))
            session.run_workload(workload, query_id=query_id, traffic="constant", rate=step_rate, duration=seconds,
                                 admission="static" if interval else "asap",
                                 admission_params={"interval": interval} if interval else None)
            if not session.await_drained(seconds + DRAIN_TIMEOUT_S):
                raise EngineProfileError(f"calibration step {query_id!r} did not finish: "
                                         f"{session.errors() or 'its backlog outlasted the drain timeout'}")
            session.admission.stop(STOP_TIMEOUT_S, [query_id])  # between batches, before the next step shares it
            task_time.wait_for_listeners(spark, LISTENERS_WAIT_S)  # its last tasks' times, to their batches
            reports = session.driver.reports(query_id)
            measured = [r for r in reports[WARM_UP_BATCHES:] if r.rows > 0]
            if not measured:
                raise EngineProfileError(f"calibration step {query_id!r} ran no batch after its warm-up")
            points += [CostPoint("first", r.rows, r.bytes, r.trigger_s, r.busy_core_s)
                       for r in reports[:WARM_UP_BATCHES] if r.rows > 0]
            points += [CostPoint(kind, r.rows, r.bytes, r.trigger_s, r.busy_core_s) for r in measured]
        slots = session.controller.cores
        partitions = int(spark.conf.get("spark.sql.shuffle.partitions", "2") or 2)
    finally:
        session.stop()
    no_data = [q["cost"]["no_data"] for q in session.report()["queries"].values()]  # totals per query
    batches = sum(int(n["batches"] or 0) for n in no_data)
    busy = [n["busy_core_s"] for n in no_data if n["busy_core_s"] is not None]
    master = str(spark.sparkContext.master)
    return fit_profile(points, runtime="spark", workload=workload, partitions=partitions, slots=slots,
                       no_data_s=sum(float(n["trigger_s"] or 0.0) for n in no_data) / batches if batches else None,
                       no_data_core_s=sum(busy) / batches if batches and busy else None,
                       executor_startup_s=executor_startup_s(spark, note), not_measured=not_measured(master))


def not_measured(master: str) -> dict[str, str]:
    """Why the calibration on ``master`` leaves executor warm-up and state reload unmeasured (the simulator then keeps
    its defaults, and its report says they are defaults): local mode has no executor to add or remove; on a cluster
    the calibration adds one for its start-up only, and runs no task on it nor removes one under a stateful query."""
    if master.startswith("local"):
        why = f"{master}: local mode adds and removes no executor"
        return {"executor_warmup_s": why, "state_reload_s": why}
    return {"executor_warmup_s": "the calibration times an added executor's registration, not its first tasks",
            "state_reload_s": "the calibration removes no executor while a stateful query runs"}


def executor_startup_s(spark: Any, note: Callable[[str], None] = lambda _: None) -> float | None:
    """Seconds from asking the cluster manager for one executor more to its registering, then let go again; None in
    local mode (nothing to start), or where none registered within :data:`STARTUP_TIMEOUT_S` (no room for one)."""
    from pacer_spark.jvm import executor_requests, status_store

    master = str(spark.sparkContext.master)
    if master.startswith("local"):
        note(f"executor start-up: not measured ({master}: local mode starts no executor)")
        return None
    before = status_store.live_executors(spark)
    if before is None:
        note("executor start-up: not measured (Spark's status store cannot be read)")
        return None
    known = {e.id for e in before}
    asked = time.monotonic()
    new: list[str] = []
    executor_requests.request_total(spark, len(before) + 1)
    try:
        while not new and time.monotonic() - asked < STARTUP_TIMEOUT_S:
            time.sleep(0.1)
            new = [e.id for e in status_store.live_executors(spark) or [] if e.id not in known]
        seconds = time.monotonic() - asked
    finally:
        executor_requests.request_total(spark, len(before))  # back to what it held, before the new one goes
    if not new:
        note(f"executor start-up: not measured (no executor registered within {STARTUP_TIMEOUT_S:g} s: the cluster "
             "has no room for one more)")
        return None
    executor_requests.kill(spark, new)
    note(f"executor start-up: {seconds:.1f} s")
    return seconds


__all__ = ["TINY_RATE", "executor_startup_s", "measure_profile", "not_measured"]
