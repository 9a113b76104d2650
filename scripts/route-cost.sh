#!/bin/bash
# The syscall routes' cost on Debian's kernels under QEMU (full emulation):
# boots each kernel make test-kernels cached (run it first) and runs
# scripts/route-cost-guest.sh there: the Python small-file loader
# untraced and recorded on each route, alternating. Prints each kernel's
# medians and the ratios to untraced. Root. Usage:
#   scripts/route-cost.sh [6.1 6.12 ...]   (ROUNDS=3, ROUTES="trampoline fast")
# Full emulation slows the loader and the programs alike but not equally:
# the ratios say which route costs less there, not what a real machine pays.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${MLTRACE_CACHE:-$HOME/.cache/mltrace}
out=${CARGO_TARGET_DIR:-$root/target}/route-cost
bin=${CARGO_TARGET_DIR:-$root/target}/release/mltrace
(cd "$root" && cargo build --release -q -p mltrace)
for want in "${@:-6.1 6.12}"; do
  kdir=$(ls -d "$cache/kernels/$want".* 2>/dev/null | head -1)
  [ -n "$kdir" ] || { echo "route-cost: no cached kernel $want (run make test-kernels first)" >&2; exit 1; }
  v=$(basename "$kdir")
  res=$out/$v
  rm -rf "$res" && mkdir -p "$res"
  printf 'BIN=%s\nRES=%s\nROOT=%s\nROUNDS=%s\nROUTES="%s"\n' "$bin" "$res" "$root" "${ROUNDS:-3}" \
    "${ROUTES:-trampoline fast}" >"$res/env"
  echo "route-cost: booting $v (full emulation)" >&2
  PATH=$cache/vng/bin:$PATH timeout 1800 vng --disable-kvm --qemu-opts="-accel tcg,thread=single" \
    --run "$kdir/boot/vmlinuz-$v" --memory 4G --cpus 2 --user root --rwdir "$res" \
    --exec "sh $root/scripts/route-cost-guest.sh $res/env" >"$res/console.log" 2>&1 || true
  [ -f "$res/finished" ] || { echo "route-cost: $v stopped early (see $res)" >&2; continue; }
  python3 - "$res/cost.txt" "$v" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) == 3 and parts[2].isdigit():
        runs.setdefault(parts[1], []).append(int(parts[2]) / 1e9)
base = statistics.median(runs.pop("untraced"))
print(f"{sys.argv[2]}: untraced {base:.3f} s (median of {len(runs and next(iter(runs.values())))})")
for mode, t in sorted(runs.items()):
    m = statistics.median(t)
    print(f"  {mode:22} {m:.3f} s  {100 * (m / base - 1):+.1f}%")
PY
done
