"""Calibrate the simulator on this machine: time its operator kernels into a cost profile, and the cost model a
profile gives.

:func:`measure_kernels` times real CPU (and, where one is visible, GPU) kernels of every implementation installed
here (NumPy, numba, pandas; CuPy, numba-cuda, cudf) through :mod:`pacer_sim.kernels` and writes the
``pacer.cost-profile/1`` file that ``pacer sim --cost-profile FILE`` loads; :func:`describe_profile` says per
implementation what was measured and what was skipped and why, and where each of the simulator's curves then comes
from; :func:`cost_model_from_profile` is the simulator's default :class:`~pacer_sim.costs.CostModel` with a
profile's measured curves (:mod:`pacer_sim.cost_profile`). ``pacer calibrate --kernels`` (pacer-lmstream) runs them.
Library code: bad input raises ``ValueError``, never a usage error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pacer_sim import kernels, kernels_cuda_host
from pacer_sim.cost_profile import apply_cost_profile, load_cost_profile, select_curves
from pacer_sim.costs import CostModel


def measure_kernels(sizes: Sequence[int] | None, out: str | Path, *, repeats: int = 5,
                    note: Callable[[str], None] | None = None, implementations: Sequence[str] | None = None,
                    curves: Mapping[str, str] | None = None) -> Path:
    """Time the operator kernels of every implementation asked for (default: all, those missing here skipped with
    their reason); write the ``pacer.cost-profile/1`` file ``pacer sim --cost-profile`` loads. Without a GPU only
    the CPU is timed (the profile records why each GPU implementation was skipped) and ``note`` is told so before
    anything is timed.

    :param sizes: batch sizes in bytes (None or empty: :data:`pacer_sim.kernels.DEFAULT_SIZES`, 64 KB-64 MB).
    :param note: receives one sentence for the reader when there is no GPU (e.g. printed on stderr).
    :param implementations: names from :data:`pacer_sim.kernels.IMPLEMENTATIONS` (None: all).
    :param curves: device -> the implementation whose points become the simulator's curve (default: NumPy's on the
        CPU, CuPy's on the GPU, else the next measured).
    :raises ValueError: for fewer than two sizes, a size below one row, ``repeats < 1``, an unknown implementation
        or a curve of an implementation not measured.
    :return: the file written.
    """
    cupy, why = kernels.gpu_backend()
    if cupy is None and kernels_cuda_host.gpu_reason() is not None and note is not None:
        note(f"no GPU here ({why}): timing the CPU kernels only; the GPU part is skipped and the simulator keeps "
             "its modelled GPU curves")
    profile = kernels.measure_profile(list(sizes) if sizes else kernels.DEFAULT_SIZES, devices=("cpu", "gpu"),
                                      repeats=repeats, implementations=implementations, curves=curves)
    return kernels.write_profile(profile, out)


def describe_profile(path: str | Path, *, curves: Mapping[str, str] | None = None) -> str:
    """What a profile measured per implementation (or skipped, and why), its times over NumPy's, and where each
    curve of the cost model it gives comes from (measured: which implementation on which machine; or modelled).

    :param curves: as :func:`cost_model_from_profile`.
    :raises ValueError: for a missing or malformed profile, or a curve it did not measure.
    """
    profile = load_cost_profile(path)
    model = cost_model_from_profile(path, curves=curves)
    lines = [*kernels.format_status(profile), "", kernels.format_table(profile), "", "the simulator's curves:"]
    lines += [f"  {kind}.{device}: {model.citation(kind, device)}" for kind in sorted(profile["kinds"])
              for device in ("cpu", "gpu")]
    others = sorted(set(model.operators) - set(profile["kinds"]))
    if others:
        lines.append(f"  {', '.join(others)} (cpu, gpu): {model.citation(others[0], 'cpu')}")
    lines.append(f"  pcie: {model.citation('pcie')}")
    return "\n".join(lines)


def cost_model_from_profile(path: str | Path, *, curves: Mapping[str, str] | None = None) -> CostModel:
    """The simulator's default cost model with the measured curves of a ``pacer.cost-profile/1`` file (its
    ``source`` names the file; ``citations`` the implementation and machine of each curve).

    :param curves: device -> another measured implementation whose points to use (``{"cpu": "numba"}``).
    :raises ValueError: for a missing or malformed profile (the message names it), or a curve it did not measure.
    """
    profile = load_cost_profile(path)
    if curves:
        profile = select_curves(profile, dict(curves))
    return apply_cost_profile(CostModel(), profile, name=Path(path).name)

