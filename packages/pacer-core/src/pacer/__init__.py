"""pacer: adaptive micro-batching, deadline-aware scheduling and CPU/GPU placement
for micro-batch stream processing (Apache Spark Structured Streaming).

Strategies are pluggy plugins; see :mod:`pacer.hookspecs` for the hooks and
:class:`pacer.Controller` for the runtime-agnostic engine that calls them.
"""

from pacer.controller import Controller, StrategyError
from pacer.hookspecs import hookimpl, hookspec
from pacer.ledger import ExactlyOnceLedger, LedgerViolation
from pacer.model import (
    CPU_ONLY_KINDS,
    DECISION_KINDS,
    OPERATOR_KINDS,
    AdmissionDecision,
    BatchReport,
    Dataset,
    DatasetBuffer,
    Device,
    Devices,
    MicroBatch,
    Operator,
    OperatorDAG,
    OperatorMetric,
    PendingBatch,
    Placement,
    QueryHistory,
    QuerySpec,
    ScheduleDecision,
    SystemView,
)
from pacer.plugins import PluginManager, UnknownRuntimeError, UnknownStrategyError, get_plugin_manager
from pacer.queueing import QueueWait, queue_wait
from pacer.recorder import RunRecorder
from pacer.run import QueryRun, RunConfig, arrival_dataset
from pacer.runtime_api import RunResult, Runtime
from pacer.scaling import ClusterView, QueryLoad, ScaleDecision
from pacer.strategy import Param, StrategyContext, StrategyInfo
from pacer.summary import StreamingSummary
from pacer.views import BatchView, OverloadStatus, QueryView

__all__ = [
    "CPU_ONLY_KINDS",
    "DECISION_KINDS",
    "OPERATOR_KINDS",
    "AdmissionDecision",
    "BatchReport",
    "BatchView",
    "ClusterView",
    "Controller",
    "Dataset",
    "DatasetBuffer",
    "Device",
    "Devices",
    "ExactlyOnceLedger",
    "LedgerViolation",
    "MicroBatch",
    "Operator",
    "OperatorDAG",
    "OperatorMetric",
    "OverloadStatus",
    "Param",
    "PendingBatch",
    "Placement",
    "PluginManager",
    "QueryHistory",
    "QueryLoad",
    "QueryRun",
    "QuerySpec",
    "QueryView",
    "QueueWait",
    "RunConfig",
    "RunRecorder",
    "RunResult",
    "Runtime",
    "ScaleDecision",
    "ScheduleDecision",
    "StrategyContext",
    "StrategyError",
    "StrategyInfo",
    "StreamingSummary",
    "SystemView",
    "UnknownRuntimeError",
    "UnknownStrategyError",
    "arrival_dataset",
    "get_plugin_manager",
    "hookimpl",
    "hookspec",
    "queue_wait",
]
__version__ = "0.1.0"
