"""pacer's conformance suite: the tests every strategy and every runtime must pass.

Strategy authors subclass the suites in one line::

    from pacer_conformance import AdmissionConformance

    class TestMyAdmission(AdmissionConformance):
        strategies = ("my-strategy",)

Without ``strategies`` a suite runs over every installed strategy of its
decision kind (narrowed by ``PACER_CONFORMANCE_STRATEGIES=a,b``). The
end-to-end :class:`RuntimeConformance` runs on the ``conformance_runtime`` fixture: by default the
installed runtime named by ``PACER_CONFORMANCE_RUNTIME`` (``sim`` unless set), found through the
``pacer_runtimes`` hook; a runtime package may override the fixture (Spark passes its session).
"""

from pacer_conformance.decisions import AdmissionConformance, PlacementConformance, SchedulingConformance
from pacer_conformance.runtime import RunResult, run_scenario, scenario
from pacer_conformance.scaling import ScalingConformance
from pacer_conformance.suite import RuntimeConformance, RuntimePlacementConformance

__all__ = [
    "AdmissionConformance",
    "PlacementConformance",
    "RunResult",
    "RuntimeConformance",
    "RuntimePlacementConformance",
    "ScalingConformance",
    "SchedulingConformance",
    "run_scenario",
    "scenario",
]
