"""End-to-end invariants of every installed strategy on the simulator."""

from pacer_conformance import RuntimeConformance


class TestSimRuntime(RuntimeConformance):
    pass
