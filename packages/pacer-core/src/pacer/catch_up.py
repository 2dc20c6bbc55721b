"""Catch-up: data that is already late when pacer sees it is drained as fast as the engine can.

A backlog older than the deadline (a query started or restarted on a live source, an outage, a stall)
cannot meet it any more; holding it back to form a cheap batch only makes it later. While the oldest
buffered dataset is older than the query's deadline, the Controller forms the batch itself instead of
asking the admission strategy: the largest prefix of the buffer, oldest first, whose predicted
processing time (the query's service-time model, margin included) stays within one deadline, at least
one dataset, within the read caps. So the backlog goes in as few batches as the engine can complete
in a deadline each, never one giant batch whose own processing would push everything behind it past
the deadline. The strategy decides again once the query is comfortably on time: what waits, processed at
once, would finish within half the deadline (handing back to a strategy that waits any earlier, with the
engine still busy with the backlog, would make the next data late again), and once the last catch-up batch
met the deadline for its own oldest data. A catch-up batch that missed leaves behind it data that waited
through it: the next batch is formed at once as well, whatever that data's age, until one meets the deadline
(data that arrived after the missed batch completed is the strategy's again). A Spark source, seen only
between batches, shows that data at its next look a second or two old; a strategy that batched it would hold
it up to another deadline after the backlog (measured on Kafka: ``bench-results/kafka-restart-live-topic/``).

Before the service-time model is fitted (cold start) there is nothing to bound a batch by: the whole
buffer is taken, as Spark's default trigger would, unless the query was registered with ``probe_rows``
(:meth:`pacer.Controller.add_query`; pacer-spark's ``format("pacer")`` queries are): then every batch until the
model is fitted is a probe of at most that many rows, doubling with each batch, and catch-up sizes the batches
from the model after that.

While the query is overloaded (:mod:`pacer.overload`: no batch size serves the offered load within the
deadline) or strained under the ``keep`` policy, and after an overload period for as long as it lasted (at
least one deadline), waiting only adds latency and small batches only add per-batch costs: the Controller
admits everything buffered whenever the query is idle, as Spark's default trigger does
(:meth:`pacer.overload.OverloadMonitor.eager`), so pacer does no worse than it on the data that cannot make the
deadline (the report's ``overload`` says when and for how long). The hold-over after a period is there because
the overload is judged on the recent arrival rate: it ends before the backlog it left is drained, and bursty
traffic brings the next burst soon; a strategy that waits in between makes the next burst's data late.
Under ``shed`` the overload policy bounds the batch instead.

An episode runs from the admission of its first catch-up batch to the completion of its last (a catch-up
batch admitted within one deadline of the previous one's completion continues the episode: a source seen
only between batches, as Spark's are, may show its backlog a piece per look); the report has, per query, ``catch_up_s`` (seconds in catch-up), ``catch_up_rows`` (rows of the catch-up
batches) and ``catch_up_episodes``.

Strategies that stand for a fixed Spark trigger (core's baselines) declare ``catch_up=False`` in their
:class:`pacer.strategy.StrategyInfo`: they keep batching by their own rule, as Spark would.
"""

from __future__ import annotations

from dataclasses import dataclass

from pacer.model import DatasetBuffer, MicroBatch
from pacer.service_time import ServiceTimeModel


