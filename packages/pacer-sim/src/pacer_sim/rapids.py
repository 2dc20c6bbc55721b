"""GPU speed-ups and GPU support per operator from NVIDIA's RAPIDS qualification tool, read at run time.

NVIDIA's qualification tool (``com.nvidia:rapids-4-spark-tools_2.12`` on Maven Central,
Apache-2.0) ships, inside its jar:

- ``operatorsScore-<platform>-<gpu>.csv`` (``CPUOperator,Score``): the speed-up NVIDIA measured
  for each Spark exec on that platform and GPU (on-prem A100's: the README);
- ``supportedExecs.csv`` (``Exec,Supported,...``): which execs the RAPIDS Accelerator runs on the
  GPU. Neither a streaming state store exec nor Spark's stream-stream join is listed.

pacer never copies these files: :func:`load_gpu_profile` resolves the jar with
:func:`pacer.infra.jars.resolve` (``mvn`` into ``~/.cache/pacer/maven`` once) or, where the Maven
repository does not carry it, takes it out of NVIDIA's ``spark-rapids-user-tools`` wheel
(``pip download --no-deps``, never installed: it pins ``pyspark<4``) into the same cache, and
reads both CSVs from it; :func:`rapids_cost_model` turns them into the simulator's GPU curves: per operator
kind, ``gpu_per_mb = cpu_per_mb / score`` of the exec that kind stands for
(:data:`KIND_EXECS`), and every operator whose exec has no GPU implementation runs on the CPU.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pacer.infra import jars
from pacer_sim.costs import CostModel, OperatorCost

TOOLS_GROUP = "com.nvidia"
TOOLS_ARTIFACT = "rapids-4-spark-tools_2.12"
#: The release pinned (the jar inside spark-rapids-user-tools 26.8.4, 2026-10); ``$PACER_RAPIDS_TOOLS_VERSION`` overrides.
TOOLS_VERSION = "26.08.4"
#: The PyPI distribution that carries the same jar (the fallback where Maven lacks it).
TOOLS_WHEEL = "spark-rapids-user-tools"
VERSION_ENV = "PACER_RAPIDS_TOOLS_VERSION"
DEFAULT_GPU_PROFILE = "onprem-a100"
#: ``--gpu-profile`` value that keeps the built-in curves without looking for the jar.
BUILTIN_PROFILE = "builtin"

#: The Spark exec whose score stands for each operator kind's GPU speed-up.
KIND_EXECS: Mapping[str, str] = {
    "scan": "BatchScanExec",
    "filter": "FilterExec",
    "project": "ProjectExec",
    "expand": "ExpandExec",
    "aggregate": "HashAggregateExec",
    "join": "SortMergeJoinExec",
    "sort": "SortExec",
    "shuffle": "ShuffleExchangeExec",
    "state": "StateStoreSaveExec",
    "sink": "WriteToDataSourceV2Exec",
}

#: Operator names of pacer's DAGs whose Spark exec is not ``name + "Exec"``.
_EXEC_OF_NAME = {"Exchange": "ShuffleExchangeExec", "ForeachBatchSink": "WriteToDataSourceV2Exec"}
_PROFILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_SCORE_FILE = re.compile(r"(?:^|/)operatorsScore-([A-Za-z0-9_-]+)\.csv$")


def exec_name(operator_name: str) -> str:
    """The Spark exec an operator of pacer's DAGs is planned as (``HashAggregate`` -> ``HashAggregateExec``)."""
    return _EXEC_OF_NAME.get(operator_name, operator_name if operator_name.endswith("Exec") else operator_name + "Exec")


@dataclass(frozen=True)
class GpuProfile:
    """NVIDIA's per-exec GPU speed-ups for one platform and GPU, and the execs the GPU runs.

    :param name: the profile, ``<platform>-<gpu>`` (``onprem-a100``).
    :param source: where it was read from (jar coordinates and file).
    :param scores: exec -> GPU speed-up (``operatorsScore-<name>.csv``).
    :param supported: execs the RAPIDS Accelerator runs on the GPU (``supportedExecs.csv``, ``S`` or ``PS``).
    """

    name: str
    source: str
    scores: Mapping[str, float]
    supported: frozenset[str]

    def gpu_capable(self, operator_name: str) -> bool:
        """True when the operator's exec has a GPU implementation."""
        return exec_name(operator_name) in self.supported

    def speedup(self, kind: str) -> float | None:
        """The GPU speed-up of an operator kind (None: its exec has no score or no GPU implementation)."""
        execution = KIND_EXECS.get(kind)
        if execution is None or execution not in self.supported:
            return None
        return self.scores.get(execution)


