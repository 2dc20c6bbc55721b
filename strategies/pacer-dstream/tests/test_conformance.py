"""The shared conformance suite, pinned to this package's strategies."""

from pacer_conformance import PlacementConformance


class TestDStreamPlacement(PlacementConformance):  # type: ignore[misc]  # pacer_conformance ships no type information
    strategies = ("dstream",)
