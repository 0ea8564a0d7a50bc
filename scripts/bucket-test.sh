#!/usr/bin/env bash
# The bucket backend's tests (crates/bucket) against a real SeaweedFS that `make deps` built. They
# mostly wait on it (its start, an outage, a hundred writers killed and restarted), so `make
# test` runs them beside a command that keeps both cores busy: `bucket-test.sh CMD...` runs CMD
# meanwhile and fails if either failed. The bucket tests' output follows CMD's.
#
# Their binaries are the ones `cargo test --workspace` builds: run directly, not through
# `cargo test -p strata-bucket`, whose narrower feature set would build the dependencies again.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t binaries < <("${CARGO:-cargo}" test --workspace --no-run --message-format=json |
  grep 'crates/bucket#' | grep -o '"executable":"[^"]*"' | sed 's/"executable":"\(.*\)"/\1/')
if [ ${#binaries[@]} -eq 0 ]; then
  echo "bucket-test: cargo built no test binary of crates/bucket" >&2
  exit 1
fi
logs="$(mktemp -d)"
# Shown however the script ends (a failure, or a CI timeout's SIGTERM), then removed.
trap 'cat "$logs/bucket" 2>/dev/null; rm -rf "$logs"' EXIT
(
  cd crates/bucket
  for b in "${binaries[@]}"; do
    "$b" || exit 1
  done
) >"$logs/bucket" 2>&1 &
bucket=$!
status=0
if [ $# -gt 0 ]; then
  "$@" || status=$?
fi
wait "$bucket" || status=$?
if [ "$status" -ne 0 ]; then
  echo "bucket-test: FAILED (the bucket tests' output is below)"
fi
exit "$status"
