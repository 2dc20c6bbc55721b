"""pacer-fixedpoint: Das et al.'s dynamic batch sizing by fixed-point iteration, as a pacer admission strategy."""

from pacer_fixedpoint.admission import FixedPointState
from pacer_fixedpoint.algorithm import Observation, next_interval, round_to_granule

__all__ = ["FixedPointState", "Observation", "next_interval", "round_to_granule"]
