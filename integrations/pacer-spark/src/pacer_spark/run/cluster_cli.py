"""``pacer cluster up|down|status``: a Spark standalone cluster on 127.0.0.1 (:mod:`pacer_spark.run.cluster`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pacer.cli import Command
from pacer.durations import flag_seconds
from pacer_spark.run.cluster import (
    DEFAULT_DAEMON_HEAP,
    DEFAULT_START_TIMEOUT_S,
    DEFAULT_STOP_TIMEOUT_S,
    DEFAULT_WORKER_MEMORY,
    ClusterError,
    master_state,
    running_cluster,
    start_cluster,
    stop_cluster,
)


def _configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="cluster_action", metavar="ACTION", required=True)
    up = actions.add_parser("up", help="start Spark's standalone Master and Workers on 127.0.0.1 and wait until every "
                            "worker is registered; prints the master URL last")
    up.add_argument("--dir", required=True, help="folder for the daemons' logs, pids and work folders")
    up.add_argument("--workers", type=int, default=2, help="workers to start (default 2)")
    up.add_argument("--cores", type=int, default=1, help="cores each worker offers (default 1)")
    up.add_argument("--memory", default=DEFAULT_WORKER_MEMORY,
                    help=f"memory each worker offers to executors (default {DEFAULT_WORKER_MEMORY})")
    up.add_argument("--heap", default=DEFAULT_DAEMON_HEAP,
                    help=f"each daemon's own -Xmx (default {DEFAULT_DAEMON_HEAP})")
    up.add_argument("--timeout", type=flag_seconds, default=DEFAULT_START_TIMEOUT_S,
                    help=f"how long to wait for every worker to register, e.g. 2m "
                         f"(default {DEFAULT_START_TIMEOUT_S:g} s)")
    down = actions.add_parser("down", help="stop everything started in --dir (workers, their executors, the master)")
    down.add_argument("--dir", required=True)
    down.add_argument("--timeout", type=flag_seconds, default=DEFAULT_STOP_TIMEOUT_S,
                      help=f"time between SIGTERM and SIGKILL, e.g. 30s (default {DEFAULT_STOP_TIMEOUT_S:g} s)")
    status = actions.add_parser("status", help="print the master URL and the workers of the cluster in --dir")
    status.add_argument("--dir", required=True)


def _run(args: argparse.Namespace, pm: Any) -> int:
    try:
        if args.cluster_action == "up":
            info = start_cluster(args.dir, workers=args.workers, cores=args.cores, memory=args.memory,
                                 heap=args.heap, timeout_s=args.timeout)
            print(f"Spark {info.spark_version} standalone cluster in {info.directory}: master pid {info.master_pid}, "
                  f"{len(info.worker_pids)} workers x {info.cores} core(s), {info.memory} (pids "
                  f"{', '.join(map(str, info.worker_pids))}); web UI {info.webui_url}; logs {info.directory}/*.log")
            print(f"spark.authenticate is on: applications need the cluster's secret (spark-submit --properties-file "
                  f"{info.properties_file}, or ClusterInfo.app_conf())")
            print(info.master_url)
            return 0
        if args.cluster_action == "down":
            stopped = stop_cluster(args.dir, timeout_s=args.timeout)
            print(f"stopped {len(stopped)} process(es): {', '.join(map(str, stopped))}" if stopped
                  else f"no cluster was running in {args.dir}")
            return 0
        running = running_cluster(args.dir)
        if running is None:
            print(f"no cluster is running in {args.dir}")
            return 1
        workers = master_state(running).get("workers", [])
        alive = sum(1 for w in workers if w.get("state") == "ALIVE")
        print(f"{alive} of {len(running.worker_pids)} workers alive; web UI {running.webui_url}")
        print(running.master_url)
        return 0
    except (ClusterError, OSError) as exc:
        print(f"pacer cluster {args.cluster_action}: error: {exc}", file=sys.stderr)
        return 1


CLUSTER_COMMAND = Command("cluster", "run a Spark standalone cluster on 127.0.0.1 from the installed PySpark (up, "
                          "down, status)", _configure, _run)
