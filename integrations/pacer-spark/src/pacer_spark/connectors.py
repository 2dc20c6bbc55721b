"""Spark connectors other distributions provide, found by name: pacer-spark never imports them.

A connector brings what a Spark source pacer-spark does not ship needs on pacer's side: the jars of Spark's
connector for the installed PySpark, and the streams its cluster lists (so that a run checks its topics before Spark
starts). A distribution registers one object under the ``pacer_spark.connectors`` entry point group; pacer-kafka
registers ``kafka`` (``session_builder(kafka=True)``, ``pacer run --source kafka``).
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Protocol

#: The entry point group connectors are registered under.
GROUP = "pacer_spark.connectors"


class Connector(Protocol):
    """What pacer-spark asks of a connector."""

    def jars(self) -> list[str]:
        """The connector's jars for the installed PySpark (resolved and cached by the connector)."""
        ...

    def partitions(self, bootstrap_servers: str, timeout_s: float) -> dict[str, int]:
        """Each stream the cluster at ``bootstrap_servers`` serves (a Kafka topic), with its partition count.

        :raises ConnectionError: no server answered within ``timeout_s``; the message says where and what to do.
        """
        ...


def connector(name: str) -> Connector:
    """The connector registered as ``name``.

    :raises ImportError: none is installed under that name; the message says which distribution provides it.
    """
    found = entry_points(group=GROUP, name=name)
    if not found:
        raise ImportError(f"no Spark connector {name!r} is installed (entry point group {GROUP}): it is "
                          f"pacer-{name}, not on PyPI: from the checkout, pip install ./integrations/pacer-{name}")
    loaded: Connector = next(iter(found)).load()
    return loaded
