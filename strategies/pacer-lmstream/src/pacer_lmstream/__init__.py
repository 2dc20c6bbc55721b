"""LMStream (ConstructMicroBatch, MapDevice, inflection-point regression) as the pacer strategy ``lmstream``."""

from pacer.model import CompiledDAG
from pacer_lmstream.admission import MaxLatencyAverage, construct_micro_batch, estimate_max_latency
from pacer_lmstream.placement import BASE_COST, OperatorCost, map_device
from pacer_lmstream.regression import InflectionRegressor, Sample, fit_inflection
from pacer_lmstream.state import LMStreamState

__all__ = [
    "BASE_COST",
    "CompiledDAG",
    "InflectionRegressor",
    "LMStreamState",
    "MaxLatencyAverage",
    "OperatorCost",
    "Sample",
    "construct_micro_batch",
    "estimate_max_latency",
    "fit_inflection",
    "map_device",
]
__version__ = "0.1.0"
