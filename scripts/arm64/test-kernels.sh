#!/usr/bin/env bash
# Boots Debian's arm64 kernels under qemu-system-aarch64 (full emulation,
# -M virt -cpu max, through virtme-ng --arch arm64) and runs the aarch64
# build (scripts/arm64/build.sh) inside each: `doctor`, then a recording of a
# multi-process workload checked against /proc/PID/io, exported for
# Perfetto (loaded here in Perfetto's importer, like test-kernels.sh does).
#
#   scripts/arm64/test-kernels.sh [--prepare|--smoke] [SERIES...]   (SERIES: 6.1 6.12 6.12-16k; default all)
#
# --prepare: only fetch the kernels and make the guest's root.
# --smoke: doctor and the recording only, not the end-to-end checks.
#
# The end-to-end checks (below; MLTRACE_KERNEL_CHECKS="e2e module::test;..."
# picks others) are the tests/e2e binaries built for aarch64 (build.sh
# --tests), run in the guest as test-kernels.sh runs x86_64's, on the fast
# route (MLTRACE_KERNEL_ROUTES="fast compat" adds others); they compile
# their workloads and stand-in CUDA/NCCL libraries with the guest's gcc.
# The guest sees the repository read-only at /src, where the tests were
# built (their paths are compiled in).
#
# The guest's root is an arm64 Debian (trixie, minbase + python3, strace,
# busybox) made with debootstrap through qemu-user-static (binfmt_misc),
# cached like the kernels in $MLTRACE_CACHE/arm64 (default ~/.cache/mltrace).
# The repository is shared read-only at its own path; results go to
# target/test-arm64/SERIES. Needs root.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
cache=${MLTRACE_CACHE:-$HOME/.cache/mltrace}
acache=$cache/arm64
out=$root/target/test-arm64
series=()
prepare=0
smoke=0
for a in "$@"; do
  case $a in
    --prepare) prepare=1 ;;
    --smoke) smoke=1 ;;
    6.1|6.12|6.12-16k) series+=("$a") ;;
    *) echo "test-arm64: unknown argument $a (expected 6.1, 6.12, 6.12-16k)" >&2; exit 2 ;;
  esac
