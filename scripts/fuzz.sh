#!/usr/bin/env bash
# Runs every cargo-fuzz target for FUZZ_SECS seconds each (default 10) from its seed corpus in
# fuzz/corpus, and prints the executions each managed. Needs the nightly toolchain; without it the
# run is skipped with a note. `make test` calls it; longer runs: FUZZ_SECS=3600 scripts/fuzz.sh.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
if ! rustup toolchain list | grep -q '^nightly'; then
  echo "fuzz: no nightly toolchain, skipped"
  exit 0
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi
secs="${FUZZ_SECS:-10}"
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-${CARGO_TARGET_DIR:-target}/fuzz}"
targets=(block table wal manifest blob ops)
# Built once (every target), then run as many at a time as there are cores: each fuzzer is
# one process.
cargo +nightly fuzz build
fuzz_one() {
  local target="$1" work log
  # The corpus grows in a scratch copy: the repository keeps only the seeds.
  work="$(mktemp -d)"
  cp -r "corpus/$target/." "$work/"
  log="$(mktemp)"
  if ! cargo +nightly fuzz run "$target" "$work" -- -max_total_time="$secs" -rss_limit_mb=4096 >"$log" 2>&1; then
    tail -40 "$log"
    echo "fuzz: $target FAILED (artifacts in fuzz/artifacts/$target)"
    return 1
  fi
  execs="$(grep -o 'Done [0-9]* runs' "$log" | tail -1 || true)"
  echo "fuzz: $target: ${execs:-done} in ${secs} s"
  rm -rf "$work" "$log"
}
# Two at a time, whatever the core count: each fuzzer may take 4 GB (-rss_limit_mb).
jobs_at_once=2
failed=0
pids=()
for target in "${targets[@]}"; do
  fuzz_one "$target" &
  pids+=($!)
  if [ "${#pids[@]}" -ge "$jobs_at_once" ]; then
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
exit "$failed"
