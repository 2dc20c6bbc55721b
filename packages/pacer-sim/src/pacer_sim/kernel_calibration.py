"""Calibrate the simulator on this machine: time its operator kernels into a cost profile, and the cost model a
profile gives.

:func:`measure_kernels` times real CPU (and, where one is visible, GPU) kernels through :mod:`pacer_sim.kernels`
and writes the ``pacer.cost-profile/1`` file that ``pacer sim --cost-profile FILE`` loads;
:func:`cost_model_from_profile` is the simulator's default :class:`~pacer_sim.costs.CostModel` with a profile's
measured curves (:mod:`pacer_sim.cost_profile`). ``pacer calibrate --kernels`` (pacer-lmstream) runs both.
Library code: bad input raises ``ValueError``, never a usage error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from pacer_sim import kernels
from pacer_sim.cost_profile import apply_cost_profile, load_cost_profile
from pacer_sim.costs import CostModel


def measure_kernels(sizes: Sequence[int] | None, out: str | Path, *, repeats: int = 5,
                    note: Callable[[str], None] | None = None) -> Path:
    """Time CPU (and GPU, where one is visible) operator kernels; write the ``pacer.cost-profile/1`` file
    ``pacer sim --cost-profile`` loads. Without a GPU only the CPU is timed (the profile records why the GPU
    was skipped) and ``note`` is told so before anything is timed.

    :param sizes: batch sizes in bytes (None or empty: :data:`pacer_sim.kernels.DEFAULT_SIZES`, 64 KB-64 MB).
    :param note: receives one sentence for the reader when there is no GPU (e.g. printed on stderr).
    :raises ValueError: for fewer than two sizes, a size below one row, or ``repeats < 1``.
    :return: the file written.
    """
    backend, why = kernels.gpu_backend()
    if backend is None and note is not None:  # measure_profile skips the GPU too and records why in "skipped"
        note(f"no GPU here ({why}): timing the CPU kernels only; the GPU part is skipped and the simulator keeps "
             "its modelled GPU curves")
    profile = kernels.measure_profile(list(sizes) if sizes else kernels.DEFAULT_SIZES, devices=("cpu", "gpu"),
                                      repeats=repeats)
    return kernels.write_profile(profile, out)


def cost_model_from_profile(path: str | Path) -> CostModel:
    """The simulator's default cost model with the measured curves of a ``pacer.cost-profile/1`` file
    (its ``source`` names the file).

    :raises ValueError: for a missing or malformed profile (the message names it).
    """
    return apply_cost_profile(CostModel(), load_cost_profile(path), name=Path(path).name)
