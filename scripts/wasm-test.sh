#!/usr/bin/env bash
# The engine's unit, integration and model tests built for wasm32-wasip2 and run under wasmtime
# (the host crate's runner, one preopened temp directory), so that a 32-bit regression fails.
# WASI has no threads, so each test binary runs one test at a time: the model test runs beside
# the others, one binary per core. `make wasm-test` calls this.
set -euo pipefail
cd "$(dirname "$0")/.."
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
# Built with the workspace's features, as cargo test's build, so it is not rebuilt.
cargo build --workspace --bin strata-wasi-run
export CARGO_TARGET_WASM32_WASIP2_RUNNER="$target_dir/debug/strata-wasi-run"
run() { cargo test -p strata-engine --target wasm32-wasip2 "$@" -- --test-threads=1; }
run --lib --tests --no-run
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
run --test model >"$logs/model" 2>&1 &
model=$!
status=0
# Every other test target of the engine (tests/NAME.rs or tests/NAME/main.rs), with the unit tests.
others=()
for t in crates/engine/tests/*.rs crates/engine/tests/*/main.rs; do
  name="$(basename "${t%/main.rs}" .rs)"
  [ "$name" = model ] || others+=(--test "$name")
done
run --lib "${others[@]}" >"$logs/rest" 2>&1 || status=$?
wait "$model" || status=$?
cat "$logs/rest" "$logs/model"
if [ "$status" -ne 0 ]; then
  echo "wasm-test: FAILED (output above)"
fi
exit "$status"
