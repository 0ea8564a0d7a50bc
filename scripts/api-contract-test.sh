#!/usr/bin/env bash
# The REST contract test: Schemathesis (pinned; `make deps` installs it into $STRATA_TOOLS) drives
# a real `strata serve` on loopback, seeded with the demo keyspace, from the committed
# crates/admin-api/openapi.json, with every check on: status codes, content types and response
# schemas as documented, schema-valid requests taken, schema-violating ones refused, no 5xx.
# crates/admin-api/schemathesis.toml says which state-dependent answers it expects and why.
# Any failure fails the run; its output names the request to replay.
#
# EXAMPLES sets the examples per operation (300 unless set); SEED repeats a run.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=${STRATA_BIN:-$TARGET/debug/strata}
TOOLS="${STRATA_TOOLS:-$HOME/.cache/strata/tools}"
ST="$TOOLS/st-venv/bin/schemathesis"
[ -x "$BIN" ] || { echo "api-contract-test: $BIN is missing (cargo build -p strata-cli)" >&2; exit 1; }
[ -x "$ST" ] || { echo "api-contract-test: Schemathesis is missing (make deps installs it)" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/strata-contract.XXXXXX")
. "$ROOT/scripts/serve-on-loopback.sh"
trap 'stop_serve; rm -rf "$WORK"' EXIT
serve_on_loopback "$BIN" "$WORK" --seed-demo
url=$URL token=$TOKEN

# Schemathesis keeps its example database in the working directory: the temporary one.
cd "$WORK"
seed=()
[ -n "${SEED:-}" ] && seed=(--seed "$SEED")
status=0
STRATA_CONTRACT_TOKEN=$token timeout 1200 "$ST" \
  --config-file "$ROOT/crates/admin-api/schemathesis.toml" run \
  "$ROOT/crates/admin-api/openapi.json" --url "$url" --checks all \
  --max-examples "${EXAMPLES:-300}" "${seed[@]}" || status=$?
if ! kill -0 "$SERVE" 2>/dev/null; then
  echo "api-contract-test: strata serve died during the run:" >&2
  tail -20 "$WORK/serve.log" >&2
  status=1
fi
exit "$status"
