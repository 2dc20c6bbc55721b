"""pacer's deadline scaler (the ``deadline`` scaling strategy): :mod:`pacer_scaler.rule` holds the rule,
:mod:`pacer_scaler.plugin` registers it."""

from pacer_scaler.rule import DeadlineScaler, cores_for, effective_cores, executors_for, shared_cores, speed

__all__ = ["DeadlineScaler", "cores_for", "effective_cores", "executors_for", "shared_cores", "speed"]
