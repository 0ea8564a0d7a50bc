#!/usr/bin/env bash
# The bucket backend's tests (crates/bucket) against a real SeaweedFS that `make deps` built. They
# mostly wait on it (its start, an outage, a hundred writers killed and restarted), so `make
# test` runs them beside work that keeps both cores busy (scripts/beside.sh).
#
# `bucket-test.sh [BINARY...]` runs the named test binaries, or all of them; `--list` prints them,
# one a line. `make test` lists them before the WASI tests start, whose wasm32 build would
# otherwise hold Cargo's lock while this waits for it. They are the binaries `cargo test
# --workspace` builds: run directly, not through `cargo test -p strata-bucket`, whose narrower
# feature set would build the dependencies again.
set -euo pipefail
cd "$(dirname "$0")/.."
listed() {
  "${CARGO:-cargo}" test --workspace --no-run --message-format=json |
    grep 'crates/bucket#' | grep -o '"executable":"[^"]*"' | sed 's/"executable":"\(.*\)"/\1/'
}
if [ "${1:-}" = "--list" ]; then
  listed
  exit 0
fi
binaries=("$@")
[ ${#binaries[@]} -gt 0 ] || mapfile -t binaries < <(listed)
if [ ${#binaries[@]} -eq 0 ]; then
  echo "bucket-test: cargo built no test binary of crates/bucket" >&2
  exit 1
fi
cd crates/bucket
for b in "${binaries[@]}"; do
  "$b" || { echo "bucket-test: FAILED"; exit 1; }
done
