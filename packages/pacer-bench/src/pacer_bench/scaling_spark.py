"""``python -m pacer_bench.scaling_spark``: the real-Spark scaling goal check, up and down.

The goal: on a standalone cluster of 1-core workers, a user's own ``format("pacer")`` query whose load needs at least
3 executors at its peak and 1-2 at its trough (on a 2-core machine: per-row work that waits rather than computes, as
a call to an external service does): the deadline rule adds executors within one executor start-up plus one deadline
of the rise and removes them after; at most 1 % of rows late by the records' own timestamps; allocated core-s at
most 0.85x the cheapest fixed count that meets 1 %; every record once.

The check, per configuration (``--configs``: ``deadline`` and ``fixed-K``), one Spark application after another on
one cluster (pacer-spark's :func:`~pacer_spark.run.cluster.start_cluster`, ``--workers`` workers of one core) and
one scratch Kafka broker (pacer-kafka's :func:`~pacer_kafka.start_broker`):

- a fresh topic of :data:`PARTITIONS` partitions;
- the application (a child process, one SparkContext each) builds its session with the cluster's secret, waits for
  the workers' executors, warms their Python workers, attaches pacer (``admission="zstream"``, the deadline, and
  ``scale="deadline", executors=(1, workers), initial_executors=--initial`` or ``scale="fixed",
  executors=(K, K)``) and starts the user's query: ``format("pacer")`` with ``pacer.source=kafka`` -> a
  ``mapInPandas`` that waits ``--wait-ms`` per row (a task slot held, no CPU used) -> ``foreachBatch`` collecting
  each row's key and Kafka timestamp and writing them with the batch's completion time;
- once the query runs, this process writes the wave (:class:`Wave`: a trough, a raised-cosine rise, the peak, the
  fall, the trough again) into the topic, each second's rows in :data:`SLICES` slices, every record keyed by its
  number, its Kafka timestamp the moment it was produced;
- the application waits until every record came through the sink (or ``--drain`` seconds), then takes pacer's
  report and Spark's own record of its executors (added and removed, from the status store).

Judged from what the sink wrote: rows late (completion - the record's timestamp > the deadline; a record that never
came counts late), every record once (distinct keys = produced, no duplicate, none unknown), allocated core-s over
the traffic's window (the executors Spark listed, from its status store, from the first record to the last plus
one deadline: the same window for every configuration; pacer's own ``cost.allocated_core_s`` from attach to the
report beside it), the executors over time (Spark's record) and pacer's changes with their reasons, the rise (the
traffic's first second above what the executors then held can serve: :func:`capacity`) and the first executor
added after it. ``DIR/scaling-spark.json`` keeps the raw figures (per second of traffic: rows and rows late), the
traffic, the executors' spans and machine facts; ``DIR/scaling-spark.md`` the table and the goal lines. ``--rejudge``
writes the table again from the JSON (no Spark).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pacer.durations import flag_seconds

NAME = "scaling-spark"
QUERY = "scaling_spark"
#: Partitions of each configuration's topic: its batches' tasks (6: one, two or three executors run them in 6, 3 or
#: 2 waves; a fourth or fifth runs them no faster). Each task costs ~0.25 s beyond its rows on 2 loaded cores.
PARTITIONS = 6
#: Slices of a second the traffic is written in (each flushed: a record's timestamp is when it was written).
SLICES = 10
#: The goal's bounds: rows late, and allocated core-s against the cheapest fixed count meeting it.
LATE_GOAL = 0.01
COST_GOAL = 0.85
#: The executors' figure for what a count can serve (:func:`capacity`): a batch's part more executors do not shorten
#: (measured on 2 loaded cores: ~1 s between batches and ~0.25 s a task).
FIXED_PART_S = 2.0
#: Seconds the application waits for its query to start, and for the traffic to be written, at most.
START_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Wave:
    """The traffic: ``low`` rows/s for the first ninth, a raised-cosine rise over two ninths to ``high``, ``high`` for
    two ninths, the fall over a ninth, then ``low`` to the end (270 s: 30 s, 60 s, 60 s, 30 s, 90 s)."""

    low: int = 80
    high: int = 450
    duration_s: int = 270

    def phases(self) -> dict[str, float]:
        """Seconds from the first record when the rise starts, the peak starts, the fall starts and ends."""
        d = float(self.duration_s)
        return {"rise": d / 9.0, "peak": d * 3.0 / 9.0, "fall": d * 5.0 / 9.0, "trough": d * 6.0 / 9.0}

    def shape(self, t: float) -> float:
        """0 at the trough, 1 at the peak, at ``t`` seconds."""
        p = self.phases()
        if t < p["rise"] or t >= p["trough"]:
            return 0.0
        if t < p["peak"]:
            return 0.5 - 0.5 * math.cos(math.pi * (t - p["rise"]) / (p["peak"] - p["rise"]))
        if t < p["fall"]:
            return 1.0
        return 0.5 + 0.5 * math.cos(math.pi * (t - p["fall"]) / (p["trough"] - p["fall"]))

    def rate(self, second: int) -> int:
        """Rows written in second ``second`` (the shape at its middle)."""
        return round(self.low + (self.high - self.low) * self.shape(second + 0.5))

    def schedule(self) -> list[int]:
        """Rows per second, the whole traffic."""
        return [self.rate(s) for s in range(self.duration_s)]


def capacity(executors: int, *, wait_ms: float, deadline_s: float, fixed_part_s: float = FIXED_PART_S) -> float:
    """Rows/s that ``executors`` of one core serve within the deadline when each row waits ``wait_ms``: a batch of
    ``I`` seconds' rows taking ``f + u·I`` meets ``D`` while ``u <= 1 - 2f/D`` (pacer-scaler's rule, no headroom)."""
    return executors * max(0.0, 1.0 - 2.0 * fixed_part_s / deadline_s) * 1000.0 / wait_ms


def needed(rate: float, *, wait_ms: float, deadline_s: float, fixed_part_s: float = FIXED_PART_S) -> int:
    """The fewest executors of one core whose :func:`capacity` covers ``rate`` (at least 1)."""
    one = capacity(1, wait_ms=wait_ms, deadline_s=deadline_s, fixed_part_s=fixed_part_s)
    return max(1, math.ceil(rate / one - 1e-9))


def parse_config(name: str, workers: int, initial: int | None) -> dict[str, Any]:
    """``deadline`` (pacer-scaler within 1..workers, starting at ``initial``) or ``fixed-K`` as attach keywords."""
    if name == "deadline":
        return {"scale": "deadline", "executors": (1, workers), "initial_executors": initial}
    if name.startswith("fixed-") and name[6:].isdigit() and 1 <= int(name[6:]) <= workers:
        k = int(name[6:])
        return {"scale": "fixed", "executors": (k, k), "initial_executors": k}
    raise ValueError(f"a configuration is 'deadline' or 'fixed-K' with 1 <= K <= {workers} (got {name!r})")


# ---------------------------------------------------------------------- judging (pure)


def sink_figures(batches: Sequence[Mapping[str, Any]], *, produced: int, t0: float, deadline_s: float,
                 duration_s: int) -> dict[str, Any]:
    """What the sink wrote (``{"done": epoch, "keys": [...], "ts": [...]}`` per batch): rows, distinct keys,
    duplicates, keys never produced, missing, and per second of traffic (the record's timestamp) ``[rows, late,
    max latency]``; a record's latency is its batch's completion less its own timestamp."""
    seen: set[int] = set()
    duplicates = unknown = 0
    seconds = [[0, 0, 0.0] for _ in range(duration_s)]
    latencies: list[float] = []
    for batch in batches:
        done = float(batch["done"])
        for key, ts in zip(batch["keys"], batch["ts"], strict=True):
            k = int(key)
            if k in seen:
                duplicates += 1
                continue
            seen.add(k)
            if not 0 <= k < produced:
                unknown += 1
            latency = done - float(ts)
            latencies.append(latency)
            slot = seconds[min(duration_s - 1, max(0, int(float(ts) - t0)))]
            slot[0] += 1
            slot[1] += latency > deadline_s
            slot[2] = round(max(float(slot[2]), latency), 3)
    latencies.sort()

    def pct(q: float) -> float | None:
        return round(latencies[min(len(latencies) - 1, int(q * len(latencies)))], 3) if latencies else None

    return {"rows": sum(len(b["keys"]) for b in batches), "distinct": len(seen), "duplicates": duplicates,
            "unknown": unknown, "missing": produced - (len(seen) - unknown),
            "latency_p50_s": pct(0.5), "latency_p99_s": pct(0.99),
            "latency_max_s": round(latencies[-1], 3) if latencies else None,
            "batches": len(batches), "per_second": seconds}


def held_at(spans: Sequence[Mapping[str, Any]], t: float) -> int:
    """Executors Spark listed at epoch ``t`` (added at or before, removed after)."""
    return sum(1 for s in spans if s["added"] <= t and (s["removed"] is None or s["removed"] > t))


def executors_over_time(spans: Sequence[Mapping[str, Any]], start: float, end: float) -> list[list[float]]:
    """``[[seconds from start, executors], ...]`` at ``start`` and at every change up to ``end``; changes within a
    second of the one before are one change (executors asked for together register a few hundred ms apart)."""
    times = sorted({start, *(float(s["added"]) for s in spans), *(float(s["removed"]) for s in spans
                                                                  if s["removed"] is not None)})
    out: list[list[float]] = []
    for t in times:
        if start <= t <= end:
            n = held_at(spans, t)
            if out and t - start - out[-1][0] < 1.0 and len(out) > 1:
                out[-1][1] = n
                if out[-2][1] == n:
                    out.pop()
            elif not out or out[-1][1] != n:
                out.append([round(t - start, 3), n])
    return out


def core_s(spans: Sequence[Mapping[str, Any]], start: float, end: float) -> float:
    """Core-seconds of the executors Spark listed between ``start`` and ``end`` (epoch)."""
    total = 0.0
    for s in spans:
        gone = end if s["removed"] is None else min(end, float(s["removed"]))
        total += int(s.get("cores", 1)) * max(0.0, gone - max(start, float(s["added"])))
    return total


def judge_run(run: Mapping[str, Any], traffic: Mapping[str, Any]) -> dict[str, Any]:
    """One configuration's figures from its raw record (see :func:`measure_config`)."""
    deadline, wait_ms, duration = traffic["deadline_s"], traffic["wait_ms"], traffic["duration_s"]
    fixed_part = traffic.get("fixed_part_s", FIXED_PART_S)
    row: dict[str, Any] = {"config": run["config"], "error": run.get("error")}
    produced = run.get("produced") or {}
    sink = run.get("sink")
    if not produced.get("count") or sink is None:
        return {**row, "judged": False}
    t0, count = float(produced["t0"]), int(produced["count"])
    late = sum(int(s[1]) for s in sink["per_second"]) + max(0, int(sink["missing"]))
    row.update(judged=True, produced=count, late=late, late_share=late / count,
               once=sink["missing"] == 0 and sink["duplicates"] == 0 and sink["unknown"] == 0,
               missing=sink["missing"], duplicates=sink["duplicates"], latency_p99_s=sink["latency_p99_s"],
               latency_max_s=sink["latency_max_s"])
    spans = run.get("spans") or []
    window = (t0, t0 + duration + deadline)
    row["allocated_core_s"] = round(core_s(spans, *window), 1) if spans else None
    row["pacer_allocated_core_s"] = (run.get("cost") or {}).get("allocated_core_s")
    timeline = executors_over_time(spans, t0, t0 + duration + deadline)
    row["executors"] = timeline
    counts = [int(n) for _, n in timeline]
    row["executors_min"], row["executors_max"] = (min(counts), max(counts)) if counts else (None, None)
    scaling = run.get("scaling") or {}
    anchor = run.get("anchor")
    changes = [{**c, "t": round(anchor + float(c["at"]) - t0, 1) if anchor is not None else None}
               for c in scaling.get("changes") or []]
    row["changes"] = [{k: c.get(k) for k in ("t", "from", "to", "reason")} for c in changes]
    row["startup_s"] = scaling.get("startup_s")
    tasks = run.get("tasks") or {}
    row["first_task_after_added_s"] = {  # a new executor's cold start: its Python worker, its Kafka consumers
        s["id"]: round(tasks[s["id"]]["first_s"] - (float(s["added"]) - t0), 1)
        for s in spans if float(s["added"]) > t0 and s["id"] in tasks}
    if run.get("attach", {}).get("scale") == "fixed":
        return row
    # the rise: the traffic's first second above what the scaler's starting executors serve; the first executor
    # added once it held its fewest (at attach it removes what Spark started beyond them), and when it asked
    schedule = traffic["schedule"]
    start = int(run.get("attach", {}).get("initial_executors") or (min(counts) if counts else 1))
    rise = next((s for s, rate in enumerate(schedule)
                 if rate > capacity(start, wait_ms=wait_ms, deadline_s=deadline, fixed_part_s=fixed_part)), None)
    row["rise_s"], row["rise_over"] = rise, start
    if rise is not None and counts:
        row["held_at_rise"] = held_at(spans, t0 + rise)
        floor = next(i for i, n in enumerate(counts) if n == min(counts))
        up = next((timeline[i][0] for i in range(floor + 1, len(timeline)) if counts[i] > counts[i - 1]), None)
        row["added_after_rise_s"] = None if up is None else round(up - rise, 1)
        asked = next((c["t"] for c in changes if c["t"] is not None and c["to"] > c["from"] and c["t"] >= 0.0), None)
        row["asked_after_rise_s"] = None if asked is None else round(asked - rise, 1)
        first = [tasks[s["id"]]["first_s"] for s in spans if float(s["added"]) > t0 and s["id"] in tasks]
        row["first_task_after_rise_s"] = round(min(first) - rise, 1) if first else None
    fall = float(traffic["phases"]["fall"])
    first_down = next((i for i in range(1, len(timeline)) if timeline[i][0] > fall and counts[i] < counts[i - 1]),
                      None)
    if first_down is None:
        row["removed_after_peak"] = None
    else:  # the removals made together (within 5 s) as one
        t_down = timeline[first_down][0]
        last = max(i for i in range(first_down, len(timeline)) if timeline[i][0] <= t_down + 5.0)
        row["removed_after_peak"] = {"t": t_down, "from": counts[first_down - 1], "to": counts[last]}
    row["executors_at_end"] = counts[-1] if counts else None
    return row


