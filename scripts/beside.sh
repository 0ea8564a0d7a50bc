#!/usr/bin/env bash
# `beside.sh BACKGROUND... -- FOREGROUND...`: runs the two commands at once and fails if either
# failed. `make test` pairs work that leaves a core idle (tests that mostly wait, or one long
# test holding up a binary) with work that fills it. FOREGROUND's output streams as it runs;
# BACKGROUND's is kept and follows it, so the two never interleave. Stopped by a signal, the
# script stops both commands and shows what the background had said.
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
trap 'echo "--- beside: ${background[*]} ---"; cat "$log" 2>/dev/null || true; rm -f "$log"' EXIT
"${background[@]}" >"$log" 2>&1 &
bg=$!
# The foreground runs as a job too: bash runs a trap only once its foreground command is done,
# and `wait` lets a signal in at once. A job gets no SIGINT from the terminal, and a SIGTERM to
# this script alone reaches neither command: both are passed on.
"$@" &
fg=$!
trap 'trap - INT TERM; kill -TERM "$fg" "$bg" 2>/dev/null; wait; exit 143' INT TERM
fg_status=0
wait "$fg" || fg_status=$?
bg_status=0
wait "$bg" || bg_status=$?
if [ "$fg_status" -ne 0 ]; then
  echo "beside: FAILED: $* (exit $fg_status)"
fi
if [ "$bg_status" -ne 0 ]; then
  echo "beside: FAILED: ${background[*]} (exit $bg_status; its output is below)"
  exit "$bg_status"
fi
exit "$fg_status"
