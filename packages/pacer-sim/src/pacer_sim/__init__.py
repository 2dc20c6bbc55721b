"""pacer-sim: a deterministic discrete-event runtime for pacer's strategies. Every figure it gives is simulated."""

from pacer.event_loop import POLL_INTERVAL
from pacer_sim.costs import (
    BatchWork,
    CostModel,
    OperatorCost,
    OperatorWork,
    alone_seconds,
    batch_work,
    default_operators,
)
from pacer_sim.engine import ResourceChange, Simulation
from pacer_sim.rapids import BUILTIN_PROFILE, DEFAULT_GPU_PROFILE
from pacer_sim.runtime import SIM_RUNTIME, SimRuntime, build_cost_model

__all__ = [
    "BUILTIN_PROFILE",
    "DEFAULT_GPU_PROFILE",
    "POLL_INTERVAL",
    "SIM_RUNTIME",
    "BatchWork",
    "CostModel",
    "OperatorCost",
    "OperatorWork",
    "ResourceChange",
    "SimRuntime",
    "Simulation",
    "alone_seconds",
    "batch_work",
    "build_cost_model",
    "default_operators",
]
