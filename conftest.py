"""Repository-wide pytest hooks: the default run (CI's ``python -m pytest``) and the full suite.

A test marked ``full`` is a longer variant of behaviour that the default run already proves with another test
(another source format, the other signal, another strategy of the same kind). The default run skips it, saying
why and how to run it; ``PACER_FULL_SUITE=1`` runs it, as the Spark sessions of nox do (``nox -s spark``,
``nox -s cluster``). The default run has to fit CI's 45 minutes on 2 cores.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

#: The environment variable that asks for the full suite.
FULL_SUITE_ENV = "PACER_FULL_SUITE"

# The short-lived Spark driver JVMs the tests start (every ``pacer run`` child process, the apps the tests launch)
# compile with C1 only, as the Kafka broker and the standalone cluster's daemons do: on 2 shared cores C2's compiler
# threads compete with the short runs (a 4 s ``pacer run`` on Spark: 52 s -> 45 s end to end, its batches 2.5 s ->
# 2.0 s on average). pacer-spark's long-lived suite session keeps C2 (its conftest.py). A PYSPARK_SUBMIT_ARGS set by
# the caller is kept.
os.environ.setdefault("PYSPARK_SUBMIT_ARGS", "--conf spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 pyspark-shell")


def full_suite() -> bool:
    """True when ``PACER_FULL_SUITE`` asks for every test, those marked ``full`` included."""
    return os.environ.get(FULL_SUITE_ENV, "") not in ("", "0")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the tests marked ``full`` outside the full suite, naming what covers them in the default run."""
    if full_suite():
        return
    for item in items:
        marker = item.get_closest_marker("full")
        if marker is not None:
            covered_by = marker.kwargs.get("reason") or (marker.args[0] if marker.args else "")
            item.add_marker(pytest.mark.skip(reason=f"full suite only ({covered_by}); {FULL_SUITE_ENV}=1 or "
                                             "nox -s spark runs it"))


@pytest.fixture
def umask_002() -> Iterator[None]:
    """The umask of a shared-group setup (what is created is group-writable unless the code says otherwise)."""
    old = os.umask(0o002)
    try:
        yield
    finally:
        os.umask(old)
