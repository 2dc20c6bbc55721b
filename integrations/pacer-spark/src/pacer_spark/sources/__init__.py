"""pacer's own Python data sources and their readers: ``gen`` (``pacer-gen``, and what every pacer source
shares), ``files_source`` and ``file_rows`` (``pacer-files``), ``rpc`` (the reader process to driver connection),
``admission``, ``source_state`` and ``sink_gate`` (their driver side: what a reader listed and was admitted, and the
``foreachBatch`` that runs a batch). Imports ``driver``, ``plan``, ``jvm`` and below.
"""

__all__ = [
    "admission",
    "file_rows",
    "files_source",
    "gen",
    "rpc",
    "sink_gate",
    "source_state",
]
