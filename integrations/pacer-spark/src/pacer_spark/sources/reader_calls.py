"""The readers' RPC messages, translated: a ``pacer-gen``/``pacer-files`` reader's request dict in, a plain report to
the driver (:meth:`pacer_spark.driver.loop.Driver.step`), its answer back as the reply dict.

``{"op": "latest", "query", "start", "new", "rtt", "until", "available"}`` is a
:class:`~pacer_spark.driver.protocol.readers.ReaderAsk`, answered ``{"end": offset, "shed": [offsets]}``;
``{"op": "manifest", "query"}`` a :class:`~pacer_spark.driver.protocol.readers.ManifestAsk`, answered
``{"manifest": path}``. The protocol itself lives in :mod:`pacer_spark.driver.protocol.readers`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pacer_spark.driver.protocol.readers import ManifestAnswer, ManifestAsk, ReaderAnswer, ReaderAsk

if TYPE_CHECKING:
    from pacer_spark.driver.loop import Driver


def report_of(request: Mapping[str, Any]) -> ReaderAsk | ManifestAsk:
    """The report a reader's request dict carries.

    :raises ValueError: for an unknown ``op``; ``KeyError``: for a missing field.
    """
    op = request.get("op")
    if op == "manifest":
        return ManifestAsk(str(request["query"]))
    if op != "latest":
        raise ValueError(f"unknown request {op!r}")
    until, available, rtt = request.get("until"), request.get("available"), request.get("rtt")
    return ReaderAsk(str(request["query"]), int(request["start"]), tuple(request.get("new") or ()),
                     None if rtt is None else float(rtt), None if until is None else int(until),
                     None if available is None else int(available))


def reply_of(answer: ReaderAnswer | ManifestAnswer) -> dict[str, Any]:
    """The reply dict of the driver's answer."""
    if isinstance(answer, ManifestAnswer):
        return {"manifest": answer.path}
    return {"end": answer.end, "shed": list(answer.shed)}


def reader_handler(driver: Driver) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The RPC server's handler: each request through :meth:`Driver.step`."""
    def handle(request: dict[str, Any]) -> dict[str, Any]:
        return reply_of(driver.step(report_of(request)))

    return handle


__all__ = ["reader_handler", "reply_of", "report_of"]
