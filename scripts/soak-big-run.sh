#!/usr/bin/env bash
# make soak: a recorded run of ~42M events (10 epochs of a main process and
# a worker reading, with MLLOG phases) exported at the default budget; every
# file loaded in Perfetto's importer (tp --strict), the parts' syscall
# slices summed against the log's syscall records, and the overview and one
# part rendered in the real UI (PNGs to look at). Needs root; ~10 minutes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${SOAK_DIR:-$root/target/soak}
per=${SOAK_PREADS_PER_EPOCH:-4200000}
tp=$root/../shared/tools/perfetto/tp
shot=$root/../shared/tools/perfetto/ui-screenshot
mltrace=$root/target/release/mltrace
rm -rf "$out" && mkdir -p "$out" && cd "$out"
cc -O2 -o epochs "$root/tests/workloads/epochs.c"
head -c 1048576 /dev/zero > data.bin
"$mltrace" record -f --gpu off -o run.bin -- ./epochs data.bin 10 "$per" > epochs.out
calls=$("$mltrace" dump run.bin | grep -cE '^[0-9]+ (open|io|close|transfer) ')
TIMEFORMAT='export: %R s'
time "$mltrace" export run.bin
echo "log: $calls syscall records"
[ -x "$tp" ] || { echo "soak: $tp missing; skipping the importer checks"; exit 0; }
# Calls are slices on their thread's track, as are mappings (left out: the
# log's count is of open, io, close and transfer records).
total=0
for f in run.perfetto-trace run.part*.perfetto-trace; do
  res=$("$tp" --strict "$f" \
    "select count(*) from slice s join thread_track t on s.track_id = t.id where s.name not glob 'mmap *' and s.name not glob 'munmap *' and s.name not glob 'mprotect *' and s.name not glob 'mremap *'" \
    "select count(*) from slice where dur < 0" | grep -v '^[#>]' | grep -E '^[0-9]+$' | tr '\n' ' ')
  read -r n neg <<< "$res"
  echo "$f: $n syscall slices, $neg without an end"
  [ "$neg" = 0 ] || { echo "soak: $f has slices without an end"; exit 1; }
  total=$((total + n))
done
echo "parts: $total syscall slices"
[ "$total" = "$calls" ] || { echo "soak: the parts hold $total syscalls, the log $calls"; exit 1; }
if [ -x "$shot" ]; then
  "$shot" run.perfetto-trace overview.png --height 1600 --wait-ms 20000
  "$shot" "$(ls run.part*.perfetto-trace | sed -n 5p)" part.png --wait-ms 60000
  echo "look at $out/overview.png and $out/part.png"
fi
echo "soak: ok"
