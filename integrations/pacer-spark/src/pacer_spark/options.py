"""Source options shared by the driver and the reader process (parsed the same way on both sides).

Durations (``pacer.deadline``, ``pacer.arrival.maxAge``, the ``spark.pacer.*`` duration confs) are read by core's one
duration parser, :func:`pacer.durations.parse_seconds`, importable from here as before.
"""

from __future__ import annotations

from pacer.durations import parse_seconds as parse_seconds  # re-exported: pacer_spark reads durations with it

#: Options every pacer source understands (set by :meth:`pacer_spark.PacerSession.read_stream`).
OPT_QUERY = "pacer.query"
OPT_ADDRESS = "pacer.address"
#: The authkey as hex: only for a client wired by hand (Spark shows options in plans, logs and its UI).
OPT_AUTHKEY = "pacer.authkey"
#: The path of the driver's private authkey file (:attr:`pacer_spark.sources.rpc.ControllerServer.authkey_file`).
OPT_AUTHKEY_FILE = "pacer.authkey.file"
OPT_TIMEOUT = "pacer.timeout"
#: Every wiring option a pacer source accepts besides its own.
WIRING_OPTIONS = frozenset({OPT_QUERY, OPT_ADDRESS, OPT_AUTHKEY, OPT_AUTHKEY_FILE, OPT_TIMEOUT})


def parse_address(value: str) -> tuple[str, int]:
    """``"127.0.0.1:4567"`` -> ``("127.0.0.1", 4567)``."""
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"option {OPT_ADDRESS} must look like HOST:PORT, got {value!r}")
    return host, int(port)
