#!/usr/bin/env bash
# `beside.sh BACKGROUND... -- FOREGROUND...`: runs the two commands at once and fails if either
# failed. `make test` pairs work that leaves a core idle (tests that mostly wait, or one long
# test holding up a binary) with work that fills it. FOREGROUND's output streams as it runs;
# BACKGROUND's is kept and follows it, however the script ends (a failure, or a CI timeout's
# SIGTERM), so the two never interleave.
set -euo pipefail
background=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  background+=("$1")
  shift
done
if [ ${#background[@]} -eq 0 ] || [ $# -lt 2 ]; then
  echo "usage: beside.sh BACKGROUND... -- FOREGROUND..." >&2
  exit 2
fi
shift
log="$(mktemp)"
trap 'echo "--- beside: ${background[*]} ---"; cat "$log" 2>/dev/null; rm -f "$log"' EXIT
"${background[@]}" >"$log" 2>&1 &
pid=$!
status=0
"$@" || status=$?
wait "$pid" || status=$?
if [ "$status" -ne 0 ]; then
  echo "beside: FAILED: $* and ${background[*]} (the latter's output is below)"
fi
exit "$status"
