"""Linear Road and Cluster Monitoring streams, the papers' queries, and traffic patterns."""

from pacer_workloads.generators import STREAMS, bytes_per_row, generate, generate_arrow, spark_schema_ddl
from pacer_workloads.queries import WORKLOADS, WorkloadSpec, make_query
from pacer_workloads.trace import TraceError, read_trace
from pacer_workloads.traffic import TRAFFIC_PATTERNS, Arrival, TrafficPattern, make_traffic, schedule_arrivals

__all__ = [
    "STREAMS",
    "TRAFFIC_PATTERNS",
    "WORKLOADS",
    "Arrival",
    "TraceError",
    "TrafficPattern",
    "WorkloadSpec",
    "bytes_per_row",
    "generate",
    "generate_arrow",
    "make_query",
    "make_traffic",
    "read_trace",
    "schedule_arrivals",
    "spark_schema_ddl",
]
