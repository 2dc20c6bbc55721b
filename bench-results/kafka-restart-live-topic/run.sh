#!/usr/bin/env bash
# Issue 18 acceptance: a live LR2 wave topic holding ~60 s of traffic at 2000 rows/s when the query starts,
# the producer still running; pacer run --source kafka, zstream vs asap, deadline 10 s, 180 s.
set -u
cd "$(git rev-parse --show-toplevel)"; . .venv/bin/activate
export PYSPARK_PYTHON=$PWD/.venv/bin/python PYSPARK_DRIVER_PYTHON=$PWD/.venv/bin/python
OUT=${OUT:-bench-results/kafka-restart-live-topic}
BS=${BS:?pacer kafka up --dir DIR prints bootstrap.servers: BS=HOST:PORT}
for adm in ${ADMS:-zstream asap}; do
  topic=restart-$adm-$(date +%s)
  pacer produce --bootstrap-servers $BS --topic $topic --workload lr2 --traffic wave --rate 2000 --duration 320 --partitions 2 --quiet > $OUT/produce-$adm.log 2>&1 &
  prod=$!
  sleep 60
  pacer run --source kafka --bootstrap-servers $BS --topic $topic --workload lr2 --admission $adm --deadline 10s \
     --duration 180 --progress-every 30 --report $OUT/$adm.json > $OUT/run-$adm.log 2>&1
  echo "$adm rc=$?" >> $OUT/status
  kill $prod 2>/dev/null; wait $prod 2>/dev/null
done
echo finished >> $OUT/status
