"""The ``format("pacer")`` front end's transport: the JVM sources' calls over Py4J, handed to the driver as they are.

The JVM source (:mod:`pacer_spark.jvm.decider`) sends each ``latestOffset`` ask and each stop event as JSON; the
bridge parses them into plain values (:class:`~pacer_spark.jvm.decider.DecisionRequest`,
:class:`~pacer_spark.jvm.decider.StopEvent`), and this hands them to :meth:`pacer_spark.driver.loop.Driver.step`,
the protocol's one way in (:mod:`pacer_spark.driver.protocol.paced` decides). Nothing of the protocol lives here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pacer_spark.jvm.decider import Decision, DecisionRequest, PacerBridge, StopEvent

if TYPE_CHECKING:
    from pacer_spark.driver.loop import Driver


class PacedService:
    """Connects the session's JVM sources to its driver (module docstring).

    :param driver: the session's driver; ``spark``: the attached SparkSession; ``timeout_s``: seconds the JVM source
        waits for an answer before it admits on its own.
    """

    def __init__(self, driver: Driver, spark: Any, timeout_s: float) -> None:
        self.driver = driver
        self.spark = spark
        self.timeout_s = timeout_s
        self.bridge: PacerBridge | None = None

    def connect(self) -> None:
        """Build and load the JVM source if needed and decide every query (``"*"``) of the session from now on."""
        self.bridge = PacerBridge(self.spark, timeout_s=self.timeout_s)
        self.bridge.register_handler("*", self.decide, self.stopped)

    def decide(self, request: DecisionRequest) -> Decision:
        """A source's ``latestOffset``: the driver's answer."""
        decision: Decision = self.driver.step(request)
        return decision

    def stopped(self, event: StopEvent) -> None:
        """A source run stopped."""
        self.driver.step(event)

    def close(self) -> None:
        """Unregister from the JVM: a ``format("pacer")`` query still running then admits everything."""
        if self.bridge is not None:
            self.bridge.close()


__all__ = ["PacedService"]
