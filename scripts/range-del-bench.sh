#!/usr/bin/env bash
# Range deletions against the same deletions as point tombstones and against no deletions
# (issue 4's goals): fillrandom of N keys with a range deletion of WIDTH keys every few writes,
# then readrandom, seekrandom and readseq; the most deleted store is read again after a full
# compaction. Usage: scripts/range-del-bench.sh BIN DIR [N] [extra bench flags...]
set -euo pipefail
bin=$1 dir=$2 num=${3:-1000000}
shift $(( $# < 3 ? $# : 3 ))
reads=${READS:-400000}
width=${WIDTH:-100}
common=(--num "$num" --reads "$reads" --range_tombstone_width "$width" "$@")
run() {
  local label=$1; shift
  rm -rf "$dir"
  echo "== $label"
  "$bin" --db "$dir" bench --benchmarks fillrandom,readrandom,readrandom,seekrandom,readseq,stats \
    "${common[@]}" "$@" | grep -E '^(fillrandom|readrandom|seekrandom|readseq|range deletions|L[0-9])'
}
run "no deletions"
for n in 5000 50000; do
  every=$(( num / n ))
  run "$n range tombstones" --writes_per_range_tombstone "$every" --max_num_range_tombstones "$n"
  run "$n expanded into point tombstones" --writes_per_range_tombstone "$every" \
    --max_num_range_tombstones "$n" --expand_range_tombstones
done
echo "== 50000 range tombstones, after a full compaction"
rm -rf "$dir"
every=$(( num / 50000 ))
"$bin" --db "$dir" bench --benchmarks fillrandom,seekrandom,readseq,compact,seekrandom,readseq \
  "${common[@]}" --writes_per_range_tombstone "$every" --max_num_range_tombstones 50000 \
  | grep -E '^(fillrandom|seekrandom|readseq|compact)'
