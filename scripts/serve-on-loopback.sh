# Sourced by the scripts that drive a real `strata serve`: `serve_on_loopback BIN WORK [ARGS...]`
# starts BIN serving a new store in WORK/db on a free loopback port, with ARGS, and sets SERVE
# (its pid), URL and TOKEN; `stop_serve` ends it. A serve that does not start fails the script
# with its log.
serve_on_loopback() {
  local bin=$1 work=$2
  shift 2
  "$bin" --db "$work/db" serve --listen 127.0.0.1:0 "$@" >"$work/serve.log" 2>&1 &
  SERVE=$!
  URL=
  for _ in $(seq 1 100); do
    URL=$(sed -n 's/^serving .* on \(http:\/\/127\.0\.0\.1:[0-9]*\) .*/\1/p' "$work/serve.log")
    [ -n "$URL" ] && break
    kill -0 "$SERVE" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$URL" ]; then
    echo "strata serve did not start:" >&2
    cat "$work/serve.log" >&2
    exit 1
  fi
  TOKEN=$(cat "$work/db/serve.token")
}

stop_serve() {
  if [ -n "${SERVE:-}" ]; then
    kill "$SERVE" 2>/dev/null && wait "$SERVE" 2>/dev/null
  fi
  return 0
}
