"""The conformance suite over every installed strategy (narrow with PACER_CONFORMANCE_STRATEGIES)."""

from pacer_conformance import (
    AdmissionConformance,
    PlacementConformance,
    ScalingConformance,
    SchedulingConformance,
)


class TestAdmission(AdmissionConformance):
    pass


class TestScheduling(SchedulingConformance):
    pass


class TestPlacement(PlacementConformance):
    pass


class TestScaling(ScalingConformance):
    pass
