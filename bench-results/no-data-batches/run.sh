#!/usr/bin/env bash
# Spark's no-data batches under pacing (the "Decide by what Spark really costs" issue, deliverable 4): LR2 in append
# and update mode and LR3 in update mode, zStream at a 10 s deadline, 120 s of pacer-gen traffic at 1000 rows/s,
# watermark 10 s, local[2]: each setting alone, then both at once on the same traffic.
set -u
cd "$(git rev-parse --show-toplevel)"; . .venv/bin/activate
export PYSPARK_PYTHON=$PWD/.venv/bin/python PYSPARK_DRIVER_PYTHON=$PWD/.venv/bin/python
OUT=${OUT:-bench-results/no-data-batches}
common="--duration 120 --deadline 10 --watermark 10 --rate 1000"
python -m pacer_spark.run.no_data $common --json $OUT/lr2.json > $OUT/lr2.log 2>&1
python -m pacer_spark.run.no_data $common --workload lr3 --modes update --json $OUT/lr3-update.json > $OUT/lr3.log 2>&1
python -m pacer_spark.run.no_data $common --modes update --order off,on --json $OUT/lr2-update-off-first.json \
  > $OUT/lr2-update-off-first.log 2>&1
