"""The shared conformance suite, pinned to this package's strategies."""

from pacer_conformance import AdmissionConformance, PlacementConformance


class TestLMStreamAdmission(AdmissionConformance):  # type: ignore[misc]  # pacer_conformance ships no type information
    strategies = ("lmstream",)


class TestLMStreamPlacement(PlacementConformance):  # type: ignore[misc]  # pacer_conformance ships no type information
    strategies = ("lmstream",)