def profiles_in(jar: Path) -> list[str]:
    """The profiles a tools jar holds (``operatorsScore-<profile>.csv``), sorted."""
    with zipfile.ZipFile(jar) as zf:
        return sorted({m.group(1) for n in zf.namelist() if (m := _SCORE_FILE.search(n))})


def read_tools_jar(jar: Path, profile: str, *, source: str | None = None) -> GpuProfile:
    """Read ``operatorsScore-<profile>.csv`` and ``supportedExecs.csv`` from a tools jar.

    :raises ValueError: the jar has no such profile (the message lists those it has) or no supportedExecs.csv.
    """
    with zipfile.ZipFile(jar) as zf:
        names = zf.namelist()
        score_file = _member(names, f"operatorsScore-{profile}.csv")
        if score_file is None:
            raise ValueError(f"GPU profile {profile!r} is not in {jar.name}; it has {', '.join(profiles_in(jar))}")
        execs_file = _member(names, "supportedExecs.csv")
        if execs_file is None:
            raise ValueError(f"{jar.name} holds no supportedExecs.csv: not a RAPIDS qualification-tool jar")
        scores = _scores(zf.read(score_file).decode("utf-8"))
        supported = _supported(zf.read(execs_file).decode("utf-8"))
    return GpuProfile(profile, source or f"{jar.name}: {score_file}, {execs_file}", scores, supported)


def _member(names: list[str], basename: str) -> str | None:
    matches = sorted(n for n in names if n == basename or n.endswith("/" + basename))
    return min(matches, key=len) if matches else None


