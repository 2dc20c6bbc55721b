"""pacer-zstream: zStream's deadline-aware admission and EDF/RDAS scheduling as pacer strategies."""

from pacer_zstream.admission import Estimate, ZStreamAdmission, t_anal, t_buff, t_sched
from pacer_zstream.scheduling import edf, rdas, rdas_weights, remaining

__all__ = ["Estimate", "ZStreamAdmission", "edf", "rdas", "rdas_weights", "remaining", "t_anal", "t_buff", "t_sched"]
