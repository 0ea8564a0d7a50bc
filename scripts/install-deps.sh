#!/usr/bin/env bash
# Installs what building and testing Strata needs and is missing: Debian's clang, lld, llvm-ar and
# wasi-libc (the WASI build of zstd), fuse3 (the mount's tests), git (a tool the mount's tests run
# inside it), chromium (the console's Playwright tests), Node.js and npm (the console's build),
# the wasm32-wasip2 Rust target, rustfmt and clippy, and the fsx file system exerciser (crates.io)
# in $STRATA_TOOLS. The console's npm packages come from web-admin/package-lock.json (make web).
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for pkg in clang lld llvm wasi-libc fuse3 git chromium; do
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

# fsx checks every byte the mount returns against what it wrote (crates/fusefs, fsx_finds_no_corruption).
TOOLS="${STRATA_TOOLS:-$HOME/.cache/strata/tools}"
if [ ! -x "$TOOLS/bin/fsx" ]; then
  echo "installing fsx into $TOOLS"
  cargo install --quiet --locked fsx --version 0.3.2 --root "$TOOLS"
fi

# Vite 7 needs Node 20.19 or newer.
if ! node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)'; then
  echo "the console's build needs Node.js 20.19 or newer; found $(node --version)" >&2
  exit 1
fi
