#!/usr/bin/env bash
# Range deletions against the same deletions as point tombstones and against no deletions
# (issue 4's goals), in the shape of RocksDB's DeleteRange benchmark: N keys filled at random
# with small write buffers (so the data settles into levels), range deletions of WIDTH keys at
# regular intervals over the last tenth of the writes, then a flush and a wait until compaction
# has nothing due (so every store has the shape its data calls for); then, in a fresh process,
# readrandom (twice), seekrandom and readseq; then the same after a full compaction. Usage: scripts/range-del-bench.sh BIN DIR [N] [extra bench flags...]
# (extra flags go to every run, e.g. --engine rocksdb).
set -euo pipefail
bin=$1 dir=$2 num=${3:-1000000}
shift $(( $# < 3 ? $# : 3 ))
reads=${READS:-400000}
width=${WIDTH:-100}
shape=(--num "$num" --write_buffer_size 1048576 --target_file_size_base 1048576
  --max_bytes_for_level_base 4194304 --range_tombstone_width "$width" "$@")
before=$(( num * 9 / 10 ))
run() {
  local label=$1; shift
  rm -rf "$dir"
  echo "== $label"
  "$bin" --db "$dir" bench --benchmarks fillrandom,flush,waitforcompaction "${shape[@]}" "$@" \
    | grep -E '^fillrandom'
  "$bin" --db "$dir" bench --use_existing_db \
    --benchmarks readrandom,readrandom,seekrandom,readseq,stats --reads "$reads" "${shape[@]}" \
    | grep -E '^(readrandom|seekrandom|readseq|range deletions|L[0-9])'
}
run "no deletions"
for n in 5000 50000; do
  every=$(( (num - before) / n ))
  flags=(--writes_before_delete_range "$before" --writes_per_range_tombstone "$every"
    --max_num_range_tombstones "$n")
  run "$n range tombstones" "${flags[@]}"
  echo "-- after a full compaction"
  "$bin" --db "$dir" bench --use_existing_db --benchmarks compact,seekrandom,readseq,readrandom \
    --reads "$reads" "${shape[@]}" | grep -E '^(seekrandom|readseq|readrandom|compact)'
  run "$n expanded into point tombstones" "${flags[@]}" --expand_range_tombstones
done
