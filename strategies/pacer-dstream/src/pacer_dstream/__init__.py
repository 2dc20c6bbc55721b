"""dStream (Monitor and Device Mapper) as the pacer placement strategy ``dstream``."""

from pacer.model import CompiledDAG
from pacer_dstream.mapper import Path, shortest_path
from pacer_dstream.monitor import CostEntry, CostTable, Monitor, bucket_index, ema, transition_cost
from pacer_dstream.state import DStreamState

__all__ = [
    "CompiledDAG",
    "CostEntry",
    "CostTable",
    "DStreamState",
    "Monitor",
    "Path",
    "bucket_index",
    "ema",
    "shortest_path",
    "transition_cost",
]
__version__ = "0.1.0"
