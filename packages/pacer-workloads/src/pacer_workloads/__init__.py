"""Linear Road and Cluster Monitoring streams, the papers' queries, and traffic patterns."""

from pacer_workloads.generators import STREAMS, bytes_per_row, generate, generate_arrow, spark_schema_ddl
from pacer_workloads.queries import WORKLOADS, WorkloadSpec, make_query
from pacer_workloads.traffic import TRAFFIC_PATTERNS, Arrival, TrafficPattern, make_traffic, schedule_arrivals

__all__ = [
    "STREAMS",
    "TRAFFIC_PATTERNS",
    "WORKLOADS",
    "Arrival",
    "TrafficPattern",
    "WorkloadSpec",
    "bytes_per_row",
    "generate",
    "generate_arrow",
    "make_query",
    "make_traffic",
    "schedule_arrivals",
    "spark_schema_ddl",
]
