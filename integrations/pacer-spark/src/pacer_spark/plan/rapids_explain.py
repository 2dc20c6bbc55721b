"""RAPIDS' own tagging of every batch's plan, read back and compared with pacer's placement, operator by operator.

The RAPIDS Accelerator has a mode made for machines without a GPU: with ``spark.rapids.sql.mode=explainOnly`` it
plans every query as it would for the GPU, runs it on the CPU, and with ``spark.rapids.sql.explain=ALL`` logs,
for each plan, every exec it would run on the GPU and every one it would not, with its reasons::

    *Exec <HashAggregateExec> will run on GPU
      !Exec <ShuffleExchangeExec> cannot run on GPU because REQUIRED_BY_STATEFUL_OPERATOR not supported on GPU
        ! <MicroBatchScanExec> cannot run on GPU because GPU does not currently support the operator class ...

(one line per exec, indented by its depth in the plan; expressions and partitionings in between). The executor
plugin initialises no GPU in that mode, so a CPU-only machine can check, batch by batch, that the confs pacer
sets (:func:`pacer_spark.plan.dag.rapids_confs`) become exactly the plan RAPIDS would run.

:class:`ExplainLog` copies the messages of RAPIDS' ``GpuOverrides`` logger, each with its thread's name, into a
file of its own (through :mod:`pacer_spark.jvm.log4j`); a streaming query plans its batches on its stream thread,
whose name carries the query's id, so the explain of a query's batch is the one its stream thread logged while
planning it. :func:`parse_explain` reads the exec lines into a tree, and :func:`compare` matches pacer's operators
to RAPIDS' execs kind by kind in data-flow order (as the executed plan's metrics are matched) and tells, per
operator, the device pacer decided, the device its confs enacted, the device RAPIDS planned, and RAPIDS' reason.
:class:`RapidsExplainCheck` keeps each query's :class:`BatchCheck` values for the report.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import threading
import uuid
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pacer import Device, OperatorDAG, Placement
from pacer_spark.jvm import log4j, session_confs
from pacer_spark.plan.dag import COARSENED, RAPIDS_PLUGIN, enacted_devices, kind_of, rapids_confs

log = logging.getLogger("pacer_spark.plan.rapids_explain")

#: The logger RAPIDS logs its explain output to (``GpuOverrides``' ``logWarning``).
EXPLAIN_LOGGER = "com.nvidia.spark.rapids.GpuOverrides"
#: RAPIDS' SQL mode conf and the value that plans for the GPU and runs on the CPU.
MODE_CONF, EXPLAIN_ONLY_MODE = "spark.rapids.sql.mode", "explainOnly"
#: The confs of a session whose RAPIDS plugin only explains (the jar goes in ``spark.jars``).
EXPLAIN_ONLY_CONFS: dict[str, str] = {
    "spark.plugins": RAPIDS_PLUGIN, MODE_CONF: EXPLAIN_ONLY_MODE, "spark.rapids.sql.explain": "ALL",
    "spark.rapids.sql.enabled": "true",
}
# One log record in ExplainLog's file: RS thread US message GS (a message spans lines).
_RECORD_START, _THREAD_END, _RECORD_END = "\x1e", "\x1f", "\x1d"
_PATTERN = f"{_RECORD_START}%t{_THREAD_END}%m{_RECORD_END}%n"
_LINE = re.compile(r"^(?P<indent>\s*)(?P<mark>[*!@#$])(?P<what>\w*)\s*<(?P<name>\w+)>(?P<rest>.*)$")
_QUERY_ID = re.compile(r"\[id = ([0-9a-f-]{36}),")
#: Spark exec classes whose plan node name is not the class name less ``Exec``.
_NODE_OF_EXEC = {"ShuffleExchangeExec": "Exchange", "ReusedExchangeExec": "ReusedExchange",
                 "BroadcastExchangeExec": "BroadcastExchange"}


def node_name(exec_name: str) -> str:
    """The Spark plan node name of an exec class: ``"ShuffleExchangeExec"`` -> ``"Exchange"``."""
    return _NODE_OF_EXEC.get(exec_name, exec_name.removesuffix("Exec"))


def explain_only(spark: Any) -> bool:
    """Whether ``spark`` runs the RAPIDS plugin in ``explainOnly`` mode."""
    plugins = session_confs.session_conf(spark, "spark.plugins") or ""
    mode = session_confs.session_conf(spark, MODE_CONF) or ""
    return RAPIDS_PLUGIN in plugins and mode.lower() == EXPLAIN_ONLY_MODE.lower()


@dataclass
class ExecTag:
    """One exec of a RAPIDS explain: its Spark class name, whether RAPIDS would run it on the GPU, and why not."""

    exec_name: str
    on_gpu: bool
    reason: str
    children: list[ExecTag] = field(default_factory=list)

    def walk_post(self) -> Iterator[ExecTag]:
        """Children before parents (data-flow order, as :meth:`pacer_spark.plan.dag.PlanNode.walk_post`)."""
        for child in self.children:
            yield from child.walk_post()
        yield self


def parse_explain(text: str) -> list[ExecTag]:
    """The exec tree(s) of one RAPIDS explain message (expressions, partitionings and scans left out).

    An exec line is ``<indent><mark>Exec <Name> ...`` or, for a class RAPIDS has no rule for,
    ``<indent>! <NameExec> cannot run on GPU because ...``; ``*`` marks one RAPIDS would run on the GPU.
    """
    roots: list[ExecTag] = []
    stack: list[tuple[int, ExecTag]] = []
    for line in text.splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        what, name = match["what"], match["name"]
        if what != "Exec" and not (what == "" and name.endswith("Exec")):
            continue
        depth = len(match["indent"])
        rest = match["rest"]
        reason = rest.split(" because ", 1)[1].strip() if " because " in rest else ""
        tag = ExecTag(name, match["mark"] == "*", reason)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        (stack[-1][1].children if stack else roots).append(tag)
        stack.append((depth, tag))
    return roots


@dataclass(frozen=True)
class OperatorCheck:
    """One pacer operator of a batch, as pacer decided, enacted and RAPIDS planned it.

    :ivar rapids: the device RAPIDS planned for the exec matched to it; None when RAPIDS' plan has no exec of
        its kind at that place. :ivar reason: RAPIDS' reason when it would not run it on the GPU.
    """

    operator_id: str
    name: str
    decided: Device
    enacted: Device
    rapids: Device | None
    exec_name: str | None
    reason: str

    @property
    def agrees(self) -> bool:
        """RAPIDS planned the device pacer's confs enacted, or has no exec of its kind there: a workload's template can
        model an operator Spark did not plan (the batch's ``absent`` lists it; a DAG read from the executed plan has
        none)."""
        return self.rapids is None or self.rapids == self.enacted

    def to_json(self) -> dict[str, Any]:
        """The report's form."""
        return {"operator": self.operator_id, "name": self.name, "decided": self.decided, "enacted": self.enacted,
                "rapids": self.rapids, "exec": self.exec_name, "agrees": self.agrees,
                **({"reason": self.reason} if self.reason and self.rapids != "gpu" else {})}


