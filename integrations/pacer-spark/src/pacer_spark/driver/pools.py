"""FAIR scheduler pools: a ladder of fixed weights declared at session start (:mod:`pacer_spark.session` declares it).

Spark's pool weights cannot change at run time, so share-based schedulers (FAIR, RDAS) move each
batch into the pool whose weight is nearest its share of the cores.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import quoteattr

#: Pool weights; a batch with the whole cluster goes to the heaviest.
DEFAULT_LADDER: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 12, 16)
POOL_PREFIX = "pacer-w"


def pool_name(weight: int) -> str:
    """The pool of one weight of the ladder."""
    return f"{POOL_PREFIX}{weight}"


def pool_for_share(share: float, cores: int, ladder: Sequence[int] = DEFAULT_LADDER) -> str:
    """The ladder pool whose weight is nearest ``share / cores`` of the heaviest weight."""
    target = max(0.0, min(1.0, share / cores if cores else 1.0)) * max(ladder)
    weight = min(ladder, key=lambda w: (abs(w - target), w))
    return pool_name(weight)


def allocation_xml(ladder: Sequence[int] = DEFAULT_LADDER) -> str:
    """A FAIR allocation file declaring one pool per weight of ``ladder`` (FAIR inside each pool)."""
    pools = "\n".join(
        f"  <pool name={quoteattr(pool_name(w))}>\n    <schedulingMode>FAIR</schedulingMode>\n"
        f"    <weight>{w}</weight>\n    <minShare>0</minShare>\n  </pool>"
        for w in ladder
    )
    return f'<?xml version="1.0"?>\n<allocations>\n{pools}\n</allocations>\n'


def write_allocation_file(directory: str | Path | None = None, ladder: Sequence[int] = DEFAULT_LADDER) -> Path:
    """Write :func:`allocation_xml` to ``directory`` (a temporary one by default) and return its path.

    A temporary folder is removed when the Python process exits (Spark reads the file at start-up).
    """
    if directory is None:
        folder = Path(tempfile.mkdtemp(prefix="pacer-pools-"))
        atexit.register(shutil.rmtree, folder, True)
    else:
        folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "pacer-fairscheduler.xml"
    path.write_text(allocation_xml(ladder))
    return path
