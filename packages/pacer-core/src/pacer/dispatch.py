"""How the Controller calls a decision hook: the context a strategy sees, validation, fallback.

:class:`DecisionDispatcher` is the Controller's part that talks to the plugins. It holds the plugin manager,
the fallback switch and the scheduler's state, builds each query's strategies, and answers
:meth:`~DecisionDispatcher.admission`, :meth:`~DecisionDispatcher.place`, :meth:`~DecisionDispatcher.schedule`
and :meth:`~DecisionDispatcher.feedback` with a validated decision (or the baseline's, under fallback).
It reads a query's :class:`~pacer.query_state.QueryState` and changes only its strategies' state and its
fallback count.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from pacer.model import (
    AdmissionDecision,
    BatchReport,
    Devices,
    MicroBatch,
    Placement,
    QueryHistory,
    ScheduleDecision,
    SystemView,
)
from pacer.plugins import PluginManager
from pacer.query_state import FALLBACK, QueryState, StrategyError
from pacer.service_time import ServiceTimeModel
from pacer.strategy import StrategyContext, StrategyInfo

log = logging.getLogger("pacer.controller")


def _build_state(info: StrategyInfo, spec: Any, params: Mapping[str, Any]) -> Any:
    return info.state(spec, params) if info.state is not None else {}


class DecisionDispatcher:
    """Asks the chosen strategies for their decisions (module docstring).

    :param pm: the plugin manager whose hooks are called.
    :param scheduler: the scheduling strategy's name; ``scheduler_params`` its parameters.
    :param fallback: when a strategy raises, log it and use the baseline for that decision
        (:data:`pacer.query_state.FALLBACK`) instead of raising :class:`StrategyError`.
    :raises UnknownStrategyError: for a scheduler no installed plugin provides.
    """

    def __init__(self, pm: PluginManager, *, scheduler: str, scheduler_params: Mapping[str, Any] | None,
                 fallback: bool) -> None:
        self.pm = pm
        self.fallback = fallback
        info = pm.find(scheduler, "scheduling")
        self.scheduler = scheduler
        self._scheduler_params = info.resolve_params(scheduler_params)
        self._scheduler_state = _build_state(info, None, self._scheduler_params)
        self._scheduler_history = QueryHistory(maxlen=1)
        self._scheduler_service = ServiceTimeModel()
        self._feedback_callers: list[tuple[str, Any, Any]] | None = None

    # ------------------------------------------------------------------ strategies and contexts

    def strategies(self, spec: Any, chosen: Mapping[str, str], admission_params: Mapping[str, Any] | None,
                   placement_params: Mapping[str, Any] | None) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
        """The resolved parameters and fresh state of the strategies ``chosen`` (decision -> name) for ``spec``."""
        given = {"admission": dict(admission_params or {}), "placement": dict(placement_params or {})}
        infos = {kind: self.pm.find(name, kind) for kind, name in chosen.items()}
        params: dict[str, dict[str, Any]] = {}
        states: dict[str, Any] = {}
        for kind, info in infos.items():
            params[info.name] = info.resolve_params({**params.get(info.name, {}), **given[kind]})
        for info in infos.values():
            if info.name not in states:
                states[info.name] = _build_state(info, spec, params[info.name])
        return params, states

    def allows_catch_up(self, admission: str) -> bool:
        """Whether the admission strategy ``admission`` lets the Controller catch up (:mod:`pacer.catch_up`)."""
        return self.pm.find(admission, "admission").catch_up

    def context(self, q: QueryState | None, decision: str) -> StrategyContext:
        """The :class:`StrategyContext` the chosen strategy for ``decision`` sees (``q`` None: the scheduler's)."""
        if q is None:
            return self._ctx(None, "scheduling", self.scheduler)
        return self._ctx(q, decision, q.selected[decision])

    def _ctx(self, q: QueryState | None, decision: str, chosen: str) -> StrategyContext:
        if q is None:
            return StrategyContext(
                decision=decision,
                chosen=chosen,
                query=None,
                params=self._scheduler_params,
                state=self._scheduler_state,
                history=self._scheduler_history,
                selected={"scheduling": self.scheduler},
                states={self.scheduler: self._scheduler_state},
                service=self._scheduler_service,
            )
        selected = {**q.selected, "scheduling": self.scheduler}
        return StrategyContext(
            decision=decision,
            chosen=chosen,
            query=q.spec,
            params=q.params.get(chosen, {}),
            state=q.states.get(chosen, {}),
            history=q.history,
            selected=selected,
            states=q.states,
            service=q.service,
        )

    def _fallback_ctx(self, q: QueryState | None, decision: str) -> StrategyContext:
        name = FALLBACK[decision]
        ctx = self._ctx(q, decision, name)
        if q is not None and name not in q.states:
            info = self.pm.find(name, decision)
            params = info.resolve_params(None)
            q.params.setdefault(name, params)
            q.states[name] = _build_state(info, q.spec, params)
            ctx = self._ctx(q, decision, name)
        return ctx

    def _decide(
        self,
        hook: Any,
        q: QueryState | None,
        decision: str,
        chosen: str,
        validate: Callable[[Any], None],
        **kwargs: Any,
    ) -> Any:
        query_id = q.spec.id if q else None
        try:
            result = hook(ctx=self._ctx(q, decision, chosen), **kwargs)
            if result is None:
                raise StrategyError(
                    chosen,
                    decision,
                    query_id,
                    "no installed plugin answered for it (is its package loaded? see PACER_PLUGINS)",
                )
            validate(result)
            return result
        except Exception as exc:
            error = (
                exc
                if isinstance(exc, StrategyError)
                else StrategyError(chosen, decision, query_id, f"{type(exc).__name__}: {exc}")
            )
            if not self.fallback or chosen == FALLBACK[decision]:
                raise error from exc
            log.warning("%s; falling back to %r for this decision", error, FALLBACK[decision])
            if q is not None:
                q.fallbacks += 1
            result = hook(ctx=self._fallback_ctx(q, decision), **kwargs)
            validate(result)
            return result

    # ------------------------------------------------------------------ the decisions

    def admission(self, q: QueryState, now: float, system: SystemView) -> AdmissionDecision:
        """``q``'s admission decision at ``now``, validated against its buffer."""

        def check(d: AdmissionDecision) -> None:
            if not isinstance(d, AdmissionDecision):
                raise TypeError(f"expected AdmissionDecision, got {type(d).__name__}")
            if d.count < 0 or d.shed < 0 or d.count + d.shed > len(q.buffer):
                raise ValueError(f"admits {d.count} and sheds {d.shed} of a buffer of {len(q.buffer)} datasets")

        decision: AdmissionDecision = self._decide(
            self.pm.hook.pacer_admit, q, "admission", q.selected["admission"], check,
            buffer=q.buffer, now=now, system=system,
        )
        return decision

    def place(self, q: QueryState, batch: MicroBatch, devices: Devices, now: float) -> Placement:
        """A placement of ``batch`` on ``devices``, valid for ``q``'s DAG, naming the strategy that chose it."""
        chosen = q.selected["placement"]

        def check(p: Placement) -> None:
            if not isinstance(p, Placement):
                raise TypeError(f"expected Placement, got {type(p).__name__}")
            (p if p.strategy else replace(p, strategy=chosen)).validate(q.spec.dag, devices)

        placement: Placement = self._decide(
            self.pm.hook.pacer_place, q, "placement", chosen, check,
            batch=batch, dag=q.spec.dag, devices=devices, now=now,
        )
        return placement if placement.strategy else replace(placement, strategy=chosen)

    def schedule(self, view: SystemView) -> ScheduleDecision:
        """The order and core shares of ``view``'s pending batches, valid for its cores."""

        def check(d: ScheduleDecision) -> None:
            if not isinstance(d, ScheduleDecision):
                raise TypeError(f"expected ScheduleDecision, got {type(d).__name__}")
            d.validate(view.pending, view.cores, self.scheduler)

        decision: ScheduleDecision = self._decide(
            self.pm.hook.pacer_schedule, None, "scheduling", self.scheduler, check,
            pending=view.pending, now=view.now, system=view,
        )
        return decision

    def feedback(self, q: QueryState, report: BatchReport) -> None:
        """Tell every plugin's ``pacer_batch_completed`` about ``report`` (a raising one: see ``fallback``)."""
        ctx = self._ctx(q, "feedback", "")
        if self._feedback_callers is None:
            self._feedback_callers = self.pm.per_plugin_callers("pacer_batch_completed")
        for plugin_name, _, caller in self._feedback_callers:
            try:
                caller(ctx=ctx, report=report)
            except Exception as exc:
                error = StrategyError(plugin_name, "feedback", q.spec.id, f"{type(exc).__name__}: {exc}")
                if not self.fallback:
                    raise error from exc
                log.warning("%s; feedback ignored for this batch", error)
                q.fallbacks += 1
