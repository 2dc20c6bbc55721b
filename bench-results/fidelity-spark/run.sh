#!/usr/bin/env bash
# Issue 45 item 2: does the calibrated simulator predict Spark? `pacer calibrate --runtime spark` for LR2 and CM1
# (their default steps: 2000 rows/s under 2, 5 and 10 s triggers, then tiny 20-row batches), then `pacer bench
# fidelity`: five configurations the calibration did not run (other traffic, rates, admissions, deadlines), each
# 90 s on local[2], each then simulated with costs from those profiles. One Spark JVM at a time.
set -u
cd "$(git rev-parse --show-toplevel)"; . .venv/bin/activate
export PYSPARK_PYTHON=$PWD/.venv/bin/python PYSPARK_DRIVER_PYTHON=$PWD/.venv/bin/python
OUT=${OUT:-bench-results/fidelity-spark}
for w in lr2 cm1; do
  pacer calibrate --runtime spark --workload $w --out $OUT/$w-spark.json > $OUT/$w-calibrate.log 2>&1
done
{ echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  pacer bench fidelity --runtime spark --calibrated $OUT/lr2-spark.json --calibrated $OUT/cm1-spark.json --out $OUT
  echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"; } > $OUT/fidelity.log 2>&1
