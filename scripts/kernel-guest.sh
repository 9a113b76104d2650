#!/bin/sh
# Runs inside a guest booted by scripts/test-kernels.sh (or on the host with
# HOST=1): doctor, a recording exported for Perfetto, then each check of
# $RES/checks on each syscall route the kernel loads. Writes one line per
# result to $RES/results.txt: KERNEL ROUTE pass|fail|skip CHECK [why].
. "$1"
K=$(uname -r)
R=$RES/results.txt
: >"$R"
result() {
  echo "$K $*" >>"$R"
  echo "$(cut -d' ' -f1 /proc/uptime) $*" >>"$RES/progress.txt"
}
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null

if [ -z "$HOST" ]; then
  # A guest that hangs is killed from outside: what it was doing every
  # half minute, and the kernel's last words, are left in $RES/watch.txt.
  (while sleep 30; do
    {
      echo "== $(cut -d' ' -f1 /proc/uptime) s up"
      ps -eo pid,ppid,stat,etime,time,wchan:32,args | grep -v ' \[.*\]$'
      dmesg | tail -n 15
    } >>"$RES/watch.txt" 2>&1
  done) &
  watch=$!
  # A scratch disk, so reads can come from storage and block I/O is real.
  # The kernel's modules are in its unpacked package, not under /lib/modules.
  for m in virtio_blk ext4; do modprobe -d "$KDIR" $m 2>/dev/null; done
  for d in /dev/vda /dev/sda /dev/vdb /dev/sdb; do
    [ -b "$d" ] && ! grep -q "^$d " /proc/mounts && disk=$d && break
  done
  if [ -n "$disk" ] && mkfs.ext4 -q -F "$disk" && mount "$disk" /mnt; then
    # Some tests keep their files under the repository's target/tmp (a
    # real disk on the host): here that is the scratch disk too
    # (TARGET_TMP: where the tests were built to find it, when not beside BIN).
    mkdir -p /mnt/tmp /mnt/target-tmp && export TMPDIR=/mnt/tmp
    mount --bind /mnt/target-tmp "${TARGET_TMP:-$(dirname "$BIN")/../tmp}" 2>/dev/null
  else
    result - fail disk "no scratch disk to format and mount"
  fi
fi
export TMPDIR=${TMPDIR:-/tmp}
export MLTRACE_BIN="$BIN"
# Full emulation (QEMU without KVM) stretches every trap and context
# switch: the tests that compare times with a workload's own clock widen
# their bounds there (the checks are about loading and function).
[ "${HOST:-0}" = 1 ] || export MLTRACE_EMULATED=1

"$BIN" doctor >"$RES/doctor.txt" 2>&1
if [ $? = 0 ]; then result - pass doctor; else result - fail doctor "exit $? (see doctor.txt)"; fi

# 5.15+ must load the per-call route, 5.11+ the fast and trampoline
# routes (Debian's kernels have BPF trampolines; a host without them, as
# the development VMs, skips that route); every kernel the compat route.
major=$(echo "$K" | cut -d. -f1); minor=$(echo "$K" | cut -d. -f2)
before() { [ "$major" -lt "$1" ] || { [ "$major" = "$1" ] && [ "$minor" -lt "$2" ]; }; }
routes=""
# MLTRACE_KERNEL_ROUTES="per-call fast": the checks on these routes only
# (a change to one route, checked without repeating the others).
for route in ${MLTRACE_KERNEL_ROUTES:-per-call trampoline fast compat}; do
  line=$(grep "^$route route" "$RES/doctor.txt")
  if echo "$line" | grep -q ' ok '; then
    routes="$routes $route"
    result "$route" pass loads
  elif [ $route = per-call ] && before 5 15; then
    result "$route" skip loads "not before 5.15"
  elif [ $route = fast ] && before 5 11; then
    result "$route" skip loads "not before 5.11"
  elif [ $route = trampoline ] && before 5 11; then
    result "$route" skip loads "not before 5.11"
  elif [ $route = trampoline ] && [ "${HOST:-0}" = 1 ] && echo "$line" | grep -q 'needs BPF trampolines'; then
    result "$route" skip loads "$(echo "$line" | cut -c 30-)"
  else
    result "$route" fail loads "$(echo "$line" | cut -c 30-)"
  fi
done
uring=yes
grep -q '^io_uring probes *absent' "$RES/doctor.txt" && uring=no

# A recording exported for Perfetto (the caller loads it in Perfetto's importer).
w="dd if=/dev/urandom of=$TMPDIR/smoke.dat bs=1M count=8 2>/dev/null; sync; echo 3 >/proc/sys/vm/drop_caches; \
cat $TMPDIR/smoke.dat >/dev/null; cat $TMPDIR/smoke.dat >/dev/null"
if "$BIN" record -q -f --gpu off -o "$RES/smoke.bin" -- sh -c "$w" >"$RES/smoke.log" 2>&1 &&
   "$BIN" export "$RES/smoke.bin" -o "$RES/smoke.perfetto-trace" >>"$RES/smoke.log" 2>&1 &&
   "$BIN" stats --json "$RES/smoke.bin" >"$RES/smoke.json" 2>>"$RES/smoke.log"; then
  result - pass record-export
else
  result - fail record-export "see smoke.log"
fi

# Rings of two sizes in one map (bpf::ring_sizes): CPU 1 offline at the
# start gets a page, CPU 0 the rest; the kernel must take both, and the
# records on CPU 0 all arrive.
cpu1=/sys/devices/system/cpu/cpu1/online
if [ -z "$HOST" ] && [ -w $cpu1 ] && echo 0 >$cpu1 2>/dev/null; then
  if "$BIN" record -q -f --gpu off -o "$RES/offline.bin" -- cat "$TMPDIR/smoke.dat" >/dev/null 2>"$RES/offline.log" &&
     grep -q ', 0 lost' "$RES/offline.log" && "$BIN" doctor 2>&1 | grep -q 'a page for each of 1 CPU offline'; then
    result - pass rings-offline-cpu
  else
    result - fail rings-offline-cpu "see offline.log"
  fi
  echo 1 >$cpu1
fi

cd "$(dirname "$BIN")/../../tests" 2>/dev/null || cd /
while read -r bin name; do
  exe=$(awk -v b="$bin" '$1 == b { print $2 }' "$TESTS" | head -1)
  for route in $routes; do
    log=$RES/$route-$name.log
    if [ -z "$exe" ]; then
      result "$route" fail "$name" "no test binary $bin"
      continue
    fi
    case $name in
      io_uring*) if [ $uring = no ]; then result "$route" skip "$name" "no io_uring probes on this kernel"; continue; fi ;;
    esac
    MLTRACE_SYSCALL_PROBES=$route timeout 900 "$exe" --exact "$name" --test-threads=1 --nocapture >"$log" 2>&1
    rc=$?
    if [ $rc = 0 ] && grep -q '^test result: ok. 1 passed' "$log"; then
      result "$route" pass "$name"
    elif [ $rc = 0 ]; then
      result "$route" fail "$name" "the test did not run (see $log)"
    else
      result "$route" fail "$name" "exit $rc (see $log)"
    fi
  done
done <"$RES/checks"
[ -z "$HOST" ] && umount /mnt 2>/dev/null
[ -n "${watch:-}" ] && kill "$watch" 2>/dev/null
# The host tells a guest that ran every check from one that stopped (a
# hang under emulation, a crash) by this file.
: >"$RES/finished"
exit 0
