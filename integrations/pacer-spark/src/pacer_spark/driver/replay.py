"""The guard that admits exactly the datasets of a batch Spark replays, or that must be drained now."""

from __future__ import annotations

from typing import Any

from pacer import AdmissionDecision, Controller, MicroBatch, hookimpl


class ReplayGuard:
    """A guard plugin: admits exactly the datasets of a batch Spark replays from its offset log after a restart.

    Registered in front of every strategy (``tryfirst``); answers only for a query with a pending replay.

    :ivar forced: query id -> how many buffered datasets its next admission takes.
    """

    def __init__(self) -> None:
        self.forced: dict[str, int] = {}

    @hookimpl(tryfirst=True)
    def pacer_admit(self, ctx: Any) -> AdmissionDecision | None:
        """Admit the replayed batch's datasets, nothing else."""
        if ctx.query is None or ctx.query.id not in self.forced:
            return None
        return AdmissionDecision(self.forced.pop(ctx.query.id), 0, "replay of a batch from the offset log")

    def admit(self, controller: Controller, query_id: str, count: int) -> MicroBatch | None:
        """Poll ``query_id`` with its next admission forced to the ``count`` oldest buffered datasets (the read
        caps still apply): a replay, or availableNow draining what its strategy would hold for more data."""
        self.forced[query_id] = count
        try:
            return controller.poll(query_id)
        finally:
            self.forced.pop(query_id, None)


__all__ = ["ReplayGuard"]
