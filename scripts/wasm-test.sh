#!/usr/bin/env bash
# The engine's unit, integration and model tests built for wasm32-wasip2 and run under wasmtime
# (the host crate's runner, one preopened temp directory), so that a 32-bit regression fails.
# WASI has no threads, so each test binary runs one test at a time: the model test runs beside
# the others, one binary per core. `make wasm-test` calls this.
set -euo pipefail
cd "$(dirname "$0")/.."
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
# The runner is the one `cargo test --workspace` builds for the host crate's tests (a no-op after
# make test's build): `cargo build` would compile the engine and the host once more, without the
# dev-dependencies' features.
"${CARGO:-cargo}" test --workspace --no-run --quiet
export CARGO_TARGET_WASM32_WASIP2_RUNNER="$target_dir/debug/strata-wasi-run"
run() { "${CARGO:-cargo}" test -p strata-engine --target wasm32-wasip2 "$@" -- --test-threads=1; }
run --lib --tests --no-run
logs="$(mktemp -d)"
# Shown however the script ends (a failure, or a CI timeout's SIGTERM), then removed.
trap 'cat "$logs/model" 2>/dev/null; rm -rf "$logs"' EXIT
run --test model >"$logs/model" 2>&1 &
model=$!
status=0
# Every other test target of the engine (tests/NAME.rs or tests/NAME/main.rs), with the unit tests.
others=()
for t in crates/engine/tests/*.rs crates/engine/tests/*/main.rs; do
  name="$(basename "${t%/main.rs}" .rs)"
  [ "$name" = model ] || others+=(--test "$name")
done
# The rest streams as it runs; the model test's output follows it (from the trap).
run --lib "${others[@]}" || status=$?
wait "$model" || status=$?
if [ "$status" -ne 0 ]; then
  echo "wasm-test: FAILED (the output is above, the model test's last)"
fi
exit "$status"
