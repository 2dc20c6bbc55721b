"""InfPT_0 from a cost profile (``inflection_profile``, default ``auto``; departs from the paper's fixed 150 KB).

LMStream initialises its inflection point "with the values derived from the experiments that are dependent on
resource configurations or workload types". With one fixed 150 KB per partition for every query on every machine,
Eq. 10 (trained on the InfPT each batch was placed with) never moves it: where the machine's crossover lies above
150 KB, batches in between go to the GPU, which costs them more (the README's placement grid).

Where a cost profile is known, InfPT_0 is the query's own crossover under it: the bytes per partition at which the
query's DAG with every GPU-capable operator on the GPU costs what it costs all on the CPU. A profile is a pacer-sim
GPU profile name (``onprem-a100``, as ``pacer sim --gpu-profile`` takes; ``builtin``: pacer-sim's built-in curves)
or a ``pacer.cost-profile/1`` file (what ``pacer calibrate --kernels --profile-out P`` measures on this machine's
kernels). Algorithm 2 then maps as the paper does, around that point.

Which profile is known (:func:`initial_inflection`): the one ``inflection_profile`` names; by default (``auto``)
the one pacer-sim builds a run's cost model from when the run names none (:func:`known_profile`: its built-in
curves, ``pacer_sim.BUILTIN_PROFILE``), since a runtime hands its strategies no cost profile (the state factory
sees the query and the parameters only); none where pacer-sim is not installed. Where no profile is known, and
with ``inflection_profile=none``, InfPT_0 is the paper's 150 KB (:data:`PAPER_INFLECTION_BYTES`); a number given
in ``initial_inflection_bytes`` (> 0) is InfPT_0 as given.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from pacer.model import Device, OperatorDAG, QuerySpec

#: The paper's InfPT_0, bytes per partition: where no cost profile is known, or with ``inflection_profile=none``.
PAPER_INFLECTION_BYTES = 150_000.0
#: ``inflection_profile`` values that name no profile: the profile known for the run (the default), the paper's letter.
AUTO, NONE = "auto", "none"

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


def known_profile() -> str | None:
    """The cost profile ``inflection_profile=auto`` seeds from: the one pacer-sim builds a run's cost model from
    when the run names none (``SimRuntime.build`` reads ``gpu_profile`` with :data:`pacer_sim.BUILTIN_PROFILE` as
    its default; a :class:`pacer_sim.Simulation` defaults to the same ``CostModel()``); None without pacer-sim."""
    try:
        from pacer_sim import BUILTIN_PROFILE
    except ImportError:
        return None
    return str(BUILTIN_PROFILE)


@lru_cache(maxsize=256)
def _crossover(profile: str, dag: OperatorDAG, partitions: int, low: float, high: float) -> float:
    spec = QuerySpec("crossover", dag, partitions=partitions)
    return crossover_bytes(profile_cost_model(profile), spec, low=low, high=high)


def profile_crossover(profile: str, spec: QuerySpec, *, low: float = LOW_BYTES, high: float = HIGH_BYTES) -> float:
    """:func:`crossover_bytes` of ``spec`` under ``profile`` (:func:`profile_cost_model`), once per DAG and
    partitions in a process.

    :raises ValueError: an unknown profile name or an unreadable file, naming it.
    """
    return _crossover(profile, spec.dag, spec.partitions, low, high)


def initial_inflection(spec: QuerySpec | None, params: Mapping[str, Any]) -> tuple[float, str]:
    """LMStream's InfPT_0 for ``spec`` under the resolved strategy ``params``, and the profile it comes from
    (``""``: none, a number).

    - ``initial_inflection_bytes`` > 0: that number (the paper's letter: 150000); with a profile named as well,
      refused: both would set InfPT_0.
    - ``inflection_profile`` ``none`` (or ``""``), or no query: :data:`PAPER_INFLECTION_BYTES`.
    - ``auto`` (the default): the query's crossover under :func:`known_profile`, the paper's 150 KB without one.
    - a profile name or file: the query's crossover under it.

    The crossover is searched within ``[inflection_min_bytes, inflection_max_bytes]``.

    :raises ValueError: a negative ``initial_inflection_bytes``, both set, or an unknown profile (naming it).
    """
    given = float(params.get("initial_inflection_bytes", 0.0) or 0.0)
    named = str(params.get("inflection_profile", AUTO) or NONE).strip()
    keyword = named.lower() if named.lower() in (AUTO, NONE) else ""
    if given < 0:
        raise ValueError(f"lmstream: initial_inflection_bytes must be > 0 bytes (0: from the cost profile), got {given:g}")
    if given > 0:
        if not keyword:
            raise ValueError(f"lmstream: initial_inflection_bytes={given:g} and inflection_profile={named!r} both set "
                             "InfPT_0; give one (inflection_profile=none keeps a given number)")
        return given, ""
    profile = known_profile() if keyword == AUTO else None if keyword == NONE else named
    if profile is None or spec is None:
        return PAPER_INFLECTION_BYTES, ""
    low = float(params.get("inflection_min_bytes", LOW_BYTES))
    high = float(params.get("inflection_max_bytes", HIGH_BYTES))
    return profile_crossover(profile, spec, low=low, high=high), profile
