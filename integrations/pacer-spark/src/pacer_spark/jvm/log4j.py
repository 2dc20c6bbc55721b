"""log4j through the JVM: an appender that copies one logger's messages, with their thread's name, to a file
(RAPIDS' explain output), and its removal."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("pacer_spark.jvm.log4j")


def add_log_file_appender(spark: Any, logger_name: str, path: str, pattern: str, name: str, *,
                          level: str = "WARN", additive: bool = False) -> None:
    """Copy the messages of log4j logger ``logger_name`` (and its children) at ``level`` or above to the file
    ``path``, formatted by the log4j ``pattern``, through an appender called ``name``.

    The logger's level is set to ``level`` whatever the root's (``setLogLevel("ERROR")`` does not silence it);
    ``additive=False`` keeps its messages out of Spark's console log.
    """
    jvm = spark.sparkContext._jvm
    log4j = jvm.org.apache.logging.log4j
    layout = log4j.core.layout.PatternLayout.newBuilder().withPattern(pattern).build()
    appender = (log4j.core.appender.FileAppender.newBuilder().setName(name).withFileName(path)
                .withImmediateFlush(True).setLayout(layout).build())
    appender.start()
    # a LoggerConfig of its own first: its level holds whatever the root's (Spark's setLogLevel sets the root's)
    log4j.core.config.Configurator.setLevel(logger_name, log4j.Level.toLevel(level))
    logger = log4j.LogManager.getLogger(logger_name)
    logger.addAppender(appender)
    logger.setAdditive(additive)


def remove_log_appender(spark: Any, logger_name: str, name: str) -> None:
    """Detach and stop the appender ``name`` of logger ``logger_name`` (:func:`add_log_file_appender`); the logger
    logs to Spark's console again. Nothing happens when it is not attached or the JVM is gone."""
    try:
        logger = spark.sparkContext._jvm.org.apache.logging.log4j.LogManager.getLogger(logger_name)
        appender = logger.getAppenders().get(name)
        if appender is not None:
            logger.removeAppender(appender)
            appender.stop()
        logger.setAdditive(True)
    except Exception:  # the session stopped: its JVM took the appender with it
        log.debug("cannot remove log appender %s", name, exc_info=True)


__all__ = ["add_log_file_appender", "remove_log_appender"]
