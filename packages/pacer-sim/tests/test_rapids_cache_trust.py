"""The RAPIDS tools jar is loaded from pacer's Maven cache only when no other user could have written it."""

from __future__ import annotations

import re
import stat
import subprocess
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pacer.infra import jars
from pacer_sim import rapids
from pacer_sim.rapids import TOOLS_ARTIFACT, TOOLS_GROUP, load_gpu_profile, tools_jar_from_wheel

VERSION = "0.0.1"
PROFILE_CSV = "CPUOperator,Score\nFilterExec,5.0\n"
EXECS_CSV = "Exec,Supported,Notes\nFilterExec,S,None\n"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(jars.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", "/nonexistent")  # no mvn
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # and no PyPI
    return tmp_path / "cache"



def _tools_jar(path: Path) -> Path:
    """A tools jar in the cache as pacer leaves it (folders 0o755, the file 0o644)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("operatorsScore-test-x1.csv", PROFILE_CSV)
        zf.writestr("supportedExecs.csv", EXECS_CSV)
    path.chmod(0o644)
    return path


@pytest.mark.parametrize("where", ["maven", "pypi"])
def test_a_cached_tools_jar_others_can_write_is_refused_not_replaced(cache: Path, where: str) -> None:
    """Refused with what to do, and no download beside it (the PyPI fallback would hide the refusal)."""
    jar = (
        jars.jar_path(TOOLS_GROUP, TOOLS_ARTIFACT, VERSION)
        if where == "maven"
        else cache / "pypi" / f"{TOOLS_ARTIFACT}-{VERSION}.jar"
    )
    _tools_jar(jar)
    assert load_gpu_profile("test-x1", version=VERSION).speedup("filter") == 5.0
    jar.chmod(0o666)
    with pytest.raises(jars.UntrustedCacheError, match=re.escape(f"{jar} is writable by group or others")) as refused:
        load_gpu_profile("test-x1", version=VERSION)
    assert "PyPI" not in str(refused.value) and jars.CACHE_ENV in str(refused.value)


def test_a_tools_jar_link_in_the_pypi_cache_is_refused(cache: Path, tmp_path: Path) -> None:
    elsewhere = _tools_jar(tmp_path / "elsewhere.jar")
    (cache / "pypi").mkdir(parents=True)
    for folder in (cache, cache / "pypi"):
        folder.chmod(0o755)
    link = cache / "pypi" / f"{TOOLS_ARTIFACT}-{VERSION}.jar"
    link.symlink_to(elsewhere)
    with pytest.raises(jars.UntrustedCacheError, match=re.escape(f"{link} is a symbolic link")):
        tools_jar_from_wheel(VERSION)


def test_the_jar_taken_from_the_wheel_under_umask_002_is_trusted(
    cache: Path, tmp_path: Path, umask_002: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def pip_download(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        into = Path(cmd[cmd.index("-d") + 1])
        with zipfile.ZipFile(into / "spark_rapids_user_tools-0.0-py3-none-any.whl", "w") as wheel:
            inner = tmp_path / "inner.jar"
            with zipfile.ZipFile(inner, "w") as zf:
                zf.writestr("operatorsScore-test-x1.csv", PROFILE_CSV)
                zf.writestr("supportedExecs.csv", EXECS_CSV)
            wheel.write(inner, f"spark_rapids_pytools/resources/{TOOLS_ARTIFACT}-{VERSION}.jar")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(
        rapids, "subprocess", SimpleNamespace(run=pip_download, TimeoutExpired=subprocess.TimeoutExpired)
    )
    jar = tools_jar_from_wheel(VERSION)
    assert jar == cache / "pypi" / f"{TOOLS_ARTIFACT}-{VERSION}.jar"
    assert [stat.S_IMODE(p.stat().st_mode) for p in (cache, jar.parent, jar)] == [0o755, 0o755, 0o644]
    assert load_gpu_profile("test-x1", version=VERSION).speedup("filter") == 5.0  # the cached one, trusted
