#!/bin/bash
# Alternates multireadrandom batched and as a loop of gets over an existing store, N pairs, and
# prints each pair's µs/key and ratio: on a noisy machine the ratio of neighbouring runs is steadier
# than either figure.
#   scripts/multiread-pairs.sh STRATA_BINARY DB_DIR N [bench flags...]
# e.g. scripts/multiread-pairs.sh target/release/strata /tmp/b 5 --multiread_stride 16
# The store must exist (for example: bench --num 1000000 --benchmarks fillrandom,compact).
set -euo pipefail
bin=$1 db=$2 n=$3
shift 3
flags=(--num 1000000 --compression_type none --bloom_bits 10 --cache_size 536870912
  --use_existing_db --batch_size 32 --reads 400000 "$@")
micros() {
  "$bin" --db "$db" bench "${flags[@]}" --benchmarks readrandom,multireadrandom \
    --multiread_batched="$1" 2>&1 | awk '/^multireadrandom/ {print $3}'
}
for _ in $(seq "$n"); do
  batched=$(micros true)
  loop=$(micros false)
  echo "batched $batched loop $loop ratio $(awk -v a="$batched" -v b="$loop" 'BEGIN {printf "%.2f", b / a}')"
done
