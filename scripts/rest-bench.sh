#!/usr/bin/env bash
# The REST API's speed beside its floor, measured by wrk (Debian's; `make deps` installs it) in one
# run against one release `strata serve` on loopback: `/healthz` (the HTTP floor: routing and a
# constant answer), then a raw GET of one cached key, a raw PUT of 100 bytes, and a batchGet of
# 10 keys, each as requests per second, its ratio to the floor, and p50/p99 latency.
#
# THREADS, CONNECTIONS and SECS set wrk's load (2, 32, 5).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${STRATA_BIN:-$ROOT/target/release/strata}
[ -x "$BIN" ] || { echo "rest-bench: $BIN is missing (cargo build --release -p strata-cli)" >&2; exit 1; }
command -v wrk >/dev/null || { echo "rest-bench: wrk is missing (make deps installs it)" >&2; exit 1; }
THREADS=${THREADS:-2} CONNECTIONS=${CONNECTIONS:-32} SECS=${SECS:-5}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/strata-rest-bench.XXXXXX")
. "$ROOT/scripts/serve-on-loopback.sh"
trap 'stop_serve; rm -rf "$WORK"' EXIT
serve_on_loopback "$BIN" "$WORK"
url=$URL token=$TOKEN
auth="Authorization: Bearer $token"

# Ten keys of 100 bytes; the GET reads the first (cached after the first request).
ops=$(for i in $(seq 0 9); do printf '{"op":"put","key":"key%d","value":"%0100d"},' "$i" 0; done)
curl -sf -H "$auth" -H 'Content-Type: application/json' \
  -d "{\"encoding\":\"utf8\",\"ops\":[${ops%,}]}" "$url/api/v1/kv:batchWrite" >/dev/null
key=$(printf key0 | basenc --base64url | tr -d =)

cat >"$WORK/put.lua" <<LUA
wrk.method = "PUT"
wrk.headers["Content-Type"] = "application/octet-stream"
wrk.headers["Authorization"] = "Bearer $token"
wrk.body = string.rep("v", 100)
LUA
keys=$(for i in $(seq 0 9); do printf '"key%d",' "$i"; done)
cat >"$WORK/batch.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $token"
wrk.body = '{"encoding":"utf8","keys":[${keys%,}]}'
LUA

# One workload: NAME PATH [wrk options]; prints its line and keeps its rate for the ratio.
floor=
run() {
  local name=$1 path=$2
  shift 2
  local out rate p50 p99
  out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"${SECS}s" --latency -H "$auth" "$@" "$url$path")
  if grep -q "Non-2xx" <<<"$out"; then
    echo "rest-bench: $name answered errors:" >&2
    echo "$out" >&2
    exit 1
  fi
  rate=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
  p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
  p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
  [ -n "$floor" ] || floor=$rate
  printf '%-28s %12.0f req/s  %5.2fx floor  p50 %8s  p99 %8s\n' \
    "$name" "$rate" "$(awk -v r="$rate" -v f="$floor" 'BEGIN {print r / f}')" "$p50" "$p99"
}

echo "wrk -t$THREADS -c$CONNECTIONS -d${SECS}s against $("$BIN" --version) on loopback"
run "GET /healthz (floor)" /healthz
run "GET kv/{key}?raw=1" "/api/v1/kv/$key?raw=1"
run "PUT kv/{key} (100 B raw)" "/api/v1/kv/$key" -s "$WORK/put.lua"
run "POST kv:batchGet (10 keys)" /api/v1/kv:batchGet -s "$WORK/batch.lua"
