"""Which run of a ``format("pacer")`` query is current: runs are ordered by what their messages carry, never by the
order the messages reach the driver in.

The JVM gives up waiting on a call and goes on (an ask past the decision timeout, a stop event after 5 s), and Python
handles the call later: after a restart, the previous run's stop event or a timed-out ask of it can reach the driver
after the new run's first ask. Two running queries under one pacer name (the same ``pacer.query``, one ``queryName``
in two sessions) interleave their asks. So every message (ask and stop event) carries its run's identity and order,
a :class:`RunMark`, and :func:`later` orders two runs of one query:

1. the same ``spark_run_id``: one run (a second paced source of it is a union or a join);
2. both ``run_started`` known (wire version 6): the higher is later. It is the JVM's start stamp of the source run,
   strictly increasing over the JVM's source runs, and a run's sources are created when its stream thread starts,
   after the previous run of the checkpoint stopped (Spark runs one run of a checkpoint at a time). The driver talks
   to one JVM, so the stamps of all its runs are comparable; this holds also where a run never asked (it stopped
   first, or every call of it timed out) and where two runs start at the same batch;
3. else (a version 5 jar), the same stream (``query_id``: one checkpoint) and both ``first_batch_id`` known and
   different: the higher is later. A run's first ``latestOffset`` is at a Spark batch after every batch the previous
   run committed (and after the one it replays from the offset log), so a later run never starts lower. Two runs
   start at the same batch when the earlier committed nothing, and a run that never called ``latestOffset`` has
   none: this rule alone cannot order them (that is what the stamp is for);
4. else the order is unknown: a run the driver heard of before is the earlier, one it never heard of the later
   (arrival order, as before the stamp).

What the driver does with the order is :meth:`pacer_spark.driver.protocol.paced.PacedQueries.verdict`'s: a later run is
a restart; an ask of an earlier run never becomes current (stale: dropped, counted, warned once per query); an earlier
run's stop event settles its unanswered admissions once
(:meth:`pacer_spark.driver.protocol.truth.SourceTruth.old_stop`); a run of another stream while the current one still
runs is refused with an error naming both.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from pacer_spark.jvm.decider import DecisionRequest


class Verdict(Enum):
    """What a message is to its query (:meth:`pacer_spark.driver.protocol.paced.PacedQueries.verdict`)."""

    #: the query's current run (or the first run the driver hears of)
    CURRENT = "current"
    #: a later run than the current one: a restart
    LATER = "later"
    #: an earlier run than the current one, or a source run whose stop event was handled already (its last word)
    EARLIER = "earlier"
    #: a run of another stream (checkpoint) while the current run still runs: two queries under one pacer name
    CONFLICT = "conflict"


@dataclass(frozen=True)
class RunMark:
    """A run's identity and order, as one of its messages carries them (-1: not sent or not known yet).

    :ivar spark_run_id: the streaming query run's id (Spark's ``runId``: a new one at every start).
    :ivar stream_id: the streaming query's id (``query_id``: one per checkpoint, the same across restarts).
    :ivar first_batch: the Spark batch id of the run's first ``latestOffset``.
    :ivar started: the JVM's start stamp of the source run (``run_started``, microseconds since the epoch).
    """

    spark_run_id: str | None
    stream_id: str | None
    first_batch: int = -1
    started: int = -1

    @classmethod
    def of(cls, request: DecisionRequest) -> RunMark:
        """The mark of ``request``'s run."""
        return cls(request.spark_run_id, request.query_id, request.first_batch_id, request.run_started)

    def known(self, other: RunMark) -> RunMark:
        """This mark, with what ``other`` (a later message of the same run) knows that this one did not."""
        first = self.first_batch if self.first_batch >= 0 else other.first_batch
        started = self.started if self.started >= 0 else other.started
        return RunMark(self.spark_run_id or other.spark_run_id, self.stream_id or other.stream_id, first, started)

    def describe(self) -> str:
        """``Spark run R of stream S (first batch N, started T)``, for messages."""
        parts = [f"first batch {self.first_batch}" if self.first_batch >= 0 else "",
                 f"started {self.started}" if self.started >= 0 else ""]
        known = ", ".join(p for p in parts if p)
        return f"Spark run {self.spark_run_id} of stream {self.stream_id}" + (f" ({known})" if known else "")


def later(current: RunMark, other: RunMark) -> bool | None:
    """Whether ``other`` is a later run of the query than ``current`` (module docstring's rules 1-3); None: the marks
    do not tell (rule 4 is the caller's, who knows which runs it heard of)."""
    if other.spark_run_id is not None and other.spark_run_id == current.spark_run_id:
        return False
    if current.started >= 0 and other.started >= 0 and current.started != other.started:
        return other.started > current.started
    same_stream = current.stream_id is not None and current.stream_id == other.stream_id
    if same_stream and current.first_batch >= 0 and other.first_batch >= 0 and current.first_batch != other.first_batch:
        return other.first_batch > current.first_batch
    return None
