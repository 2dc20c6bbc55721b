"""How the Controller calls a decision hook: the context a strategy sees, validation, fallback."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from pacer.model import AdmissionDecision, BatchReport, QueryHistory, SystemView
from pacer.plugins import PluginManager
from pacer.query_state import FALLBACK, QueryState, StrategyError
from pacer.service_time import ServiceTimeModel
from pacer.strategy import StrategyContext, StrategyInfo
from pacer.views import ControllerReads

log = logging.getLogger("pacer.controller")


class DecisionDispatch(ControllerReads):
    """The part of :class:`pacer.Controller` that builds contexts and calls decision hooks.

    Holds the plugin manager, the fallback switch and the scheduler's state.
    """

    pm: PluginManager
    fallback: bool
    scheduler: str
    _scheduler_params: dict[str, Any]
    _scheduler_state: Any
    _scheduler_history: QueryHistory
    _scheduler_service: ServiceTimeModel
    _feedback_callers: list[tuple[str, Any, Any]] | None
    catch_up: bool

    def system_view(self) -> SystemView:
        """The view a decision gets of the whole runtime (the Controller's)."""
        raise NotImplementedError

    @staticmethod
    def _build_state(info: StrategyInfo, spec: Any, params: Mapping[str, Any]) -> Any:
        return info.state(spec, params) if info.state is not None else {}

    def _strategies(self, spec: Any, chosen: Mapping[str, str], admission_params: Mapping[str, Any] | None,
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
                states[info.name] = self._build_state(info, spec, params[info.name])
        return params, states

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

    def context(self, query_id: str | None, decision: str) -> StrategyContext:
        """The :class:`StrategyContext` the chosen strategy for ``decision`` sees (``query_id`` None: the scheduler).

        For tools and benchmarks that call a hook directly; the Controller builds the same one for each call.
        """
        if query_id is None:
            return self._ctx(None, "scheduling", self.scheduler)
        q = self._query(query_id)
        return self._ctx(q, decision, q.selected[decision])

    def _fallback_ctx(self, q: QueryState | None, decision: str) -> StrategyContext:
        name = FALLBACK[decision]
        ctx = self._ctx(q, decision, name)
        if q is not None and name not in q.states:
            info = self.pm.find(name, decision)
            params = info.resolve_params(None)
            q.params.setdefault(name, params)
            q.states[name] = self._build_state(info, q.spec, params)
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

    def _admission(self, q: QueryState, now: float) -> AdmissionDecision:
        """Ask ``q``'s admission strategy for its decision at ``now``, validated against its buffer."""

        def check(d: AdmissionDecision) -> None:
            if not isinstance(d, AdmissionDecision):
                raise TypeError(f"expected AdmissionDecision, got {type(d).__name__}")
            if d.count < 0 or d.shed < 0 or d.count + d.shed > len(q.buffer):
                raise ValueError(f"admits {d.count} and sheds {d.shed} of a buffer of {len(q.buffer)} datasets")

        decision: AdmissionDecision = self._decide(
            self.pm.hook.pacer_admit, q, "admission", q.selected["admission"], check,
            buffer=q.buffer, now=now, system=self.system_view(),
        )
        return decision

    def _catches_up(self, admission: str) -> bool:
        """Whether the Controller catches up for queries admitted by ``admission`` (:mod:`pacer.catch_up`)."""
        return self.catch_up and self.pm.find(admission, "admission").catch_up

    def _feedback(self, q: QueryState, report: BatchReport) -> None:
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
