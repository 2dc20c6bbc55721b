"""One ``format("pacer")`` batch traced through pacer-spark's rooms, with a scripted source and no Spark.

The JVM's request enters as the JSON it sends (wire version 5) through the callback object the JVM calls; every
Python call made while the driver answers it is recorded, and the rooms it passes through, in the order each is first
entered, are the ones pacer-spark's README walks a batch through (*One batch of a ``format("pacer")`` query*).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

from pacer_spark.jvm.decider import WIRE_VERSION, DecisionRequest, _JvmDecider
from pacer_spark.paced.service import PacedService


def _protocol_model() -> ModuleType:
    """``test_paced_protocol.py``: its model of the JVM source and its driver without Spark (the tests run with
    ``--import-mode=importlib``, so a test module is loaded by its path)."""
    spec = importlib.util.spec_from_file_location("_paced_protocol_model", Path(__file__).with_name(
        "test_paced_protocol.py"))
    assert spec is not None and spec.loader is not None
    module = sys.modules.get(spec.name)
    if module is None:
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up there
        spec.loader.exec_module(module)
    return module


def wire(request: DecisionRequest) -> str:
    """``request`` as the JVM writes it."""
    raw = dataclasses.asdict(request)
    raw["version"] = WIRE_VERSION
    raw["progress"] = list(request.progress)
    return json.dumps(raw)


def rooms_entered(call: Callable[[], Any]) -> tuple[list[str], list[str]]:
    """The pacer-spark rooms (``jvm``, ``paced``, ``driver``... or ``pacer-core``) and the pacer-spark modules that
    ``call`` enters, each in the order it is first entered."""
    rooms: list[str] = []
    modules: list[str] = []

    def profile(frame: FrameType, event: str, _: Any) -> None:
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        parts = module.split(".")
        room = ("pacer-core" if parts[0] == "pacer" else
                (parts[1] if len(parts) > 2 else "surface") if parts[0] == "pacer_spark" else None)
        if room is not None and room not in rooms:
            rooms.append(room)
        if parts[0] == "pacer_spark" and module not in modules:
            modules.append(module)

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return rooms, modules


def test_one_batch_passes_the_rooms_in_the_order_the_readme_walks() -> None:
    model = _protocol_model()
    ModelSource, _progress = model.ModelSource, model._progress
    paced, controller = model._paced([1, 1, 1])
    service = PacedService(paced.driver, None, timeout_s=5.0)  # the Py4J transport, without the JVM
    decider = _JvmDecider(service.decide, service.stopped)
    source = ModelSource("run-a", "q", "spark-1", {"pacer.deadline": "30s"})
    source.observe(frozenset({0}))
    first = json.loads(decider.decide("q", wire(source.request(0))))
    assert first["seq"] == 0  # batch 0 decided: Spark runs it
    source.pending.clear()
    source.unsent = [_progress("spark-1", 0, [10])]  # its trigger ended; the next ask reports it
    source.observe(frozenset({1}))

    answer: dict[str, Any] = {}
    rooms, modules = rooms_entered(lambda: answer.update(json.loads(decider.decide("q", wire(source.request(1))))))

    assert answer["seq"] == 1  # the next batch decided
    assert controller.ledger.counts["q"]["processed"] == 1  # the previous one completed on the way
    # the README: the JVM's request parsed (jvm/decider), the transport (paced/service) hands it to Driver.step
    # (driver/loop), the protocol room's PacedQueries (driver/protocol/paced) steps the ask through Driver.decide;
    # under the lock the previous batch completes (driver/completion) and the Controller (pacer-core) admits and
    # places the next; the batch passes the gate (driver/gate) outside the lock
    assert rooms[:4] == ["jvm", "paced", "driver", "pacer-core"], rooms
    walk = [m for m in modules if m in ("pacer_spark.jvm.decider", "pacer_spark.paced.service",
                                        "pacer_spark.driver.protocol.paced", "pacer_spark.driver.loop",
                                        "pacer_spark.driver.completion", "pacer_spark.driver.gate")]
    assert walk == ["pacer_spark.jvm.decider", "pacer_spark.paced.service", "pacer_spark.driver.loop",
                    "pacer_spark.driver.protocol.paced", "pacer_spark.driver.completion",
                    "pacer_spark.driver.gate"], modules
