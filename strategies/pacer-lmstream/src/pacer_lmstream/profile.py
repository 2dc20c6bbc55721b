"""InfPT_0 from the machine's cost profile (``inflection_profile``; departs from the paper's fixed 150 KB).

LMStream initialises its inflection point "with the values derived from the experiments that are dependent on
resource configurations or workload types". Without them, pacer's InfPT_0 is one fixed 150 KB per partition for
every query on every machine, and Eq. 10 (trained on the InfPT each batch was placed with) never moves it: where
the machine's crossover lies above 150 KB, batches in between go to the GPU, which costs them more (the README's
placement grid).

With ``inflection_profile`` set, InfPT_0 is the query's own crossover on that machine: the bytes per partition at
which the query's DAG with every GPU-capable operator on the GPU costs what it costs all on the CPU, under a cost
profile. The profile is a pacer-sim GPU profile name (``onprem-a100``, as ``pacer sim --gpu-profile`` takes) or a
``pacer.cost-profile/1`` file (what ``pacer calibrate --kernels --profile-out P`` measures on this machine's
kernels). Algorithm 2 then maps as the paper does, around that point.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from pacer.model import Device, QuerySpec

#: Bytes per partition the search covers (the regression's default clamps).
LOW_BYTES, HIGH_BYTES = 1_000.0, 256_000_000.0
#: Log-spaced probes before bisecting: the first one where the GPU is no dearer brackets the crossover.
PROBES = 64


@lru_cache(maxsize=8)
def profile_cost_model(profile: str) -> Any:
    """The noise-free pacer-sim cost model of ``profile`` (a GPU profile name or a cost-profile file).

    :raises ValueError: an unknown profile name or an unreadable file, naming it and what is accepted.
    """
    from pacer_sim import build_cost_model

    option = {"cost_profile": profile} if Path(profile).is_file() else {"gpu_profile": profile}
    try:
        model, warning = build_cost_model(option, gpus=1)
    except ValueError as exc:
        raise ValueError(f"lmstream: inflection_profile {profile!r}: {exc} (give a pacer-sim GPU profile name, "
                         "as pacer sim --gpu-profile takes, or a cost-profile file from pacer calibrate --kernels)") \
            from None
    if warning:
        raise ValueError(f"lmstream: inflection_profile {profile!r}: {warning}")
    return replace(model, noise=0.0)


def query_seconds(model: Any, spec: QuerySpec, part_bytes: float, *, on_gpu: bool) -> float:
    """Seconds a batch of ``part_bytes`` per partition takes alone under ``model``: every operator on the CPU, or
    every GPU-capable one on the GPU."""
    from pacer_sim import alone_seconds

    partitions = max(1, spec.partitions)
    devices: dict[str, Device] = {op.id: "gpu" if on_gpu and not op.cpu_only else "cpu" for op in spec.dag.operators}
    return alone_seconds(model, spec, devices, part_bytes * partitions, cores=partitions, gpus=1)


def crossover_bytes(model: Any, spec: QuerySpec, *, low: float = LOW_BYTES, high: float = HIGH_BYTES) -> float:
    """The bytes per partition from which the query costs no more on the GPU than on the CPU under ``model``:
    ``low`` when the GPU is never dearer, ``high`` when it is dearer throughout."""
    def gpu_wins(part: float) -> bool:
        return query_seconds(model, spec, part, on_gpu=True) <= query_seconds(model, spec, part, on_gpu=False)

    step = math.log(high / low) / (PROBES - 1)
    below = low
    for k in range(PROBES):
        part = low * math.exp(step * k)
        if gpu_wins(part):
            if k == 0:
                return low
            above = part
            for _ in range(40):
                middle = math.sqrt(below * above)
                below, above = (below, middle) if gpu_wins(middle) else (middle, above)
            return above
        below = part
    return high
