"""The driver every front end decides through.

``loop`` (the ``Driver``: the Controller and one admission loop for every front end), ``locking`` (the session's one
lock, written in the types), ``gate`` and ``pools`` (where an admitted batch waits for its turn, and which FAIR pool
runs it), ``replay`` (admitting exactly what Spark replays), ``telemetry`` (the listener's events: batch completion,
engine time). Imports ``plan``, ``jvm`` and the shared top-level modules.
"""

__all__ = [
    "gate",
    "locking",
    "loop",
    "pools",
    "replay",
    "telemetry",
]