@dataclass
class CatchUp:
    """One query's catch-up state and totals (module docstring).

    :param deadline: the query's latency target, seconds.
    :param enabled: whether the query's admission strategy lets the Controller catch up for it.
    """

    deadline: float
    enabled: bool = True
    active_since: float | None = None
    in_flight: str | None = None
    last_end: float | None = None
    #: whether the last catch-up batch completed more than the deadline after its oldest dataset's arrival
    last_missed: bool = False
    _in_flight_earliest: float | None = None
    seconds: float = 0.0
    episodes: int = 0
    rows: int = 0
    datasets: int = 0
    _closed: float | None = None
    #: the episode as it stood before the catch-up batch in flight was admitted: restored if that batch is taken back
    _before_in_flight: tuple[float | None, float, int] | None = None

    def late(self, buffer: DatasetBuffer, now: float) -> bool:
        """Whether the oldest buffered dataset is already older than the deadline."""
        earliest = buffer.earliest_arrival
        return earliest is not None and now - earliest > self.deadline

    def waited_through_a_miss(self, buffer: DatasetBuffer) -> bool:
        """Whether the oldest buffered dataset arrived before the last catch-up batch completed, and that batch
        missed the deadline."""
        earliest = buffer.earliest_arrival
        return self.last_missed and earliest is not None and self.last_end is not None and earliest < self.last_end

    def wanted(self, buffer: DatasetBuffer, now: float, service: ServiceTimeModel, overloaded: bool = False) -> bool:
        """Whether the Controller forms the next batch itself: late data, an overload it keeps, a last catch-up
        batch that missed its deadline, or an episode on that is not comfortably on time yet (what waits, processed
        now, would finish within half the deadline); closes a finished episode otherwise."""
        if not self.enabled:
            if self.active_since is not None:
                self._close()
            return False
        if overloaded or self.late(buffer, now) or self.waited_through_a_miss(buffer):
            return True
        if self.active_since is None:
            return False
        earliest = buffer.earliest_arrival
        if earliest is not None and now - earliest + service.predict_raw(buffer.bytes) > self.deadline / 2:
            return True  # still catching up: handing back to a waiting strategy now would make it late again
        self._close()
        return False

    def count(self, buffer: DatasetBuffer, service: ServiceTimeModel, overloaded: bool = False) -> int:
        """How many of the oldest datasets the catch-up batch takes: the largest prefix predicted to complete
        within one deadline, at least one; the whole buffer before the model is fitted or while overloaded."""
        if overloaded or not service.ready:
            return len(buffer)
        nbytes = 0
        for taken, dataset in enumerate(buffer):
            nbytes += dataset.bytes
            if taken and service.predict(nbytes) > self.deadline:
                return taken
        return len(buffer)

    def admitted(self, batch: MicroBatch, now: float) -> None:
        """A catch-up batch was admitted at ``now``."""
        self._before_in_flight = (self.active_since, self.seconds, self.episodes)
        if self.active_since is None and self._closed is not None and self.last_end is not None \
                and now - self.last_end <= self.deadline:  # the same episode, seen a piece at a time
            self.seconds -= self.last_end - self._closed
            self.active_since = self._closed
        if self.active_since is None:
            self.active_since = now
            self.episodes += 1
        self.in_flight = batch.id
        self._in_flight_earliest = batch.earliest_arrival
        self.rows += batch.rows
        self.datasets += len(batch.datasets)

    def retracted(self, batch: MicroBatch) -> None:
        """A catch-up batch was taken back before it ran (:meth:`pacer.reconcile.Reconciliation.retract`): it counts no
        more, nor does the episode it opened or continued."""
        if batch.id != self.in_flight:
            return
        if self._before_in_flight is not None:
            self.active_since, self.seconds, self.episodes = self._before_in_flight
            self._before_in_flight = None
        self.in_flight = None
        self.rows -= batch.rows
        self.datasets -= len(batch.datasets)

    def completed(self, batch_id: str, at: float, buffer: DatasetBuffer, *, recounted: int = 0) -> None:
        """A batch of the query completed at ``at``; the episode ends there when it was a catch-up batch and
        nothing waits (else the next poll judges, :meth:`wanted`). ``recounted``: the rows the engine counted in it
        beyond those it was admitted with."""
        if batch_id != self.in_flight:
            return
        self.rows += recounted
        self.in_flight = None
        self.last_end = at
        earliest = self._in_flight_earliest
        self.last_missed = earliest is not None and at - earliest > self.deadline
        if not len(buffer):
            self._close()

    @property
    def active(self) -> bool:
        """Whether an episode is on."""
        return self.active_since is not None

    def _close(self) -> None:
        if self.active_since is None or self.in_flight is not None:
            return
        end = self.last_end if self.last_end is not None else self.active_since
        self.seconds += max(0.0, end - self.active_since)
        self._closed, self.active_since = self.active_since, None