def _scores(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for row in csv.DictReader(io.StringIO(text)):
        name, score = (row.get("CPUOperator") or "").strip(), (row.get("Score") or "").strip()
        try:
            value = float(score)
        except ValueError:
            continue
        if name and value > 0:
            out[name] = value
    if not out:
        raise ValueError("operatorsScore file has no CPUOperator,Score rows")
    return out


def _supported(text: str) -> frozenset[str]:
    status: dict[str, str] = {}
    for row in csv.DictReader(io.StringIO(text)):
        name = (row.get("Exec") or "").strip()
        if name and name not in status:
            status[name] = (row.get("Supported") or "").strip()
    return frozenset(name for name, s in status.items() if s in ("S", "PS"))


def tools_version() -> str:
    """The tools-jar version to use: ``$PACER_RAPIDS_TOOLS_VERSION`` or :data:`TOOLS_VERSION`."""
    return os.environ.get(VERSION_ENV, "").strip() or TOOLS_VERSION


def load_gpu_profile(profile: str = DEFAULT_GPU_PROFILE, *, version: str | None = None) -> GpuProfile:
    """Resolve the tools jar (``mvn``, cached) and read ``profile`` from it.

    :raises pacer.infra.jars.JarResolutionError: no ``mvn``, no network, or the repository lacks the jar.
    :raises pacer.infra.jars.UntrustedCacheError: the cached jar (Maven's or the wheel's) is one another user could write:
        refused, not replaced by a download.
    :raises ValueError: a malformed profile name, or one the jar does not hold.
    """
    if not _PROFILE_NAME.match(profile):
        raise ValueError(f"GPU profile {profile!r} looks like <platform>-<gpu>, e.g. {DEFAULT_GPU_PROFILE}")
    version = version or tools_version()
    cached_from_wheel = jars.cache_dir() / "pypi" / f"{TOOLS_ARTIFACT}-{version}.jar"
    try:
        if cached_from_wheel.is_file():
            raise jars.JarResolutionError("taken from the wheel before")
        jar = jars.resolve(TOOLS_GROUP, TOOLS_ARTIFACT, version)
        origin = f"{TOOLS_GROUP}:{TOOLS_ARTIFACT}:{version}"
    except jars.UntrustedCacheError:
        raise  # says what to delete; a download beside it would hide that
    except jars.JarResolutionError as maven_error:
        try:
            jar = tools_jar_from_wheel(version)
        except jars.UntrustedCacheError:
            raise
        except jars.JarResolutionError as wheel_error:
            raise jars.JarResolutionError(f"{maven_error}; and from PyPI: {wheel_error}") from wheel_error
        origin = f"{TOOLS_ARTIFACT}-{version}.jar from the {TOOLS_WHEEL} wheel"
    return read_tools_jar(jar, profile, source=f"{origin} operatorsScore-{profile}.csv + supportedExecs.csv")


def tools_jar_from_wheel(version: str) -> Path:
    """The tools jar taken out of NVIDIA's ``spark-rapids-user-tools`` wheel (downloaded, never installed), cached.

    :raises pacer.infra.jars.JarResolutionError: pip cannot download the wheel, or it holds no such jar.
    :raises pacer.infra.jars.UntrustedCacheError: the cached jar, or a folder on the way, is one another user could write.
    """
    target = jars.cache_dir() / "pypi" / f"{TOOLS_ARTIFACT}-{version}.jar"
    if target.is_file():
        return jars.check_trusted(target)
    wheel_version = ".".join(str(int(part)) for part in version.split("."))  # 26.08.4 -> 26.8.4
    with tempfile.TemporaryDirectory(prefix="pacer-rapids-tools-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", tmp,
               f"{TOOLS_WHEEL}=={wheel_version}"]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise jars.JarResolutionError(f"pip download {TOOLS_WHEEL}=={wheel_version} failed: {exc}") from exc
        wheels = sorted(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            last = (done.stderr.strip().splitlines() or ["no wheel downloaded"])[-1]
            raise jars.JarResolutionError(f"pip download {TOOLS_WHEEL}=={wheel_version} failed: {last}")
        with zipfile.ZipFile(wheels[0]) as wheel:
            members = [n for n in wheel.namelist() if n.endswith(f"/{TOOLS_ARTIFACT}-{version}.jar")]
            if not members:
                raise jars.JarResolutionError(f"{wheels[0].name} holds no {TOOLS_ARTIFACT}-{version}.jar")
            jars.make_trusted_dirs(target.parent)  # not group-writable under umask 002, and checked
            partial = target.with_suffix(".part")
            partial.unlink(missing_ok=True)  # never write through whatever was left there
            partial.write_bytes(wheel.read(members[0]))
            partial.chmod(0o644)  # what check_trusted accepts, whatever the umask
            partial.replace(target)
    return target


def rapids_cost_model(profile: GpuProfile, base: CostModel | None = None) -> CostModel:
    """``base`` (default :class:`CostModel`) with GPU curves from NVIDIA's scores and GPU support.

    Per kind: ``gpu_per_mb = cpu_per_mb / score``; ``gpu_fixed`` (launch cost, not in NVIDIA's data)
    stays ``base``'s; a kind whose exec has no score or no GPU implementation gets its CPU curve on the
    GPU too. The join's superlinear term on the GPU is ``1 / score`` of the CPU's. Operators of
    pacer's DAGs whose exec the GPU does not run become ``cpu_only_operators``.
    """
    base = base or CostModel()
    operators: dict[str, OperatorCost] = {}
    for kind, cost in base.operators.items():
        score = profile.speedup(kind)
        if score is None:
            operators[kind] = dataclasses.replace(cost, gpu_fixed=cost.cpu_fixed, gpu_per_mb=cost.cpu_per_mb)
        else:
            operators[kind] = dataclasses.replace(cost, gpu_per_mb=cost.cpu_per_mb / score)
    join_score = profile.speedup("join")
    cpu_only = frozenset(name for name in _dag_operator_names() if not profile.gpu_capable(name))
    return dataclasses.replace(
        base, operators=operators, gpu_join_factor=1.0 / join_score if join_score else 1.0,
        cpu_only_operators=base.cpu_only_operators | cpu_only,
        source=f"GPU speed-ups from NVIDIA's {profile.source}; CPU curves, GPU launch costs and PCIe: "
               "pacer-sim built-in",
    )


def _dag_operator_names() -> set[str]:
    """Every operator name pacer's workloads use (``MicroBatchScan``, ``StreamingSymmetricHashJoin``...)."""
    from pacer_workloads import WORKLOADS

    return {op.name for w in WORKLOADS.values() for op in w.dag.operators if op.name}
