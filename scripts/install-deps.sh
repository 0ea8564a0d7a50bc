#!/usr/bin/env bash
# Installs what building and testing Strata needs and is missing: Debian's clang, lld, llvm-ar and
# wasi-libc (the WASI build of zstd), fuse3 (the mount's tests), git (a tool the mount's tests run
# inside it), chromium (the console's Playwright tests), util-linux-extra (fincore, which the
# bench's page-cache test reads), python3 and its venv (Schemathesis, the REST contract test),
# wrk (the REST benchmark's load generator), Node.js and npm (the console's build),
# the wasm32-wasip2 Rust target, rustfmt and clippy, and from crates.io the fsx file system
# exerciser, wac and the wasmtime CLI in $STRATA_TOOLS. The console's npm packages come from
# web-admin/package-lock.json (make web).
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for pkg in clang lld llvm wasi-libc fuse3 git chromium util-linux-extra python3 python3-venv wrk; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! rustup target list --installed | grep -qx wasm32-wasip2; then
  rustup target add wasm32-wasip2
fi
for component in rustfmt clippy; do
  if ! rustup component list --installed | grep -q "^${component}"; then
    rustup component add "$component"
  fi
done

# Tools from crates.io, pinned, built once into $STRATA_TOOLS:
# - fsx checks every byte the mount returns against what it wrote (crates/fusefs);
# - wac plugs a wasi:keyvalue app into the Strata component, and plain `wasmtime run` (the
#   CLI of the wasmtime the host embeds) runs the result: the README's composition and
#   tests/scenarios/keyvalue_app.rs.
TOOLS="${STRATA_TOOLS:-$HOME/.cache/strata/tools}"
install_tool() { # NAME CRATE VERSION [cargo install flags...]
  local name=$1 crate=$2 version=$3
  shift 3
  if [ -x "$TOOLS/bin/$name" ] && "$TOOLS/bin/$name" --version 2>/dev/null | grep -qF "$version"; then
    return
  fi
  echo "installing $crate $version into $TOOLS (once)"
  cargo install --quiet --locked "$crate" --version "=$version" --root "$TOOLS" "$@"
}
install_tool fsx fsx 0.3.2
install_tool wac wac-cli 0.12.0 --no-default-features
install_tool wasmtime wasmtime-cli 48.0.8 --no-default-features \
  --features run,cranelift,component-model,parallel-compilation

# SeaweedFS, the S3-compatible server the bucket backend's tests run against (crates/bucket). Its
# go.mod has a replace directive, so `go install` refuses it: the module is downloaded from the Go
# module proxy and built from a copy (about 7 minutes on two cores, once).
WEED_MODULE=github.com/seaweedfs/seaweedfs
WEED_VERSION=v0.0.0-20261109003541-7506e5f91cd6
if [ "$(cat "$TOOLS/bin/weed.version" 2>/dev/null)" != "$WEED_VERSION" ] || [ ! -x "$TOOLS/bin/weed" ]; then
  command -v go >/dev/null || { echo "building SeaweedFS needs Go (the go command)" >&2; exit 1; }
  echo "building SeaweedFS $WEED_VERSION into $TOOLS/bin/weed (once)"
  src=$(go mod download -json "$WEED_MODULE@$WEED_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [ -n "$src" ] || { echo "go mod download $WEED_MODULE@$WEED_VERSION gave no directory" >&2; exit 1; }
  build=$(mktemp -d)
  cp -r "$src/." "$build"
  chmod -R u+w "$build"
  mkdir -p "$TOOLS/bin"
  (cd "$build" && CGO_ENABLED=0 go build -o "$TOOLS/bin/weed" ./weed)
  rm -rf "$build"
  echo "$WEED_VERSION" > "$TOOLS/bin/weed.version"
fi

# Schemathesis, pinned, in a virtual environment of its own: the REST contract test
# (scripts/api-contract-test.sh) drives a real `strata serve` from the committed openapi.json.
ST_VERSION=4.32.5
if ! "$TOOLS/st-venv/bin/schemathesis" --version 2>/dev/null | grep -qF "$ST_VERSION"; then
  echo "installing Schemathesis $ST_VERSION into $TOOLS/st-venv (once)"
  python3 -m venv "$TOOLS/st-venv"
  "$TOOLS/st-venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$ST_VERSION"
fi

# Vite 7 needs Node 20.19 or newer.
if ! node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)'; then
  echo "the console's build needs Node.js 20.19 or newer; found $(node --version)" >&2
  exit 1
fi
