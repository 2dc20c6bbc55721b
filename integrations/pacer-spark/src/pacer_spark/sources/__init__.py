"""pacer's own Python data sources and their readers: ``gen`` (``pacer-gen``, and what every pacer source
shares), ``files_source`` and ``file_rows`` (``pacer-files``), ``rpc`` (the reader process to driver connection),
``reader_calls`` (the readers' RPC messages translated into the driver's reports) and ``sink_gate`` (the
``foreachBatch`` wrapper). Their driver side is the protocol room (:mod:`pacer_spark.driver.protocol.readers`).
Imports ``driver``, ``plan``, ``jvm`` and below.
"""

__all__ = [
    "file_rows",
    "files_source",
    "gen",
    "reader_calls",
    "rpc",
    "sink_gate",
]
