"""Hook specifications: the contract between pacer runtimes and strategy plugins.

A plugin is any module or object with functions marked ``@pacer.hookimpl``,
registered through the ``pacer`` entry-point group. Implementations may accept
fewer arguments than the spec lists (pluggy passes only those they name), so
specs grow by adding arguments, never by changing them.

Decision hooks are ``firstresult``: implementations are tried newest-registered
first, the baselines last (``trylast``), and the first non-None answer wins.
Each implementation answers only when ``ctx.chosen`` is its own name, so a
guard plugin (a buffer cap, say) registered in front may answer for any query.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from pacer.model import (
        AdmissionDecision,
        BatchReport,
        DatasetBuffer,
        Devices,
        MicroBatch,
        OperatorDAG,
        PendingBatch,
        Placement,
        ScheduleDecision,
        SystemView,
    )
    from pacer.runtime_api import Runtime
    from pacer.scaling import ClusterView, QueryLoad, ScaleDecision
    from pacer.strategy import StrategyContext, StrategyInfo

PROJECT = "pacer"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# ---------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------


@hookspec
def pacer_strategies() -> Sequence[StrategyInfo]:  # type: ignore[empty-body]
    """Declare the strategies this plugin provides.

    Called once per plugin manager, every implementation contributes.

    :return: a sequence of :class:`pacer.StrategyInfo` (name, the decisions it
        provides, parameters with defaults and docs, a per-query state factory).

    .. versionadded:: 0.1
    """


@hookspec
def pacer_cli_commands() -> Sequence[Any]:  # type: ignore[empty-body]
    """Add subcommands to the ``pacer`` command line.

    Every implementation contributes.

    :return: a sequence of :class:`pacer.cli.Command` (name, help, a function
        that adds arguments to an ``argparse`` parser, and a function that runs
        the parsed arguments and returns an exit code).

    .. versionadded:: 0.1
    """


@hookspec
def pacer_runtimes() -> Sequence[Runtime]:  # type: ignore[empty-body]
    """Declare the runtimes this plugin provides (the simulator, Spark, ...).

    Called when a tool needs a runtime (``pacer run --runtime NAME``, ``pacer bench``, the
    conformance suite); every implementation contributes. A runtime name may be provided once.

    :return: a sequence of objects with the :class:`pacer.run.Runtime` shape: ``name``,
        ``summary``, ``capabilities``, ``configure(group)`` (its own ``pacer run`` flags),
        ``from_args(args, config, plugin_manager)`` and ``run(config, plugin_manager=...)``
        returning a :class:`pacer.run.RunResult`.

    .. versionadded:: 0.2
    """


# ---------------------------------------------------------------------------
# Decisions
# ---------------------------------------------------------------------------


@hookspec(firstresult=True)
def pacer_admit(
    ctx: StrategyContext, buffer: DatasetBuffer, now: float, system: SystemView
) -> AdmissionDecision | None:
    """Decide whether one query's buffered datasets become a micro-batch now.

    Polled every ``poll_interval`` (10 ms, Spark's ``pollingDelay``) while the
    query is idle and data waits. ``firstresult``: the first non-None answer wins.

    :param ctx: the chosen admission strategy's name, parameters, per-query
        state and the query's history of completed batches.
    :param buffer: the query's datasets waiting for admission, oldest first
        (never empty when called).
    :param now: the runtime's clock.
    :param system: other queries' pending batches with estimated run times, the
        cores and the scheduler in force.
    :return: an :class:`AdmissionDecision` (admit the ``count`` oldest datasets,
        optionally shedding ``shed`` first), or None when ``ctx.chosen`` is not yours.

    .. versionadded:: 0.1
    """


@hookspec(firstresult=True)
def pacer_schedule(
    ctx: StrategyContext, pending: Sequence[PendingBatch], now: float, system: SystemView
) -> ScheduleDecision | None:
    """Order the admitted micro-batches of all queries and share the cores among them.

    Called when a batch is admitted or completes. ``firstresult``.

    :param ctx: the chosen scheduler's name, parameters and runtime-wide state
        (``ctx.query`` is None).
    :param pending: every admitted batch not yet completed, in admission order;
        ``running`` marks those already started.
    :param now: the runtime's clock.
    :param system: cores, devices and the same pending list.
    :return: a :class:`ScheduleDecision`: a permutation of the pending batch ids
        and optionally cores per batch (summing to at most ``system.cores``), or
        None when ``ctx.chosen`` is not yours.

    .. versionadded:: 0.1
    """


@hookspec(firstresult=True)
def pacer_place(
    ctx: StrategyContext, batch: MicroBatch, dag: OperatorDAG, devices: Devices, now: float
) -> Placement | None:
    """Choose a device for every operator instance of the batch about to run.

    Called once per micro-batch, right after admission (when its size is known).
    ``firstresult``.

    :param ctx: the chosen placement strategy's name, parameters, per-query state and history.
    :param batch: the admitted micro-batch (its bytes, rows, datasets).
    :param dag: the query's operator DAG.
    :param devices: CPU cores and GPUs on offer.
    :param now: the runtime's clock.
    :return: a :class:`Placement` covering every operator, CPU-only operators on
        the CPU, or None when ``ctx.chosen`` is not yours.

    .. versionadded:: 0.1
    """


@hookspec(firstresult=True)
def pacer_scale(
    ctx: StrategyContext, queries: Sequence[QueryLoad], cluster: ClusterView, now: float
) -> ScaleDecision | None:
    """Choose how many executors the application holds.

    Called every ``every_s`` (a few seconds) by the runtime's :class:`pacer.scaler.Scaler`, between admissions,
    never in the middle of one. ``firstresult``.

    :param ctx: the chosen scaling strategy's name, parameters and runtime-wide state (``ctx.query`` is None).
    :param queries: every query's load: deadline, service model, measured core-seconds per byte, input rate and
        its trend, backlog and its age, misses.
    :param cluster: executors running, starting and leaving, cores per executor, the user's bounds, time since the
        last change, the start-up time observed.
    :param now: the runtime's clock.
    :return: a :class:`pacer.scaling.ScaleDecision` (the executors wanted; the runtime clamps it to the user's
        bounds), or None when ``ctx.chosen`` is not yours.

    .. versionadded:: 0.2
    """


# ---------------------------------------------------------------------------
# Feedback
# ---------------------------------------------------------------------------


@hookspec
def pacer_batch_completed(ctx: StrategyContext, report: BatchReport) -> None:
    """Observe a completed micro-batch.

    Every implementation is called (not ``firstresult``). Strategies learn here:
    fixed-point's next interval, zStream's average throughput, LMStream's
    regression, dStream's cost table. Use ``ctx.state_of(name)`` to find your
    state for this query; it is None when you are not selected for it.

    :param ctx: ``decision == "feedback"``, the query, its selected strategies and their states.
    :param report: buffering, queueing and processing times, bytes, rows,
        per-dataset latencies and per-operator metrics where known.
    :return: nothing; return values are ignored.

    .. versionadded:: 0.1
    """
