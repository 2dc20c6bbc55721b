#!/usr/bin/env bash
# The report's miss ratio against the records' own (Kafka timestamps) at a short deadline: a live LR2 topic at
# 400 rows/s, the query started ~10 s after the producer (plus Spark's start-up), zStream, deadline 5 s, 90 s.
set -u
cd "$(git rev-parse --show-toplevel)"; . .venv/bin/activate
export PYSPARK_PYTHON=$PWD/.venv/bin/python PYSPARK_DRIVER_PYTHON=$PWD/.venv/bin/python
OUT=${OUT:-bench-results/kafka-restart-live-topic/short-deadline}
BS=${BS:?pacer kafka up --dir DIR prints bootstrap.servers: BS=HOST:PORT}
topic=m18-$(date +%s)
pacer produce --bootstrap-servers $BS --topic $topic --workload lr2 --traffic constant --rate 400 --duration 150 \
  --partitions 2 --quiet > $OUT/produce.log 2>&1 &
sleep 10
pacer run --source kafka --bootstrap-servers $BS --topic $topic --workload lr2 --admission zstream --deadline 5s \
  --duration 90 --progress-every 30 --report $OUT/zstream.json > $OUT/run-zstream.log 2>&1