done
[ ${#series[@]} -gt 0 ] || series=(6.1 6.12 6.12-16k)
[ "$(id -u)" = 0 ] || { echo "test-arm64: needs root (debootstrap, binfmt_misc, BPF in the guest)" >&2; exit 1; }

# Debian's arm64 kernel packages: the newest of each series in the archive.
declare -A like=(
  [6.1]='^linux-image-6\.1\.0-[0-9]+-arm64-unsigned$'
  [6.12]='^linux-image-6\.12\.[0-9]+\+deb13-arm64-unsigned$'
  [6.12-16k]='^linux-image-6\.12\.[0-9]+\+deb13-arm64-16k-unsigned$'
)

mirror() {
  local m
  m=$(grep -rhoE 'https?://[^ ]+/debian/?' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
      | grep -v -e security -e snapshot | head -1)
  echo "${m:-http://deb.debian.org/debian}"
}

need() {
  local missing=()
  command -v qemu-system-aarch64 >/dev/null || missing+=(qemu-system-arm)
  [ -x /usr/bin/qemu-aarch64-static ] || missing+=(qemu-user-static)
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  command -v mkfs.ext4 >/dev/null || missing+=(e2fsprogs)
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  if [ ! -x "$cache/vng/bin/vng" ]; then
    python3 -m venv "$cache/vng"
    "$cache/vng/bin/pip" install -q virtme-ng==1.42
  fi
  # arm64 binaries run through qemu-user (debootstrap's second stage, the
  # readers' comparison): qemu-user-static's binfmt entry, with F (the
  # interpreter is opened now, so it works in chroots too).
  [ -e /proc/sys/fs/binfmt_misc/register ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    printf '%s' ':qemu-aarch64:M::\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00:\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:/usr/bin/qemu-aarch64-static:F' \
      >/proc/sys/fs/binfmt_misc/register
  fi
}

# A private apt configuration for arm64 packages: the machine's own stays untouched.
apt_o=()
apt_setup() {
  local a=$acache/apt
  mkdir -p "$a/lists/partial" "$a/debs" "$a/archives/partial"
  printf 'deb %s bookworm main\ndeb %s trixie main\n' "$(mirror)" "$(mirror)" >"$a/sources.list"
  apt_o=(-o "Dir::Etc::SourceList=$a/sources.list" -o Dir::Etc::SourceParts=/dev/null -o "Dir::State::Lists=$a/lists"
         -o APT::Architecture=arm64 -o APT::Architectures=arm64 -o Acquire::Check-Valid-Until=false
         -o Debug::NoLocking=1)
  if [ -z "$(ls "$a/lists" 2>/dev/null | grep -v partial)" ] || [ -n "$(find "$a/lists" -maxdepth 0 -mtime +7)" ]; then
    apt-get "${apt_o[@]}" update -qq >&2
  fi
}

# Unpacks the kernel of a series into the cache; prints its directory.
kernel_dir() {
  local s=$1 pkg v d deb
  deb=$(ls "$acache/apt/debs"/*.deb 2>/dev/null | grep -E "/$(echo "${like[$s]}" | sed 's/^\^//; s/\$$//')_" | sort -V | tail -1 || true)
  if [ -z "$deb" ]; then
    [ ${#apt_o[@]} -gt 0 ] || apt_setup
    pkg=$(apt-cache "${apt_o[@]}" pkgnames linux-image- | grep -E "${like[$s]}" | sort -V | tail -1)
    [ -n "$pkg" ] || { echo "test-arm64: no $s arm64 kernel in Debian's archive" >&2; return 1; }
    (cd "$acache/apt/debs" && apt-get "${apt_o[@]}" download "$pkg" 2>/dev/null >&2)
    deb=$(ls "$acache/apt/debs/$pkg"_*.deb | head -1)
  fi
  v=$(basename "$deb" | sed -E 's/^linux-image-(.*)-unsigned_.*/\1/')
  d=$acache/kernels/$v
  if [ ! -e "$d/boot/vmlinuz-$v" ]; then
    rm -rf "$d" && mkdir -p "$d"
    dpkg-deb -x "$deb" "$d" >&2
    # trixie's packages put the modules under usr/lib (merged /usr).
    [ -e "$d/lib" ] || ln -s usr/lib "$d/lib"
    depmod -a -b "$d" "$v" >&2
  fi
  echo "$d"
}

# The guest's arm64 userland.
guest_root() {
  local r=$acache/root-trixie log=$acache/root-trixie.log
  if [ ! -f "$r/.mltrace-stamp" ]; then
    rm -rf --one-file-system "$r" && mkdir -p "$r"
    echo "test-arm64: debootstrap --arch=arm64 trixie (through qemu-user; several minutes; log in $log)" >&2
    debootstrap --arch=arm64 --variant=minbase \
      --include=python3,strace,busybox-static,kmod,e2fsprogs,procps,util-linux,iproute2,gcc,libc6-dev \
      trixie "$r" "$(mirror)" >"$log" 2>&1 ||
      { tail -n 15 "$log" >&2; echo "test-arm64: debootstrap of the arm64 root failed" >&2; return 1; }
    rm -rf "$r"/var/cache/apt/archives/*.deb
    echo 'Acquire::Check-Valid-Until "false";' >"$r/etc/apt/apt.conf.d/99mltrace"
    touch "$r/.mltrace-stamp"
  fi
  echo "$r"
}

bin=$root/target/aarch64-unknown-linux-gnu/release/mltrace
[ $prepare = 1 ] || [ -x "$bin" ] || { echo "test-arm64: no $bin (make arm64 builds it)" >&2; exit 1; }
need
mkdir -p "$out"
groot=$(guest_root)
if [ $prepare = 1 ]; then
  for s in "${series[@]}"; do echo "test-arm64: $s: $(kernel_dir "$s")" >&2; done
  exit 0
fi

checks=(
  "e2e record_e2e::known_io_is_recorded_exactly_and_matches_proc_pid_io"
  "e2e accounting_e2e::every_process_matches_the_kernels_own_counts"
  "e2e block_e2e::block_requests_are_exact_attributed_and_match_diskstats"
  "e2e sched_e2e::the_trainer_waits_for_its_worker_as_it_measured"
  "e2e wakeups_e2e::a_trainer_that_sleeps_to_compute_waits_as_it_measured"
  "e2e page_cache_e2e::a_file_read_twice_comes_half_from_storage"
  "e2e mapping_e2e::a_cold_mapped_file_is_attributed_to_its_path_and_process"
  "e2e cuda_e2e::driver_calls_are_what_the_trainer_did"
  "e2e nccl_e2e::nccl_calls_are_what_the_trainer_did"
)
if [ -n "${MLTRACE_KERNEL_CHECKS:-}" ]; then
  IFS=';' read -r -a checks <<<"$MLTRACE_KERNEL_CHECKS"
fi
tests=$root/target/arm64/tests.txt
if [ $smoke = 0 ] && [ $prepare = 0 ] && [ ! -s "$tests" ]; then
  echo "test-arm64: no aarch64 test binaries ($tests; scripts/arm64/build.sh --tests builds them)" >&2; exit 1
fi

run_guest() {
  local s=$1 kdir=$2 v res=$out/$1 cpu=cortex-a57
  v=$(basename "$kdir")
  rm -rf "$res" && mkdir -p "$res"
  # kernel-guest.sh's smoke: doctor, the routes it loads, one recording of
  # a multi-process workload (sh, dd, sync, cat) on a scratch ext4 disk,
  # exported and summed by stats --json (checked here below).
  {
    echo "BIN=$bin"
    echo "RES=$res"
    echo "SMOKE=1"
    echo "KDIR=$kdir"
    if [ $smoke = 1 ]; then
      echo "TESTS=/dev/null"
    else
      echo "TESTS=/src/target/arm64/tests.txt"
      echo "TARGET_TMP=/src/target/arm64/aarch64-unknown-linux-gnu/tmp"
    fi
    # Every route's load in doctor; the checks on the fast route (record's own choice).
    if [ $smoke = 1 ]; then echo "MLTRACE_KERNEL_ROUTES=\"${MLTRACE_KERNEL_ROUTES:-}\""
    else echo "MLTRACE_KERNEL_ROUTES=\"${MLTRACE_KERNEL_ROUTES:-fast}\""; fi
  } >"$res/env"
  if [ $smoke = 1 ]; then : ; else printf '%s\n' "${checks[@]}"; fi >"$res/checks"
  # 16 KiB pages need a CPU with the 16 KiB granule (virtme-ng's
  # cortex-a57 has only 4 and 64 KiB): QEMU's max, without the costly
  # emulation of pointer authentication.
  case $v in *16k*) cpu=max,pauth-impdef=on ;; esac
  # virtme-ng takes a foreign root's modules from its /lib/modules.
  mkdir -p "$groot/usr/lib/modules"
  [ -e "$groot/usr/lib/modules/$v" ] || cp -al "$kdir/lib/modules/$v" "$groot/usr/lib/modules/$v"
  # The guest's root is read-only: the shared folders' mount points first.
  # (Only the scripts and the binary's folder of the repository: a
  # read-only folder above the results' would hide them.)
  mkdir -p "$groot$root/scripts" "$groot$(dirname "$bin")" "$groot$kdir" "$groot$res" "$groot/src" "$root/target/arm64/aarch64-unknown-linux-gnu/tmp"
  local limit=${MLTRACE_GUEST_LIMIT:-3000} t0=$SECONDS
  truncate -s 0 "$res/disk.img" && truncate -s 2G "$res/disk.img"
  echo "test-arm64: booting $v under qemu-system-aarch64 (-cpu $cpu; full emulation, several minutes)" >&2
  PATH=$cache/vng/bin:$PATH timeout $limit vng --arch arm64 --root "$groot" --disable-kvm \
    --qemu-opts="-accel tcg,thread=single -cpu $cpu" \
    --run "$kdir/boot/vmlinuz-$v" --memory 4G --cpus 2 \
    --user root --rodir "$root/scripts=$root/scripts" \
    --rodir "$(dirname "$bin")=$(dirname "$bin")" --rodir "$kdir=$kdir" --rodir "/src=$root" --rwdir "$res=$res" --disk "$res/disk.img" \
    --exec "getconf PAGESIZE >$res/pagesize; sh $root/scripts/kernel-guest.sh $res/env" >"$res/console.log" 2>&1 || true
  echo "test-arm64: $v done in $((SECONDS - t0)) s" >&2
  rm -f "$res/disk.img"
  [ -f "$res/finished" ] || echo "$v - fail guest the guest stopped before its last check (see $res/console.log)" >>"$res/results.txt"
  echo "$v - info page-size $(cat "$res/pagesize" 2>/dev/null || echo unknown)" >>"$res/results.txt"
  grep -E '^(per-call|fast|compat) route' "$res/doctor.txt" 2>/dev/null |
    awk -v v="$v" '{ printf "%s %s info doctor %s\n", v, $1, $3 }' >>"$res/results.txt"
}

for s in "${series[@]}"; do
  run_guest "$s" "$(kernel_dir "$s")"
done

# Each kernel's recording, exported there, loaded here in Perfetto's own
# importer; its processes' reads against the kernel's /proc/PID/io (as
# test-kernels.sh does for x86_64's kernels).
tools=${MLTRACE_TOOLS_DIR:-$root/target/test-tools}
tp=${MLTRACE_PERFETTO_TP:-$root/tests/tools/tp.js}
[ -n "${MLTRACE_PERFETTO_TP:-}" ] || [ -f "$tools/perfetto/engine_bundle.js" ] || tp=$tools/perfetto/engine_bundle.js
for s in "${series[@]}"; do
  res=$out/$s
  grep -q ' pass record-export' "$res/results.txt" || continue
  k=$(awk 'NR == 1 { print $1 }' "$res/results.txt")
  python3 - "$res" "$k" >>"$res/results.txt" <<'PY'
import json, sys
res, k = sys.argv[1], sys.argv[2]
procs = json.load(open(f"{res}/smoke.json"))["processes"]
reads = sum(p["reads"] for p in procs)
bad = [p["pid"] for p in procs if (p.get("kernel") or {}).get("check") != "match"]
if bad or not procs:
    print(f"{k} - fail proc-pid-io processes {bad} of {len(procs)} differ from /proc/PID/io")
else:
    print(f"{k} - pass proc-pid-io {len(procs)} processes, {reads} reads, each as /proc/PID/io counts")
PY
  if [ ! -f "$tp" ]; then
    echo "$k - skip perfetto-import no trace processor at $tp (make test-tools)" >>"$res/results.txt"
    continue
  fi
  q="select count(*) as n from slice where name glob 'read *' or name glob 'pread64 *' or name glob 'readv *' or name glob 'preadv*'"
  case $tp in *.js) run_tp=(node "$tp") ;; *) run_tp=("$tp") ;; esac
  if ! "${run_tp[@]}" --strict "$res/smoke.perfetto-trace" "$q" >"$res/tp.txt" 2>&1; then
    echo "$k - fail perfetto-import see $res/tp.txt" >>"$res/results.txt"
    continue
  fi
  python3 - "$res" "$k" >>"$res/results.txt" <<'PY'
import json, sys
res, k = sys.argv[1], sys.argv[2]
procs = json.load(open(f"{res}/smoke.json"))["processes"]
lines = open(f"{res}/tp.txt").read().split("\n")
n = int(lines[lines.index("n") + 1])
reads = sum(p["reads"] for p in procs)
print(f"{k} - {'pass' if n == reads else 'fail'} perfetto-import {n} read slices, stats counts {reads} reads")
PY
done

status=0
{
  printf '%-28s %-8s %-6s %s\n' kernel route result check
  for s in "${series[@]}"; do
    while read -r k route result check rest; do
      printf '%-28s %-8s %-6s %s %s\n' "$k" "$route" "$result" "$check" "$rest"
    done <"$out/$s/results.txt"
  done
} | tee "$out/report.txt"
grep -q ' fail ' "$out/report.txt" && status=1
echo "test-arm64: $(grep -c ' pass ' "$out/report.txt") passed, $(grep -c ' fail ' "$out/report.txt") failed, \
$(grep -c ' skip ' "$out/report.txt") skipped (report: $out/report.txt)"
exit $status
