"""What pacer bench does differently per runtime, declared in one place: the runner and the scenarios read a
runtime's :class:`RuntimeTraits` and never compare its name.

pacer's :class:`pacer.Runtime` protocol says what any caller needs (``name``, ``capabilities``, ``run``); what only
the bench needs (the options it passes, what a configuration means there, which capabilities its scenarios need and
how the runtime can or cannot give them) is kept here, by runtime name, so that pacer-bench imports no runtime
package. A runtime without an entry gets :func:`runtime_traits`'s defaults: no options, configurations as they are,
wall-clock time, every capability assumed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from pacer import QueryRun, RunConfig


class Configured(Protocol):
    """What adapting a configuration reads of it (:class:`pacer_bench.scenarios.Config` is one): its queries. A
    protocol, so that this module needs nothing of the scenarios, which need it."""

    @property
    def queries(self) -> tuple[QueryRun, ...]:
        """The configuration's queries."""

#: Capabilities a scenario or a configuration may need of a runtime (``gpu`` as in ``pacer.Runtime.capabilities``).
GPU = "gpu"
RESOURCE_LOSS = "resource-loss"
EXECUTORS = "executors"
#: The runtime a scenario runs on where the asked one lacks a capability the scenario needs (and says so).
SIMULATOR = "sim"
#: Seconds a Spark configuration may take after its traffic ends to finish its backlog.
SPARK_DRAIN_TIMEOUT = 120.0
#: latency-target's name of the static trigger at 0 s (``--static 0``): Spark's own default trigger, pacer only
#: observing (plain ``format("kafka")`` on Kafka), where ``asap`` is pacer's source admitting as Spark's default would.
SPARK_DEFAULT = "spark default"


def _no_options(master: str, rapids_jars: Sequence[str]) -> dict[str, Any]:
    return {}


def _as_is(config: Configured, run: RunConfig) -> RunConfig:
    return run


def _nothing(master: str) -> str:
    return ""


def _no_capabilities(master: str) -> frozenset[str]:
    return frozenset()


@dataclass(frozen=True)
class RuntimeTraits:
    """What pacer bench knows of one runtime beyond the :class:`pacer.Runtime` protocol.

    :param described: how the scenario's summary line ends when it ran there (`` — real Spark``).
    :param simulated: the runtime simulates time: long runs cost little, so scenarios run longer there.
    :param install_hint: added to the error when the runtime is not installed (what to ``pip install``).
    :param run_options: ``(master, rapids_jars)`` -> the options every configuration passes it
        (``config.options[name]``).
    :param adapt: what a configuration's run means there (e.g. static admission as the engine's own trigger).
    :param machine: ``master`` -> what the machine description adds (e.g. the engine's version).
    :param lacks: capability -> why the runtime cannot give it (the note or error says so).
    :param jars_give: capabilities it gains from the RAPIDS Accelerator jars (``--rapids-jar``).
    :param master_gives: ``master`` -> capabilities it gains there (a standalone cluster's executors).
    """

    described: str
    simulated: bool = False
    install_hint: str = ""
    run_options: Callable[[str, Sequence[str]], dict[str, Any]] = _no_options
    adapt: Callable[[Configured, RunConfig], RunConfig] = _as_is
    machine: Callable[[str], str] = _nothing
    lacks: Mapping[str, str] = field(default_factory=dict)
    jars_give: frozenset[str] = frozenset()
    master_gives: Callable[[str], frozenset[str]] = _no_capabilities

    def lacking(self, needs: Iterable[str], rapids_jars: Sequence[str] = (), master: str = "") -> dict[str, str]:
        """The capabilities of ``needs`` this runtime cannot give with ``rapids_jars`` on ``master``, each with
        why."""
        given = self.master_gives(master)
        return {need: self.lacks[need] for need in needs
                if need in self.lacks and not (rapids_jars and need in self.jars_give) and need not in given}


def spark_options(master: str, rapids_jars: Sequence[str]) -> dict[str, Any]:
    """What the bench asks of the ``spark`` runtime: one session for every configuration (warmed up once), no
    progress lines, and :data:`SPARK_DRAIN_TIMEOUT` seconds for each configuration's backlog."""
    return {"master": master, "rapids_jar": list(rapids_jars), "drain_timeout": SPARK_DRAIN_TIMEOUT,
            "progress_every": 0.0, "keep_session": True}


def on_spark(config: Configured, run: RunConfig) -> RunConfig:
    """What a configuration means on Spark: static admission is Spark's own processing-time trigger (pacer only
    observes), and a raising strategy falls back to its baseline rather than failing the stream."""
    run = replace(run, fallback=True)
    if config.queries and all(q.admission == "static" for q in config.queries):
        interval = float(config.queries[0].admission_params.get("interval", 10.0))
        run = run.with_options("spark", trigger=f"{interval:g}s")
    return run


def standalone_gives(master: str) -> frozenset[str]:
    """A standalone cluster's master (``spark://``) gives executors to change."""
    return frozenset({EXECUTORS}) if master.startswith("spark://") else frozenset()


def spark_machine(master: str) -> str:
    """``, PySpark 4.0.1 local[2]``: the engine's version and master."""
    import pyspark

    return f", PySpark {pyspark.__version__} {master}"


#: The runtimes pacer bench knows more of than the protocol says, by the name the ``pacer_runtimes`` hook gives.
RUNTIME_TRAITS: dict[str, RuntimeTraits] = {
    SIMULATOR: RuntimeTraits(" — simulated (pacer-sim)", simulated=True),
    "spark": RuntimeTraits(
        " — real Spark",
        install_hint=" (from the checkout: pip install ./integrations/pacer-spark, or the README's development "
                     "install)",
        run_options=spark_options, adapt=on_spark, machine=spark_machine,
        lacks={GPU: "placement on Spark needs a GPU and the RAPIDS Accelerator jar (--rapids-jar), and neither is "
                    "here",
               RESOURCE_LOSS: "local Spark cannot take cores away mid-run",
               EXECUTORS: "local Spark has one executor, the driver (pacer cluster up --workers 3, then "
                          "--master spark://HOST:PORT, changes a standalone cluster's)"},
        jars_give=frozenset({GPU}), master_gives=standalone_gives,
    ),
}


def runtime_traits(name: str) -> RuntimeTraits:
    """The traits of the runtime called ``name`` (:data:`RUNTIME_TRAITS`; defaults for one the bench does not
    know)."""
    return RUNTIME_TRAITS.get(name) or RuntimeTraits(f" — {name}")


#: How well the simulator predicted Spark where it was measured: configurations within all three bounds of
#: ``pacer bench fidelity`` (:data:`pacer_bench.fidelity.BOUNDS`), of those run, over its committed runs
#: (``bench-results/fidelity-spark*``; a test recounts them). Every simulated figure's settings say it.
FIDELITY_MEASURED = (11, 21)
FIDELITY_NOTE = (f"simulated: within the fidelity bounds (batches ±15 %, rows late ±1 point, busy core-s ±20 %) in "
                 f"{FIDELITY_MEASURED[0]} of {FIDELITY_MEASURED[1]} query runs measured on Spark local[2] "
                 "(bench-results/fidelity-spark*)")
