"""pacer-sim: a deterministic discrete-event runtime for pacer's strategies. Every figure it gives is simulated."""

from pacer_sim.costs import BatchWork, CostModel, OperatorCost, OperatorWork, batch_work, default_operators
from pacer_sim.engine import POLL_INTERVAL, ResourceChange, Simulation

__all__ = [
    "POLL_INTERVAL",
    "BatchWork",
    "CostModel",
    "OperatorCost",
    "OperatorWork",
    "ResourceChange",
    "Simulation",
    "batch_work",
    "default_operators",
]
