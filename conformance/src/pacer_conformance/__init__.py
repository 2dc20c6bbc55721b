"""pacer's conformance suite: the tests every strategy and every runtime must pass.

Strategy authors subclass the suites in one line::

    from pacer_conformance import AdmissionConformance

    class TestMyAdmission(AdmissionConformance):
        strategies = ("my-strategy",)

Without ``strategies`` a suite runs over every installed strategy of its
decision kind (narrowed by ``PACER_CONFORMANCE_STRATEGIES=a,b``). The
end-to-end :class:`RuntimeConformance` needs a ``conformance_runtime`` fixture
(the simulator provides one; Spark too) returning a :class:`ConformanceRuntime`.
"""

from pacer_conformance.decisions import AdmissionConformance, PlacementConformance, SchedulingConformance
from pacer_conformance.runtime import ConformanceRuntime, RunResult, Scenario, ScenarioQuery
from pacer_conformance.suite import RuntimeConformance

__all__ = [
    "AdmissionConformance",
    "ConformanceRuntime",
    "PlacementConformance",
    "RunResult",
    "RuntimeConformance",
    "Scenario",
    "ScenarioQuery",
    "SchedulingConformance",
]
