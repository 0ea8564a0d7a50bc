#!/usr/bin/env bash
# The REST API's speed beside its floor, measured by wrk (Debian's; `make deps` installs it) in one
# run against one release `strata serve` on loopback: `/healthz` (the HTTP floor: routing and a
# constant answer), then a raw GET of one cached key, a raw PUT of 100 bytes, and a batchGet of
# 10 keys, each as requests per second, its ratio to the floor, and p50/p99 latency.
#
# The workloads take turns, ROUNDS times, and each ratio is to the floor of its own round: on a
# shared machine the floor itself moves by a quarter from one minute to the next, and a ratio
# to a floor measured earlier measures that drift. A workload's line gives its mean rate, the
# median of its per-round ratios with their spread, and the latency of its last round.
#
# THREADS, CONNECTIONS and SECS set wrk's load (2, 32, 2 s a turn); ROUNDS the turns (5).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${STRATA_BIN:-$ROOT/target/release/strata}
[ -x "$BIN" ] || { echo "rest-bench: $BIN is missing (cargo build --release -p strata-cli)" >&2; exit 1; }
command -v wrk >/dev/null || { echo "rest-bench: wrk is missing (make deps installs it)" >&2; exit 1; }
THREADS=${THREADS:-2} CONNECTIONS=${CONNECTIONS:-32} SECS=${SECS:-2} ROUNDS=${ROUNDS:-5}
[ "$ROUNDS" -ge 1 ] 2>/dev/null || { echo "rest-bench: ROUNDS must be 1 or more" >&2; exit 1; }
export LC_ALL=C

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
# The PUTs go to a key of their own, so the reads are of the same ten values every round.
put_key=$(printf put | basenc --base64url | tr -d =)

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

# One turn of a workload: NAME PATH [wrk options]; keeps its rate, its ratio to this round's
# floor (the first workload of a round is the floor) and its latency.
declare -A rates ratios p50s p99s
floor=
turn() {
  local name=$1 path=$2
  shift 2
  local out rate
  out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"${SECS}s" --latency -H "$auth" "$@" "$url$path")
  if grep -q "Non-2xx" <<<"$out"; then
    echo "rest-bench: $name answered errors:" >&2
    echo "$out" >&2
    exit 1
  fi
  rate=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
  [ -n "$floor" ] || floor=$rate
  rates[$name]+="$rate "
  ratios[$name]+="$(awk -v r="$rate" -v f="$floor" 'BEGIN {printf "%.2f", r / f}') "
  p50s[$name]=$(awk '$1 == "50%" {print $2}' <<<"$out")
  p99s[$name]=$(awk '$1 == "99%" {print $2}' <<<"$out")
}

names=("GET /healthz (floor)" "GET kv/{key}?raw=1" "PUT kv/{key} (100 B raw)" "POST kv:batchGet (10 keys)")
echo "wrk -t$THREADS -c$CONNECTIONS, $ROUNDS rounds of ${SECS}s turns, against $("$BIN" --version) on loopback"
for round in $(seq 1 "$ROUNDS"); do
  printf 'round %d of %d\r' "$round" "$ROUNDS" >&2
  floor=
  turn "${names[0]}" /healthz
  turn "${names[1]}" "/api/v1/kv/$key?raw=1"
  turn "${names[2]}" "/api/v1/kv/$put_key" -s "$WORK/put.lua"
  turn "${names[3]}" /api/v1/kv:batchGet -s "$WORK/batch.lua"
done
for name in "${names[@]}"; do
  mean=$(tr ' ' '\n' <<<"${rates[$name]}" | awk 'NF {s += $1; n++} END {printf "%.0f", s / n}')
  sorted=$(tr ' ' '\n' <<<"${ratios[$name]}" | awk NF | sort -n | tr '\n' ' ')
  median=$(awk '{m = int((NF + 1) / 2); printf "%.2f", NF % 2 ? $m : ($m + $(m + 1)) / 2}' <<<"$sorted")
  printf '%-28s %12s req/s  %5sx floor (rounds: %s)  p50 %8s  p99 %8s\n' \
    "$name" "$mean" "$median" "${sorted% }" "${p50s[$name]}" "${p99s[$name]}"
done
