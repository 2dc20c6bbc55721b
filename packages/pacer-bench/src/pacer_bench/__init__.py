"""pacer bench: run a named experiment with every configuration in one go, then tabulate and plot it."""

from pacer_bench.outputs import BenchRun, write_outputs

__all__ = ["BenchRun", "write_outputs"]
