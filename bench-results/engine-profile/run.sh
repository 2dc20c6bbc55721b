#!/usr/bin/env bash
# What a batch costs this Spark (the "Decide by what Spark really costs" issue, deliverable 2): `pacer calibrate
# --runtime spark` with its defaults (2000 rows/s under 2, 5 and 10 s triggers, three batches each, and tiny
# batches of one 20-row dataset) for LR2, LR1 and CM1 on local[2]; then LR2 under zStream at a 10 s deadline,
# 2000 rows/s for 90 s, from nothing and from LR2's profile, twice each, interleaved.
set -u
cd "$(git rev-parse --show-toplevel)"; . .venv/bin/activate
export PYSPARK_PYTHON=$PWD/.venv/bin/python PYSPARK_DRIVER_PYTHON=$PWD/.venv/bin/python
OUT=${OUT:-bench-results/engine-profile}
for w in lr2 lr1 cm1; do
  pacer calibrate --runtime spark --workload $w --out $OUT/$w-spark.json > $OUT/$w-calibrate.log 2>&1
done
common="--runtime spark --workload lr2 --rate 2000 --deadline 10s --admission zstream --duration 90 --progress-every 0"
for rep in 1 2; do
  pacer run $common --report $OUT/lr2-zstream-cold-$rep.json > $OUT/lr2-zstream-cold-$rep.log 2>&1
  pacer run $common --engine-profile $OUT/lr2-spark.json --report $OUT/lr2-zstream-prior-$rep.json \
    > $OUT/lr2-zstream-prior-$rep.log 2>&1
done