def judge(doc: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """Every configuration's figures and the goal lines (each ``met``/``not met`` with its figure)."""
    traffic = doc["traffic"]
    rows = [judge_run(run, traffic) for run in doc["runs"]]
    judged = [r for r in rows if r.get("judged")]
    fixed = sorted((r for r in judged if r["config"].startswith("fixed-")), key=lambda r: int(r["config"][6:]))
    meeting = [r for r in fixed if r["late_share"] <= LATE_GOAL and r["once"]]
    cheapest = meeting[0] if meeting else None
    for r in judged:
        r["x_cheapest_fixed"] = (round(r["allocated_core_s"] / cheapest["allocated_core_s"], 3)
                                 if cheapest and r["allocated_core_s"] and cheapest["allocated_core_s"] else None)
    deadline_s = float(traffic["deadline_s"])
    goals = [_premise(traffic, fixed, cheapest)]
    scaled = next((r for r in judged if r["config"] == "deadline"), None)
    if scaled is None:
        goals.append("GOAL deadline rule: not run (no `deadline` configuration, or it failed: "
                     f"{next((r['error'] for r in rows if r['config'] == 'deadline'), None)})")
        return rows, goals
    rise, startup = scaled.get("rise_s"), scaled.get("startup_s")
    added = scaled.get("added_after_rise_s")
    if rise is None:
        goals.append("GOAL adds executors within one start-up + one deadline of the rise: not judged (the traffic "
                     "never exceeded what the starting executors serve)")
    else:
        limit = float(startup or 0.0) + deadline_s
        ok = added is not None and added <= limit
        cold = scaled.get("first_task_after_added_s") or {}
        what = (f"the rise at {rise} s: {traffic['schedule'][rise]} rows/s, over what {scaled['rise_over']} "
                f"executor(s) serve; asked {_secs(scaled.get('asked_after_rise_s'))}, registered {_secs(added)} "
                f"relative to it{', before the rise' if added is not None and added <= 0 else ''}; limit "
                f"{startup} s start-up + {deadline_s:g} s = {limit:.1f} s"
                + (f"; a new executor's first task began {min(cold.values()):.1f}-{max(cold.values()):.1f} s after it "
                   f"registered ({_secs(scaled.get('first_task_after_rise_s'))} relative to the rise)" if cold else ""))
        goals.append(f"GOAL adds executors within one start-up + one deadline of the rise: {_met(ok)} ({what})")
    down = scaled.get("removed_after_peak")
    goals.append("GOAL removes them after: " + (
        f"met ({down['from']} -> {down['to']} at {down['t']:.0f} s, the fall began at "
        f"{traffic['phases']['fall']:.0f} s; {scaled['executors_at_end']} at the end)" if down else
        f"not met (no executor removed after the fall began at {traffic['phases']['fall']:.0f} s)"))
    goals.append(f"GOAL <= 1 % of rows late: {_met(scaled['late_share'] <= LATE_GOAL)} "
                 f"({100 * scaled['late_share']:.2f} %, {scaled['late']} of {scaled['produced']})")
    if cheapest is None:
        goals.append("GOAL allocated core-s <= 0.85x the cheapest fixed count meeting 1 %: not judged (no fixed count "
                     "run met 1 %)")
    else:
        ratio = scaled["x_cheapest_fixed"]
        goals.append(f"GOAL allocated core-s <= 0.85x the cheapest fixed count meeting 1 %: "
                     f"{_met(ratio is not None and ratio <= COST_GOAL)} ({scaled['allocated_core_s']} / "
                     f"{cheapest['allocated_core_s']} core-s of {cheapest['config']} = {ratio})")
    once = [r["config"] for r in judged if not r["once"]]
    goals.append(f"GOAL every record once: {_met(scaled['once'])} (deadline: {scaled['missing']} missing, "
                 f"{scaled['duplicates']} duplicated; " + (f"not once in {', '.join(once)})" if once else
                                                          "every configuration once)"))
    return rows, goals


def _premise(traffic: Mapping[str, Any], fixed: Sequence[Mapping[str, Any]], cheapest: Mapping[str, Any] | None
             ) -> str:
    needs = traffic["needed"]
    peak, trough = max(needs), min(needs)
    measured = (f"; measured: the cheapest fixed count meeting 1 % is {cheapest['config'][6:]}" if cheapest else
                "; measured: no fixed count run met 1 %")
    below = [f"{r['config']} {100 * r['late_share']:.2f} % late" for r in fixed if cheapest and r is not cheapest
             and int(r["config"][6:]) < int(cheapest["config"][6:])]
    ok = peak >= 3 and trough <= 2 and (cheapest is None or int(cheapest["config"][6:]) >= 3)
    return (f"PREMISE the load needs >= 3 executors at its peak and 1-2 at its trough: {_met(ok)} (the model: "
            f"{peak} at {max(traffic['schedule'])} rows/s, {trough} at {min(traffic['schedule'])} rows/s"
            f"{measured}{'; ' + ', '.join(below) if below else ''})")


def _met(ok: bool) -> str:
    return "met" if ok else "NOT MET"


def _secs(value: float | None) -> str:
    return "never" if value is None else f"{value:+.1f} s"


def markdown(doc: Mapping[str, Any]) -> str:
    """The table and the goal lines."""
    rows, goals = judge(doc)
    traffic, machine = doc["traffic"], doc["machine"]
    lines = [
        "# Scaling on Spark, up and down (`python -m pacer_bench.scaling_spark`)", "",
        f"{doc['workers']} workers of 1 core (standalone), Kafka ({doc.get('partitions', PARTITIONS)} partitions; "
        f"spark.sql.shuffle.partitions {doc.get('shuffle_partitions', 2)}), `format(\"pacer\")` "
        f"zStream, deadline {traffic['deadline_s']:g} s, {traffic['wait_ms']:g} ms of waiting per row; wave "
        f"{traffic['low']}-{traffic['high']} rows/s over {traffic['duration_s']} s (rise from "
        f"{traffic['phases']['rise']:.0f} s, peak {traffic['phases']['peak']:.0f}-{traffic['phases']['fall']:.0f} "
        f"s, trough from {traffic['phases']['trough']:.0f} s). {machine['when']}, {machine['machine']}, PySpark "
        f"{machine['pyspark']}.", "",
        "| config | late | p99 latency | records once | allocated core-s | x cheapest fixed | pacer's allocated core-s "
        "| executors min-max | scale-up after the rise (asked, registered, first task) | changes (pacer) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if not r.get("judged"):
            lines.append(f"| {r['config']} | failed: {str(r.get('error'))[:200]} | | | | | | | | |")
            continue
        up = ("-" if "rise_s" not in r else "no rise" if r["rise_s"] is None else
              f"{_secs(r.get('asked_after_rise_s'))}, {_secs(r.get('added_after_rise_s'))}, "
              f"{_secs(r.get('first_task_after_rise_s'))}")
        changes = "; ".join(f"{c['from']}->{c['to']} at {c['t']:.0f} s" for c in r["changes"]
                            if c["t"] is not None) or "none"
        lines.append(
            f"| {r['config']} | {100 * r['late_share']:.2f} % ({r['late']}/{r['produced']}) | "
            f"{r['latency_p99_s']} s | {'yes' if r['once'] else 'NO'} | {r['allocated_core_s']} | "
            f"{r.get('x_cheapest_fixed') or '-'} | {_round(r['pacer_allocated_core_s'])} | "
            f"{r['executors_min']}-{r['executors_max']} | {up} | {changes} |")
    lines += ["", "Allocated core-s: the executors Spark listed (its status store) from the first record to the last "
              "plus one deadline, the same window for every configuration; pacer's from attach to its report. Times "
              "are seconds from the first record; executors min-max count those Spark started and pacer removed at "
              "attach (gone within seconds). The rise: the first second whose rows/s exceed what the scaler's starting "
              f"executors serve within the deadline (1 core = {capacity(1, **_model(traffic)):.0f} rows/s: a batch's "
              f"fixed part of {traffic.get('fixed_part_s', FIXED_PART_S):g} s, no headroom); asked: pacer's first "
              "scale-up; registered: the first executor Spark listed after the scaler held its fewest; first task: "
              "when a new executor's first task got its rows (its Python worker and Kafka consumers started).", ""]
    lines += [f"- {g}" for g in goals]
    for r in rows:
        if r.get("judged") and r["changes"]:
            lines += ["", f"{r['config']}: executors listed by Spark over time "
                      + ", ".join(f"{n:g} at {t:.0f} s" for t, n in r["executors"])
                      + "; pacer's changes: " + "; ".join(f"{c['from']}->{c['to']} at {c['t']} s ({c['reason']})"
                                                         for c in r["changes"])]
    return "\n".join(lines) + "\n"


def _model(traffic: Mapping[str, Any]) -> dict[str, float]:
    return {"wait_ms": float(traffic["wait_ms"]), "deadline_s": float(traffic["deadline_s"]),
            "fixed_part_s": float(traffic.get("fixed_part_s", FIXED_PART_S))}


def _round(value: Any) -> Any:
    return round(float(value), 1) if isinstance(value, int | float) else value


# ---------------------------------------------------------------------- the application (a child process)


def wait_per_row(wait_s: float, trace: str | None = None) -> Any:
    """The user's per-row work for ``mapInPandas``: each row waits ``wait_s`` (as a call to a service), nothing
    computed. With ``trace``, each task appends its executor, start (its first rows came), end and rows to that
    file (the executors run on this machine)."""

    def run(frames: Iterator[Any]) -> Iterator[Any]:
        started, rows = time.time(), 0
        for frame in frames:
            time.sleep(len(frame) * wait_s)
            rows += len(frame)
            yield frame
        if trace:
            from pacer_spark.run.cluster import executor_id

            with open(trace, "a", encoding="utf-8") as out:
                out.write(json.dumps({"executor": executor_id(), "start": round(started, 3),
                                      "end": round(time.time(), 3), "rows": rows}) + "\n")

    return run


class Sink:
    """``foreachBatch``: every row's key and Kafka timestamp, with the batch's completion time, one JSON line a
    batch; the distinct keys so far (for the application to know when every record came)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.keys: set[int] = set()
        self.lock = threading.Lock()

    def write(self, frame: Any, batch_id: int) -> None:
        rows = frame.collect()
        done = time.time()
        if not rows:
            return
        keys = [int(r.key) for r in rows]
        line = json.dumps({"batch": batch_id, "done": round(done, 4), "keys": keys,
                           "ts": [round(float(r.ts), 3) for r in rows]})
        with self.lock, open(self.path, "a", encoding="utf-8") as out:
            out.write(line + "\n")
            self.keys.update(keys)

    def count(self) -> int:
        with self.lock:
            return len(self.keys)


def _registered(spark: Any) -> int:
    from pacer_spark.jvm.status_store import live_executors

    return len(live_executors(spark) or [])


def executor_spans(spark: Any) -> list[dict[str, Any]]:
    """Every executor Spark's status store lists, dead ones too: id, cores, added and removed (epoch)."""
    from pacer_spark.jvm.status_store import executor_spans as spans

    return spans(spark) or []


def _anchor(pacer: Any) -> float | None:
    """The epoch second at which pacer's scaling clock read 0 (its changes' ``at`` are seconds from it)."""
    scaling = getattr(pacer, "scaling", None)
    try:
        return float(time.time() - (scaling.clock() - scaling.started))  # type: ignore[union-attr]
    except (AttributeError, TypeError):
        return None


def application(spec: Mapping[str, Any]) -> int:
    """One configuration's Spark application (module docstring); writes ``result.json`` and ``sink.jsonl`` in its
    work folder, ``running.json`` once its query runs, and waits for ``produced.json``."""
    import pacer_spark
    from pacer_spark.run.cluster import running_cluster

    work = Path(spec["work"])
    cluster = running_cluster(spec["cluster_dir"])
    if cluster is None:
        raise SystemExit(f"no cluster runs in {spec['cluster_dir']}")
    began = time.time()
    spark = pacer_spark.session_builder(cluster.master_url, f"{NAME}-{spec['config']}", kafka=True,
                                        shuffle_partitions=int(spec["shuffle_partitions"]), conf={
        "spark.executor.memory": "512m", "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
        "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1", **cluster.app_conf()}).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    result: dict[str, Any] = {"config": spec["config"]}
    try:
        limit = time.monotonic() + 120
        while _registered(spark) < spec["workers"] and time.monotonic() < limit:
            time.sleep(0.5)
        result["registered"] = _registered(spark)
        wait_s = float(spec["wait_ms"]) / 1000.0
        warm = spark.range(0, 40 * spec["workers"], 1, 2 * spec["workers"]).selectExpr(
            "CAST(id AS STRING) AS key", "CAST(0 AS DOUBLE) AS ts")
        warm.mapInPandas(wait_per_row(wait_s), "key STRING, ts DOUBLE").collect()  # every executor's Python worker
        result["warm_s"] = round(time.time() - began, 1)
        attach = {**spec["attach"], "executors": tuple(spec["attach"]["executors"])}
        pacer = pacer_spark.attach(spark, admission="zstream", deadline=f"{spec['deadline_s']:g}s", **attach,
                                   checkpoint_root=str(work / "pacer"))
        result["anchor"] = _anchor(pacer)
        sink = Sink(work / "sink.jsonl")
        try:
            frame = (spark.readStream.format("pacer").option("pacer.source", "kafka")
                     .option("kafka.bootstrap.servers", spec["servers"]).option("subscribe", spec["topic"])
                     .option("startingOffsets", "earliest").load()
                     .selectExpr("CAST(key AS STRING) AS key", "CAST(timestamp AS DOUBLE) AS ts"))
            trace = str(work / "tasks.jsonl")
            query = (frame.mapInPandas(wait_per_row(wait_s, trace), "key STRING, ts DOUBLE").writeStream
                     .queryName(QUERY).foreachBatch(sink.write)
                     .option("checkpointLocation", str(work / "checkpoint")).start())
            limit = time.monotonic() + 60
            while query.lastProgress is None and query.exception() is None and time.monotonic() < limit:
                time.sleep(0.2)
            result["query_started"] = time.time()
            (work / "running.json").write_text(json.dumps({"at": result["query_started"]}))
            produced_file = work / "produced.json"
            limit = time.monotonic() + START_TIMEOUT_S + float(spec["duration_s"])
            while not produced_file.exists() and query.exception() is None and time.monotonic() < limit:
                time.sleep(0.5)
            produced = json.loads(produced_file.read_text())["count"] if produced_file.exists() else 0
            limit = time.monotonic() + float(spec["drain_s"])
            while sink.count() < produced and query.exception() is None and time.monotonic() < limit:
                time.sleep(0.5)
            error = query.exception()
            result["error"] = str(error)[:2000] if error else None
            report = pacer.report({"check": NAME, "config": spec["config"]})
            (work / "report.json").write_text(json.dumps(report, default=str))
            result["report"] = {k: report.get(k) for k in ("start", "end", "cost", "scaling")}
            result["report"]["queries"] = {q: {k: v for k, v in body.items() if not isinstance(v, list | dict)}
                                           for q, body in (report.get("queries") or {}).items()}
            result["spans"] = executor_spans(spark)
            query.stop()
        finally:
            pacer.stop()
    finally:
        (work / "result.json").write_text(json.dumps(result, default=str))
        spark.stop()
    return 0


# ---------------------------------------------------------------------- this process: cluster, broker, traffic


def produce_wave(servers: str, topic: str, schedule: Sequence[int], partitions: int) -> dict[str, Any]:
    """Write ``schedule`` (rows per second) into ``topic``, keys 0.. in order, round robin over ``partitions``, each
    second in :data:`SLICES` flushed slices on the wall clock."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "linger.ms": 5})
    key, slip = 0, 0.0
    t0, m0 = time.time(), time.monotonic()
    for second, rows in enumerate(schedule):
        for k in range(SLICES):
            for _ in range(rows * (k + 1) // SLICES - rows * k // SLICES):
                producer.produce(topic, key=str(key).encode(), value=b"x", partition=key % partitions)
                key += 1
            producer.flush(10)
            lag = time.monotonic() - (m0 + second + (k + 1) / SLICES)
            if lag < 0:
                time.sleep(-lag)
            slip = max(slip, lag)
    return {"t0": t0, "end": time.time(), "count": key, "undelivered": producer.flush(30),
            "worst_slip_s": round(slip, 3)}


def task_figures(tasks: Sequence[Mapping[str, Any]], t0: float) -> dict[str, dict[str, Any]]:
    """Per executor: its tasks, their rows, and when its first task's rows came (seconds from ``t0``)."""
    out: dict[str, dict[str, Any]] = {}
    for t in tasks:
        mine = out.setdefault(str(t["executor"]), {"tasks": 0, "rows": 0, "first_s": math.inf, "busy_s": 0.0})
        mine["tasks"] += 1
        mine["rows"] += int(t["rows"])
        mine["first_s"] = min(mine["first_s"], round(float(t["start"]) - t0, 2))
        mine["busy_s"] = round(mine["busy_s"] + float(t["end"]) - float(t["start"]), 2)
    return out


def read_sink(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def measure_config(name: str, args: argparse.Namespace, traffic: Mapping[str, Any], cluster_dir: Path,
                   servers: str, work: Path) -> dict[str, Any]:
    """One configuration: its topic, its application, the traffic; the raw record :func:`judge_run` reads."""
    from pacer_kafka import ensure_topic

    folder = work / name
    folder.mkdir(parents=True)
    topic = f"{NAME}-{name}-{uuid.uuid4().hex[:6]}"
    ensure_topic(servers, topic, PARTITIONS)
    attach = parse_config(name, args.workers, args.initial)
    spec = {"config": name, "work": str(folder), "cluster_dir": str(cluster_dir), "servers": servers, "topic": topic,
            "workers": args.workers, "wait_ms": args.wait_ms, "deadline_s": args.deadline, "attach": attach,
            "duration_s": args.duration, "drain_s": args.drain, "shuffle_partitions": args.shuffle_partitions}
    (folder / "spec.json").write_text(json.dumps(spec))
    env = {k: v for k, v in os.environ.items() if k != "PACER_PLUGINS"}  # every installed strategy
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    run: dict[str, Any] = {"config": name, "attach": attach, "topic": topic}
    print(f"[{NAME}] {name}: starting its application", flush=True)
    with open(folder / "app.log", "wb") as log:
        child = subprocess.Popen([sys.executable, "-m", "pacer_bench.scaling_spark", "--application",
                                  str(folder / "spec.json")], stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            limit = time.monotonic() + START_TIMEOUT_S
            while not (folder / "running.json").exists() and child.poll() is None and time.monotonic() < limit:
                time.sleep(0.2)
            if (folder / "running.json").exists():
                print(f"[{NAME}] {name}: its query runs; writing the wave", flush=True)
                run["produced"] = produce_wave(servers, topic, traffic["schedule"], PARTITIONS)
                (folder / "produced.json").write_text(json.dumps(run["produced"]))
            child.wait(timeout=args.drain + START_TIMEOUT_S)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    result = json.loads((folder / "result.json").read_text()) if (folder / "result.json").exists() else {}
    report = result.get("report") or {}
    run.update(error=result.get("error") or (None if child.returncode == 0 else _tail(folder / "app.log")),
               returncode=child.returncode, anchor=result.get("anchor"), registered=result.get("registered"),
               spans=result.get("spans"), cost=report.get("cost"), queries=report.get("queries"),
               scaling=_scaling_excerpt(report.get("scaling")))
    if run.get("produced"):
        t0 = float(run["produced"]["t0"])
        batches = read_sink(folder / "sink.jsonl")
        run["sink"] = sink_figures(batches, produced=run["produced"]["count"], t0=t0, deadline_s=args.deadline,
                                   duration_s=args.duration)
        run["batches"] = [[round(b["done"] - t0, 2), len(b["keys"]), round(min(b["ts"]) - t0, 2),
                           round(max(b["ts"]) - t0, 2)] for b in batches]
        run["tasks"] = task_figures(read_sink(folder / "tasks.jsonl"), t0)
    if run["error"] and (folder / "app.log").exists():
        Path(args.out).mkdir(parents=True, exist_ok=True)
        shutil.copy(folder / "app.log", Path(args.out) / f"app-{name}.log")
    return run


def _scaling_excerpt(scaling: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not scaling:
        return None
    keys = ("strategy", "params", "min_executors", "max_executors", "initial_executors", "executors", "changes",
            "allocated_core_s", "startup_s", "removals", "refused", "ungranted", "deferred", "enacted_by")
    return {k: scaling.get(k) for k in keys}


def _tail(path: Path, lines: int = 40) -> str:
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def machine_facts() -> dict[str, Any]:
    import pyspark

    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False).stderr.splitlines()
    return {"when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, Python "
                       f"{platform.python_version()}", "pyspark": pyspark.__version__,
            "java": java[0] if java else None, "load_average": list(os.getloadavg())}


@contextlib.contextmanager
def _cluster(folder: Path, workers: int) -> Iterator[Path]:
    from pacer_spark.run.cluster import start_cluster, stop_cluster

    start_cluster(folder, workers=workers, cores=1, memory="1g")
    try:
        yield folder
    finally:
        stop_cluster(folder)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every configuration in turn on one cluster and one broker."""
    from pacer_bench.kafka_source import kafka_servers

    wave = Wave(args.low, args.high, args.duration)
    schedule = wave.schedule()
    model = {"wait_ms": args.wait_ms, "deadline_s": args.deadline, "fixed_part_s": FIXED_PART_S}
    traffic = {**asdict(wave), **model, "phases": wave.phases(), "schedule": schedule,
               "needed": [needed(r, **model) for r in schedule]}
    doc: dict[str, Any] = {"command": " ".join(["python -m pacer_bench.scaling_spark", *sys.argv[1:]]),
                           "workers": args.workers, "partitions": PARTITIONS, "initial": args.initial,
                           "shuffle_partitions": args.shuffle_partitions,
                           "traffic": traffic, "machine": machine_facts(), "runs": []}
    work = Path(tempfile.mkdtemp(prefix="pacer-scaling-spark-"))
    began = time.time()
    try:
        with _cluster(work / "cluster", args.workers) as cluster_dir, kafka_servers(None) as servers:
            for name in args.configs.split(","):
                doc["runs"].append(measure_config(name.strip(), args, traffic, cluster_dir, servers, work))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    doc["machine"]["load_average_end"] = list(os.getloadavg())
    doc["machine"]["wall_s"] = round(time.time() - began, 1)
    return doc


def write(doc: Mapping[str, Any], out: Path) -> str:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{NAME}.json").write_text(json.dumps(doc, indent=1) + "\n")
    text = markdown(doc)
    (out / f"{NAME}.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pacer_bench.scaling_spark", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="where scaling-spark.json and scaling-spark.md go")
    parser.add_argument("--workers", type=int, default=5, help="workers of one core (the deadline rule's maximum)")
    parser.add_argument("--duration", type=int, default=270, help="seconds of traffic per configuration")
    parser.add_argument("--deadline", type=float, default=10.0)
    parser.add_argument("--configs", default="deadline,fixed-2,fixed-3")
    parser.add_argument("--low", type=int, default=80, help="rows/s at the trough")
    parser.add_argument("--high", type=int, default=450, help="rows/s at the peak")
    parser.add_argument("--wait-ms", type=float, default=4.0, help="milliseconds each row waits")
    parser.add_argument("--initial", type=int, default=1, help="the deadline configuration's initial executors")
    parser.add_argument("--drain", type=flag_seconds, default=90.0,
                        help="seconds after the traffic to wait for every row")
    parser.add_argument("--shuffle-partitions", type=int, default=PARTITIONS,
                        help="spark.sql.shuffle.partitions: pacer takes a format('pacer') query's tasks to be these "
                             "(session_builder's default is 2; the topic's partitions are what its batches run)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs, sink files)")
    parser.add_argument("--rejudge", action="store_true", help="the table again from --out's JSON (no Spark)")
    parser.add_argument("--application", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.application:
        return application(json.loads(Path(args.application).read_text()))
    if not args.out:
        parser.error("--out is required")
    out = Path(args.out)
    if args.rejudge:
        doc = json.loads((out / f"{NAME}.json").read_text())
    else:
        for name in args.configs.split(","):
            parse_config(name.strip(), args.workers, args.initial)
        doc = measure(args)
    print(write(doc, out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
