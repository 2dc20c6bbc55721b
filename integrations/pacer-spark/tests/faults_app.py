"""A paced ``format("pacer")`` job in a process of its own, for a test to kill with SIGKILL.

    python faults_app.py hold --input IN --out OUT        # zStream holds a csv backlog; killed by the test

``hold``: a csv query (``maxFilesPerTrigger 2``) paced by zStream with a 120 s deadline, so the source
observes (and Spark's file source logs) the whole backlog while pacer holds it; it prints ``READY`` and
streams until the test kills it with SIGKILL.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

SCHEMA = "id INT, word STRING"


def put_csv(folder: Path, index: int, rows: int) -> None:
    """One csv file of ``rows`` rows (ids ``index * rows ...``), moved into ``folder`` whole."""
    staging = folder.parent / f".{folder.name}-{index}.csv"
    staging.write_text("".join(f"{index * rows + j},w{j % 7}\n" for j in range(rows)))
    os.replace(staging, folder / f"part-{index:05d}.csv")


def session() -> Any:
    """A local[2] session with pacer's builder (FAIR pools), no UI."""
    import pacer_spark

    spark = (pacer_spark.session_builder("local[2]", "pacer-faults").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def paced_csv(spark: Any, folder: str, deadline: str) -> Any:
    """The user's query: their csv folder through ``format("pacer")``, two files per batch at most."""
    return (spark.readStream.format("pacer").option("pacer.source", "csv").option("pacer.admission", "zstream")
            .option("pacer.deadline", deadline).option("maxFilesPerTrigger", "2").schema(SCHEMA).load(folder))


def hold(args: argparse.Namespace) -> int:
    import pacer_spark

    spark = session()
    pacer_spark.attach(spark)
    out = Path(args.out)
    query = (paced_csv(spark, args.input, "120s").writeStream.queryName("held").format("parquet")
             .option("path", str(out / "data")).option("checkpointLocation", str(out / "checkpoint")).start())
    print("READY", flush=True)
    query.awaitTermination()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("scenario", choices=["hold"])
    parser.add_argument("--input", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    return hold(args)


if __name__ == "__main__":
    raise SystemExit(main())
