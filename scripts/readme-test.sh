#!/usr/bin/env bash
# Runs every command in README.md, in order, in an empty directory, so the README cannot rot:
# - ```console blocks: each line starting with "$ " is a command (a trailing "&" runs it in the
#   background); the other lines are what a user would see and are not checked;
# - ```python blocks: written to readme.py, for the command that runs it;
# - ```rust FILE blocks: must be FILE's code (whitespace aside), and FILE's example is run there.
# `strata` is the debug build beside the tests ($STRATA_BIN to choose another).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=${STRATA_BIN:-$TARGET/debug/strata}
[ -x "$BIN" ] || { echo "readme-test: $BIN is missing (cargo build -p strata-cli)" >&2; exit 1; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/strata-readme.XXXXXX")
RUN=
cleanup() {
    # The commands run in a process group of their own: a failure leaves no serve behind.
    [ -n "$RUN" ] && kill -- "-$RUN" 2>/dev/null
    if mountpoint -q "$WORK/mnt" 2>/dev/null; then fusermount3 -uz "$WORK/mnt"; fi
    rm -rf "$WORK"
}
trap cleanup EXIT
mkdir "$WORK/bin"
ln -s "$BIN" "$WORK/bin/strata"

python3 - "$ROOT" "$TARGET" > "$WORK/run.sh" <<'PY'
import re, shlex, sys
root, target = sys.argv[1], sys.argv[2]
text = open(f"{root}/README.md").read()
out = ["set -euo pipefail"]
def squash(s):
    return re.sub(r"\s+", "", s)
for m in re.finditer(r"^```([^\n]*)\n(.*?)^```\n", text, re.S | re.M):
    info, body = m.group(1).split(), m.group(2)
    if not info:
        continue  # make run / make test: CI runs make test itself
    if info[0] == "console":
        for line in body.splitlines():
            if line.startswith("$ "):
                cmd = line[2:]
                out.append(f"echo {shlex.quote('$ ' + cmd)}")
                out.append(cmd)
    elif info[0] == "python":
        out.append("cat > readme.py <<'README_PY'\n" + body + "README_PY")
    elif info[0] == "rust":
        path = info[1]
        code = open(f"{root}/{path}").read()
        if squash(body) not in squash(code):
            sys.exit(f"readme-test: the README's block for {path} is not that file's code")
        example = path.rsplit("/", 1)[1][:-3]
        out.append(f"echo '$ (example {path})'")
        out.append(shlex.quote(f"{target}/debug/examples/{example}"))
    else:
        sys.exit(f"readme-test: a ```{info[0]} block, which this script cannot run")
print("\n".join(out))
PY

# The examples, built once for the whole workspace: with the features `cargo test --workspace`
# compiled the libraries with, so only the examples themselves link (`cargo run -p CRATE` would
# resolve that crate's features alone and compile the engine again).
CARGO_TARGET_DIR="$TARGET" cargo build -q --manifest-path "$ROOT/Cargo.toml" --workspace --examples

cd "$WORK"
# The guest's own build in the README shares the host's guest build (crates/wasi-host/build.rs).
# wac and wasmtime are the ones `make deps` installs.
TOOLS="${STRATA_TOOLS:-$HOME/.cache/strata/tools}"
PATH="$WORK/bin:$TOOLS/bin:$PATH" STRATA_SRC="$ROOT" CARGO_TARGET_DIR="$TARGET/wasi-guest" \
    setsid bash "$WORK/run.sh" &
RUN=$!
wait "$RUN"
RUN=
echo "readme-test: every command in README.md ran"
