#!/bin/bash
# The mount's peak RSS (VmHWM of `strata mount`, its own process) through a 4 GiB file's life
# (copy in, mv, appends, read back, random reads) and while 20 processes write 64 MiB each
# with their files open together. Needs about 6 GiB free under DIR.
#   scripts/mount-rss.sh [STRATA_BINARY] [DIR]
set -euo pipefail
BIN=${1:-target/release/strata}
D=${2:-$(mktemp -d -p "${TMPDIR:-/tmp}" mount-rss.XXXXXX)}
mkdir -p "$D/mnt"
"$BIN" --db "$D/db" mount --foreground "$D/mnt" 2>/dev/null &
PID=$!
trap 'fusermount3 -u "$D/mnt" 2>/dev/null || true; wait $PID 2>/dev/null || true; rm -rf "$D"' EXIT
for _ in $(seq 100); do mountpoint -q "$D/mnt" && break; sleep 0.1; done
hwm() { awk '/VmHWM/ {printf "%.1f MiB", $2 / 1024}' "/proc/$PID/status"; }
step() {
  local t0 t1
  t0=$(date +%s.%N); eval "$2"; t1=$(date +%s.%N)
  printf '%-62s %8.3f s, peak RSS so far %s\n' "$1:" "$(echo "$t1 - $t0" | bc)" "$(hwm)"
}
M="$D/mnt"
step "copy a 4 GiB file in (dd bs=1M)" "dd if=/dev/zero of=$M/big bs=1M count=4096 status=none"
step "mv it" "mv $M/big $M/moved"
step "100 appends of 100 B" "for i in \$(seq 100); do head -c 100 /dev/zero >> $M/moved; done"
step "read it back (cat)" "cat $M/moved > /dev/null"
step "2,000 random 4 KiB reads" "python3 -c \"
import os, random
f = os.open('$M/moved', os.O_RDONLY); n = os.fstat(f).st_size
for _ in range(2000): os.pread(f, 4096, random.randrange(0, n - 4096))\""
rm -f "$M/moved"
writer() {
  python3 -c "
import os, time
f = os.open('$M/w$1', os.O_WRONLY | os.O_CREAT)
for _ in range(64): os.write(f, b'x' * (1 << 20))
time.sleep(2)
os.close(f)"
}
twenty() {
  local pids=()
  for i in $(seq 20); do writer "$i" & pids+=($!); done
  wait "${pids[@]}"
}
step "20 processes writing 64 MiB each, files open together" twenty
echo "peak RSS of strata mount: $(hwm)"
