"""pacer-sim: a deterministic discrete-event runtime for pacer's strategies. Every figure it gives is simulated."""

from pacer.event_loop import POLL_INTERVAL
from pacer_sim.costs import BatchWork, CostModel, OperatorCost, OperatorWork, batch_work, default_operators
from pacer_sim.engine import ResourceChange, Simulation
from pacer_sim.runtime import SIM_RUNTIME, SimRuntime

__all__ = [
    "POLL_INTERVAL",
    "SIM_RUNTIME",
    "BatchWork",
    "CostModel",
    "OperatorCost",
    "OperatorWork",
    "ResourceChange",
    "SimRuntime",
    "Simulation",
    "batch_work",
    "default_operators",
]