@dataclass(frozen=True)
class BatchCheck:
    """pacer's placement of one batch against RAPIDS' tagging of the plan Spark made for it.

    :ivar operators: per pacer operator (the sink left out: RAPIDS has no exec for it).
    :ivar rapids_only_gpu: execs RAPIDS would run on the GPU that match no pacer operator and whose type pacer's
        confs did not enable (a placement leak).
    :ivar problem: why the batch could not be compared ('' when it was).
    :ivar coarsened: some exec type had instances placed on both devices (kept on the CPU).
    :ivar unmodelled: execs of RAPIDS' plan that match no pacer operator (their type's conf decides them).
    """

    batch_id: str
    spark_batch_id: int
    operators: tuple[OperatorCheck, ...] = ()
    rapids_only_gpu: tuple[str, ...] = ()
    problem: str = ""
    coarsened: bool = False
    unmodelled: int = 0

    @property
    def agrees(self) -> bool:
        """Compared, every operator agrees, and RAPIDS put nothing pacer did not model on the GPU."""
        return not self.problem and not self.rapids_only_gpu and all(op.agrees for op in self.operators)

    @property
    def rapids_gpu_ratio(self) -> float:
        """Share of pacer's operators (sink included, as :attr:`pacer.Placement.gpu_ratio`) RAPIDS planned on the GPU."""
        total = len(self.operators) + 1
        return sum(1 for op in self.operators if op.rapids == "gpu") / total

    def to_json(self) -> dict[str, Any]:
        """The report's form."""
        out: dict[str, Any] = {"batch": self.batch_id, "spark_batch": self.spark_batch_id, "agrees": self.agrees}
        if self.problem:
            out["problem"] = self.problem
            return out
        out["rapids_gpu_ratio"] = round(self.rapids_gpu_ratio, 4)
        if self.coarsened:  # some exec type had instances pacer placed on both devices: RAPIDS ran it on the CPU
            out["coarsened"] = True
        out["operators"] = [op.to_json() for op in self.operators]
        if self.rapids_only_gpu:
            out["rapids_only_gpu"] = list(self.rapids_only_gpu)
        if self.unmodelled:
            out["unmodelled_execs"] = self.unmodelled
        absent = [op.operator_id for op in self.operators if op.rapids is None]
        if absent:
            out["absent"] = absent
        return out


