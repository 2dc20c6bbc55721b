"""The calibration rows Eq. 10 starts from: LMStream's "pre-experimental results".

The paper initialises the inflection point "with the values derived from the experiments that
are dependent on resource configurations or workload types" and refits Eq. 10 on the history of
(throughput, latency) -> inflection point. pacer trains Eq. 10 on the InfPT each batch was placed
with, so without rows from other inflection points every label is InfPT_0 and the fit returns it.
``pacer calibrate`` runs a short sweep of inflection points and writes those rows; the strategy
parameter ``initial_rows=<file>`` loads them here.

File format (JSON, ``schema`` = :data:`SCHEMA`)::

    {"schema": "pacer.lmstream.calibration/1",
     "workload": "lr1", "rate_rows_per_s": 2560.0, "runtime": "sim", ...,
     "rows": [{"inflection_bytes": 37500.0, "throughput_bytes_per_s": 143000.0, "latency_s": 21.4}, ...]}

Only ``schema`` and ``rows`` are required; the other keys describe where the rows come from.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pacer_lmstream.regression import Sample

#: The ``schema`` value of a calibration file.
SCHEMA = "pacer.lmstream.calibration/1"

#: The keys of one row.
ROW_KEYS = ("inflection_bytes", "throughput_bytes_per_s", "latency_s")


class CalibrationError(ValueError):
    """A calibration file that is missing or malformed; the message names the file and the problem."""


def _number(path: Path, index: int, row: Mapping[str, Any], key: str) -> float:
    if key not in row:
        raise CalibrationError(f"{path}: row {index} has no {key!r}; every row needs {', '.join(ROW_KEYS)}")
    value = row[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise CalibrationError(f"{path}: row {index} {key!r} must be a finite number, got {value!r}")
    return float(value)


def load_rows(path: str | Path) -> list[Sample]:
    """Read and validate a calibration file; its rows as Eq. 10 training samples, in file order.

    :raises CalibrationError: for a missing or unreadable file, invalid JSON, another schema, fewer
        than 3 rows (Eq. 10 has 3 coefficients), or a row with a missing, non-finite or non-positive value.
    """
    file = Path(path)
    hint = "write one with `pacer calibrate --runtime sim --workload W --rate R --out FILE`"
    if not file.is_file():
        raise CalibrationError(f"lmstream initial_rows: {file} does not exist or is not a file; {hint}")
    try:
        doc = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise CalibrationError(f"lmstream initial_rows: cannot read {file}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise CalibrationError(f"lmstream initial_rows: {file} is not JSON ({exc}); {hint}") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise CalibrationError(f"lmstream initial_rows: {file} is not a calibration file (schema {found!r}, "
                               f"expected {SCHEMA!r}); {hint}")
    rows = doc.get("rows")
    if not isinstance(rows, list) or len(rows) < 3:
        count = len(rows) if isinstance(rows, list) else "no"
        raise CalibrationError(f"lmstream initial_rows: {file} has {count} rows; Eq. 10 needs at least 3 "
                               "(sweep at least 3 inflection points)")
    samples = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise CalibrationError(f"{file}: row {i} must be an object with {', '.join(ROW_KEYS)}, got {row!r}")
        inflection, throughput, latency = (_number(file, i, row, k) for k in ROW_KEYS)
        if inflection <= 0 or throughput <= 0 or latency <= 0:
            raise CalibrationError(f"{file}: row {i} needs inflection_bytes, throughput_bytes_per_s and latency_s "
                                   f"> 0, got {inflection:g}, {throughput:g}, {latency:g}")
        samples.append(Sample(throughput=throughput, latency=latency, inflection=inflection))
    return samples


def write_rows(rows: Iterable[Sample], path: str | Path, **about: Any) -> Path:
    """Write ``rows`` as a calibration file (``about``: workload, rate, runtime, ... for the reader).

    :return: the path written (parent folders are created).
    """
    file = Path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"schema": SCHEMA, **about}
    doc["rows"] = [
        {"inflection_bytes": s.inflection, "throughput_bytes_per_s": s.throughput, "latency_s": s.latency} for s in rows
    ]
    file.write_text(json.dumps(doc, indent=2) + "\n")
    return file
