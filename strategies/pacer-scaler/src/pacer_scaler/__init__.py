"""pacer's deadline scaler (the ``deadline`` scaling strategy): :mod:`pacer_scaler.rule` holds the rule,
:mod:`pacer_scaler.plugin` registers it."""

from pacer_scaler.rule import DeadlineScaler, cores_for, shared_cores

__all__ = ["DeadlineScaler", "cores_for", "shared_cores"]