def compare(batch_id: str, spark_batch_id: int, dag: OperatorDAG, placement: Placement | None,
            roots: Sequence[ExecTag]) -> BatchCheck:
    """Match ``dag``'s operators to RAPIDS' execs kind by kind in data-flow order and compare their devices."""
    if placement is None:
        return BatchCheck(batch_id, spark_batch_id, problem="the batch has no placement")
    if not roots:
        return BatchCheck(batch_id, spark_batch_id, problem="RAPIDS logged no explain for the batch's plan")
    by_kind: dict[str, list[ExecTag]] = {}
    for root in roots:
        for node in root.walk_post():
            kind = kind_of(node_name(node.exec_name))
            if kind is not None:
                by_kind.setdefault(kind, []).append(node)
    enacted = enacted_devices(placement, dag)
    checks: list[OperatorCheck] = []
    for op_id in dag.topological_order():
        op = dag.operator(op_id)
        if op.kind == "sink":
            continue
        tags = by_kind.get(op.kind, [])
        tag = tags.pop(0) if tags else None
        checks.append(OperatorCheck(
            op_id, op.name, placement.devices.get(op_id, "cpu"), enacted[op_id],
            None if tag is None else ("gpu" if tag.on_gpu else "cpu"), None if tag is None else tag.exec_name,
            "" if tag is None else tag.reason))
    # Execs of RAPIDS' plan no pacer operator matched (a workload's template models fewer filters and projections
    # than Spark plans): on the GPU is right for a type pacer's confs enabled (RAPIDS switches whole types), and a
    # leak past pacer's placement otherwise.
    confs, _ = rapids_confs(placement, dag)
    unmatched = [left for tags in by_kind.values() for left in tags]
    leaked = tuple(left.exec_name for left in unmatched
                   if left.on_gpu and confs.get(f"spark.rapids.sql.exec.{left.exec_name}") != "true")
    return BatchCheck(batch_id, spark_batch_id, tuple(checks), leaked, coarsened=COARSENED in placement.note,
                      unmodelled=len(unmatched))


def plan_message(messages: Sequence[str]) -> list[ExecTag]:
    """The exec tree of a batch from the explain messages its stream thread logged while planning it: the message
    with the most execs pacer models (a ``foreachBatch`` function may plan further queries on that thread)."""
    best: list[ExecTag] = []
    best_count = -1
    for text in messages:
        roots = parse_explain(text)
        count = sum(1 for root in roots for tag in root.walk_post() if kind_of(node_name(tag.exec_name)))
        if count >= best_count:
            best, best_count = roots, count
    return best


