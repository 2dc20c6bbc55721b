"""Sessions pacer cannot serve are refused by name: a Spark Connect client has no Py4J and no driver JVM here.

The Connect session is PySpark 4's own (``SparkSession.builder.remote("sc://...")``), built in a process of its
own: building one sets ``SPARK_CONNECT_MODE_ENABLED`` in the environment, which would turn every later PySpark call
of this test process into a Connect call. No server is needed: the client connects on its first RPC, and pacer
refuses the session before making any. The client needs PySpark's ``connect`` extra (grpcio, grpcio-status,
googleapis-common-protos, zstandard); without it the test says so and skips.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from typing import Any

import pytest

CONNECT_APP = textwrap.dedent("""
    import os, sys
    from pyspark.sql import SparkSession

    session = SparkSession.builder.remote("sc://127.0.0.1:1").getOrCreate()  # nothing listens there
    import pacer_spark
    from pacer_spark import UnsupportedSessionError
    try:
        pacer_spark.{call}(session)
    except UnsupportedSessionError as exc:
        print("REFUSED", type(session).__module__, exc, flush=True)
        os._exit(0)  # the Connect client's threads would keep the interpreter waiting
    except BaseException as exc:
        print("OTHER", type(exc).__name__, exc, flush=True)
        os._exit(1)
    print("ACCEPTED", flush=True)
    os._exit(1)
""")


def connect_client_missing() -> str | None:
    """Why PySpark's Connect client cannot be built here (None when it can)."""
    def absent(module: str) -> bool:
        try:
            return importlib.util.find_spec(module) is None
        except ModuleNotFoundError:  # its parent package is not installed either
            return True

    missing = [m for m in ("grpc", "grpc_status", "google.rpc", "zstandard") if absent(m)]
    return f"PySpark's Connect client needs {', '.join(missing)} (pip install 'pyspark[connect]')" if missing else None


@pytest.mark.parametrize("call", ["attach", "session_kind.require_classic"])
def test_a_spark_connect_session_is_refused_with_what_works_instead(call: str) -> None:
    reason = connect_client_missing()
    if reason is not None:
        pytest.skip(reason)
    app = CONNECT_APP.replace("pacer_spark.{call}", f"pacer_spark.{call}")
    done = subprocess.run([sys.executable, "-c", app], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr[-3000:]}"
    line = done.stdout.strip().splitlines()[-1]
    assert line.startswith("REFUSED pyspark.sql.connect.session "), line
    assert "Spark Connect session" in line and "classic SparkSession with Py4J" in line, line
    assert "session_builder(MASTER)" in line and "spark-submit" in line, line  # what works instead


def test_a_classic_session_is_accepted_and_anything_else_named(spark: Any) -> None:
    from pacer_spark.session_kind import UnsupportedSessionError, is_connect_session, require_classic

    require_classic(spark)
    assert not is_connect_session(spark)
    with pytest.raises(UnsupportedSessionError, match="classic pyspark.sql.SparkSession, got builtins.dict"):
        require_classic({"spark.master": "local[2]"})
