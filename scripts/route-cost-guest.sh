#!/bin/sh
# Runs in a guest booted by scripts/route-cost.sh: the Python small-file
# loader (bench/workloads/smallfiles.py, 4 workers) untraced and recorded
# on each syscall route the kernel has, alternating, ROUNDS rounds; one
# line per run to $RES/cost.txt: ROUND MODE SECONDS (the loader's own
# clock). Files in the guest's /tmp (memory), read once before.
. "$1"
cd /tmp || exit 1
mkdir -p small && python3 - <<'PY'
import os
for d in range(20):
    os.makedirs(f"small/c{d:03}", exist_ok=True)
    for i in range(200):
        with open(f"small/c{d:03}/{i:05}.jpg", "wb") as f:
            f.write(os.urandom(16384))
PY
py=$(python3 -c 'import sys; print(sys.executable)')
$py "$ROOT/bench/workloads/smallfiles.py" /tmp/small 4 >/dev/null
: >"$RES/cost.txt"
for r in $(seq 1 "$ROUNDS"); do
  for mode in untraced $ROUTES; do
    for d in full summary; do
      [ $mode = untraced ] && [ $d = summary ] && continue
      if [ $mode = untraced ]; then
        t=$($py "$ROOT/bench/workloads/smallfiles.py" /tmp/small 4 | tail -1)
        echo "$r untraced $t" >>"$RES/cost.txt"
      else
        extra=""; [ $d = summary ] && extra="--detail summary --slow 1ms"
        "$BIN" record -f -q --syscall-probes $mode $extra -o /tmp/c.bin -- \
          $py "$ROOT/bench/workloads/smallfiles.py" /tmp/small 4 >/tmp/out.txt 2>>"$RES/errors.txt"
        echo "$r $mode-$d $(tail -1 /tmp/out.txt)" >>"$RES/cost.txt"
      fi
    done
  done
done
MLTRACE_BPF_STATS=$RES/bpf-stats.txt "$BIN" record -f -q -o /tmp/c.bin -- $py "$ROOT/bench/workloads/smallfiles.py" /tmp/small 4 >/dev/null 2>&1
"$BIN" doctor >"$RES/doctor.txt" 2>&1
touch "$RES/finished"