class ExplainLog:
    """RAPIDS' explain messages of one session, per streaming query, read from a file of their own.

    Creating it attaches a log4j appender to RAPIDS' ``GpuOverrides`` logger (at WARN, kept out of Spark's
    console log); :meth:`take` returns the messages a query's stream thread logged since the last call.
    """

    def __init__(self, spark: Any) -> None:
        self._spark = spark
        self._dir = tempfile.mkdtemp(prefix="pacer-rapids-explain-")
        self.path = Path(self._dir) / "explain.log"
        self.path.touch()
        self._name = f"pacer-rapids-explain-{uuid.uuid4().hex[:8]}"
        self._offset = 0
        self._partial = ""
        self._pending: dict[str, list[str]] = {}
        self._lock = threading.Lock()
        log4j.add_log_file_appender(spark, EXPLAIN_LOGGER, str(self.path), _PATTERN, self._name)

    def take(self, stream_id: str) -> list[str]:
        """The explain messages the stream thread of query ``stream_id`` logged since the last call, oldest first."""
        with self._lock:
            self._read()
            return self._pending.pop(stream_id, [])

    def _read(self) -> None:
        with self.path.open("r", encoding="utf-8", errors="replace", newline="") as fh:
            fh.seek(self._offset)
            chunk = fh.read()
            self._offset = fh.tell()
        records = (self._partial + chunk).split(_RECORD_START)
        self._partial = ""
        for i, record in enumerate(records):
            if not record:
                continue
            if _RECORD_END not in record:  # still being written: the rest comes with the next read
                if i == len(records) - 1:
                    self._partial = _RECORD_START + record
                continue
            thread, _, message = record.split(_RECORD_END, 1)[0].partition(_THREAD_END)
            match = _QUERY_ID.search(thread)
            if match is not None:
                self._pending.setdefault(match[1], []).append(message)

    def close(self) -> None:
        """Detach the appender and delete the file."""
        log4j.remove_log_appender(self._spark, EXPLAIN_LOGGER, self._name)
        try:
            self.path.unlink(missing_ok=True)
            os.rmdir(self._dir)
        except OSError:
            pass


class RapidsExplainCheck:
    """Every batch's :class:`BatchCheck` of one session whose RAPIDS runs in ``explainOnly`` mode.

    :meth:`check` is called when a batch completes, before Spark plans the query's next batch (the stream thread
    is then in the next ``latestOffset`` at the earliest), so the messages its stream thread logged since the
    previous call are this batch's.
    """

    #: Batches each query's report lists: the most recent ones, and as many that disagree.
    KEEP = 100

    def __init__(self, spark: Any) -> None:
        self.log = ExplainLog(spark)
        self.checks: dict[str, deque[BatchCheck]] = {}
        self.differing: dict[str, deque[BatchCheck]] = {}
        self.counts: dict[str, dict[str, float]] = {}

    def check(self, query_id: str, stream_id: str | None, batch_id: str, spark_batch_id: int, dag: OperatorDAG,
              placement: Placement | None) -> BatchCheck:
        """Compare the placement of ``batch_id`` with RAPIDS' tagging of the plan Spark made for it; kept for the
        report and returned."""
        if stream_id is None:
            result = BatchCheck(batch_id, spark_batch_id, problem="the query's stream id is not known")
        else:
            result = compare(batch_id, spark_batch_id, dag, placement, plan_message(self.log.take(stream_id)))
        self.checks.setdefault(query_id, deque(maxlen=self.KEEP)).append(result)
        counts = self.counts.setdefault(query_id, {"batches": 0, "compared": 0, "agreed": 0, "gpu_ratio_sum": 0.0})
        counts["batches"] += 1
        if not result.problem:
            counts["compared"] += 1
            counts["agreed"] += result.agrees
            counts["gpu_ratio_sum"] += result.rapids_gpu_ratio
        if not result.agrees:
            self.differing.setdefault(query_id, deque(maxlen=self.KEEP)).append(result)
            log.warning("query %r batch %s: RAPIDS' plan differs from pacer's placement: %s", query_id, batch_id,
                        result.to_json())
        return result

    def summary(self) -> dict[str, Any]:
        """Per query: batches compared, agreeing and not, the mean share of pacer's operators RAPIDS planned on the
        GPU, and the most recent batches and those that differ (:data:`KEEP` of each), oldest first."""
        out: dict[str, Any] = {}
        for query_id, counts in self.counts.items():
            compared = int(counts["compared"])
            out[query_id] = {
                "mode": EXPLAIN_ONLY_MODE, "batches": int(counts["batches"]), "compared": compared,
                "agreed": int(counts["agreed"]), "disagreed": compared - int(counts["agreed"]),
                "rapids_gpu_operator_ratio": counts["gpu_ratio_sum"] / compared if compared else 0.0,
                "recent": [c.to_json() for c in self.checks.get(query_id, ())],
                "differing": [c.to_json() for c in self.differing.get(query_id, ())],
            }
        return out

    def close(self) -> None:
        """Stop reading RAPIDS' log."""
        self.log.close()


__all__ = ["EXPLAIN_ONLY_CONFS", "BatchCheck", "ExecTag", "ExplainLog", "OperatorCheck", "RapidsExplainCheck",
           "compare", "explain_only", "parse_explain", "plan_message"]
