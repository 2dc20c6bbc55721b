"""The driver every front end decides through.

``loop`` (the ``Driver``: the Controller and one admission loop for every front end), ``books`` (all a front end
may read and change of the Controller, open only while the lock is held), ``locking`` (the session's one lock,
written in the types), ``gate`` and ``pools`` (where an admitted batch waits for its turn, and which FAIR pool
runs it), ``replay`` (admitting exactly what Spark replays), ``completion`` (a batch completes when its trigger ends, with
Spark's engine time), ``clock`` (the Controller's clock, pinned to a trigger's end meanwhile), ``listener`` (Spark's
listener: progress and ends handed to the driver), ``batch_costs`` (what each batch's tasks cost, by Spark's batch
id), ``scaling`` (the executors' scaling on its own clock, enacted through the cluster manager), ``cluster_calls``
(the cluster manager's calls, made off the driver's lock and answered as events), ``advice`` (observe
mode's live advice, replayed on the simulator off the driver's thread); the subpackage ``protocol``
(the sources' protocol: one room, entered only through ``Driver.step``). Imports ``plan``, ``jvm`` and the shared
top-level modules.
"""

__all__ = [
    "advice",
    "batch_costs",
    "books",
    "clock",
    "cluster_calls",
    "completion",
    "gate",
    "listener",
    "locking",
    "loop",
    "pools",
    "replay",
    "scaling",
]
