#!/usr/bin/env bash
# Boots Debian's kernels under QEMU (full emulation) and runs mltrace inside
# each with the one binary built here: `doctor`, then the end-to-end checks
# that matter on every kernel, on each syscall route the kernel has.
#
#   scripts/test-kernels.sh [--smoke] [--report] [SERIES...]   (SERIES: 5.10 6.1 6.12 host)
#
# --report: no runs; the Perfetto check and the table of the last ones.
# --smoke: 5.10 only, doctor + one recording checked against /proc/PID/io
# and a process that becomes another user let go (recording as a user),
# its Perfetto export left in $OUT/smoke for the caller (make test) to load.
# Kernels, virtme-ng and the apt lists are cached in $MLTRACE_CACHE
# (default ~/.cache/mltrace); the per-run results go to target/test-kernels.
# The guest sees this machine's root read-only (so the host build runs as
# is), a scratch ext4 disk for real block I/O, and $OUT read-write.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cache=${MLTRACE_CACHE:-$HOME/.cache/mltrace}
out=$root/target/test-kernels
smoke=0
report_only=0
series=()
for a in "$@"; do
  case $a in
    --smoke) smoke=1 ;;
    --report) report_only=1 ;;
    5.10|6.1|6.12|host) series+=("$a") ;;
    *) echo "test-kernels: unknown argument $a (expected --smoke, 5.10, 6.1, 6.12, host)" >&2; exit 2 ;;
  esac
done
[ ${#series[@]} -gt 0 ] || { [ $smoke = 1 ] && series=(5.10) || series=(5.10 6.1 6.12 host); }

# Debian packages, pinned; when the archive has moved on, the newest of the
# same series is taken and named in the report.
declare -A pin=(
  [5.10]=linux-image-5.10.0-32-amd64-unsigned
  [6.1]=linux-image-6.1.0-50-amd64-unsigned
  [6.12]=linux-image-6.12.95+deb12-amd64-unsigned
)
declare -A like=(
  [5.10]='^linux-image-5\.10\.0-[0-9]+-amd64-unsigned$'
  [6.1]='^linux-image-6\.1\.0-[0-9]+-amd64-unsigned$'
  [6.12]='^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$'
)

need() {
  # System packages come from the one script that installs them.
  "$root/scripts/install-deps.sh" --kernels
  if [ ! -x "$cache/vng/bin/vng" ]; then
    python3 -m venv "$cache/vng"
    "$cache/vng/bin/pip" install -q virtme-ng==1.42
  fi
}

# A private apt configuration: the machine's own sources stay untouched.
apt_o=()
apt_setup() {
  local a=$cache/apt
  mkdir -p "$a/lists/partial" "$a/debs"
  local m
  m=$(grep -rhoE 'https?://[^ ]+/debian/?' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
      | grep -v -e security -e snapshot | head -1)
  m=${m:-http://deb.debian.org/debian}
  printf 'deb %s bullseye main\ndeb %s bookworm main\ndeb %s bookworm-backports main\n' "$m" "$m" "$m" >"$a/sources.list"
  apt_o=(-o "Dir::Etc::SourceList=$a/sources.list" -o Dir::Etc::SourceParts=/dev/null -o "Dir::State::Lists=$a/lists"
         -o Debug::NoLocking=1)
  if [ -z "$(ls "$a/lists" 2>/dev/null | grep -v partial)" ] || [ -n "$(find "$a/lists" -maxdepth 0 -mtime +7)" ]; then
    apt-get "${apt_o[@]}" update -qq >&2
  fi
}

# Unpacks the kernel of a series into the cache; prints its directory.
kernel_dir() {
  local s=$1 pkg=${pin[$1]} v d
  if ! ls "$cache/apt/debs/$pkg"_*.deb >/dev/null 2>&1; then
    [ ${#apt_o[@]} -gt 0 ] || apt_setup
    if ! apt-cache "${apt_o[@]}" show "$pkg" >/dev/null 2>&1; then
      pkg=$(apt-cache "${apt_o[@]}" pkgnames linux-image- | grep -E "${like[$s]}" | sort -V | tail -1)
      [ -n "$pkg" ] || { echo "test-kernels: no $s kernel in Debian's archive" >&2; return 1; }
      echo "test-kernels: $s: ${pin[$s]} is gone from the archive, using $pkg" >&2
    fi
    # Its progress to stderr: this function's stdout is the directory
    # (a first download's "Get:1 ... (" lines once made the guest's
    # kernel path and broke vng's command line).
    (cd "$cache/apt/debs" && apt-get "${apt_o[@]}" download "$pkg" 2>/dev/null >&2)
  fi
  local deb
  deb=$(ls "$cache/apt/debs/$pkg"_*.deb 2>/dev/null | head -1)
  [ -n "$deb" ] || deb=$(ls "$cache/apt/debs"/linux-image-"$s"*.deb | sort -V | tail -1)
  v=$(basename "$deb" | sed -E 's/^linux-image-(.*)-unsigned_.*/\1/')
  d=$cache/kernels/$v
  if [ ! -f "$d/boot/vmlinuz-$v" ]; then
    rm -rf "$d" && mkdir -p "$d"
    dpkg-deb -x "$deb" "$d" >&2
    depmod -a -b "$d" "$v" >&2
  fi
  echo "$d"
}

build() {
  # The smoke run (in make test) uses the debug build make test just made.
  if [ $smoke = 1 ]; then bin=$root/target/debug/mltrace; cargo build -q -p mltrace
  else bin=$root/target/release/mltrace; cargo build --release -q -p mltrace; fi
  # The end-to-end test binaries, as built here (they run the release binary).
  cargo test -q -p mltrace-tests --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "test" in m["target"]["kind"]:
        print(m["target"]["name"], m["executable"])' >"$out/tests.txt"
}

# What runs in each guest, on each route it has: test-binary test-name.
checks_full=(
  "e2e record_e2e::known_io_is_recorded_exactly_and_matches_proc_pid_io"
  "e2e record_e2e::unrelated_processes_are_not_recorded"
  "e2e accounting_e2e::every_process_matches_the_kernels_own_counts"
  "e2e block_e2e::block_requests_are_exact_attributed_and_match_diskstats"
  "e2e sched_e2e::the_trainer_waits_for_its_worker_as_it_measured"
  "e2e page_cache_e2e::a_file_read_twice_comes_half_from_storage"
  "e2e mapping_e2e::a_cold_mapped_file_is_attributed_to_its_path_and_process"
  "e2e async_io_e2e::io_uring_requests_with_bytes_paths_and_latency"
  "e2e async_io_e2e::libaio_calls_with_fd_path_and_counts"
  "e2e attach_e2e::attaching_records_reads_of_files_opened_before_and_leaves_the_process_running"
  "e2e attach_e2e::a_process_that_becomes_another_user_is_let_go"
  "e2e net_e2e::a_download_is_the_bytes_received_from_its_peer"
  "e2e metadata_e2e::a_walk_over_small_files_is_straces_calls_per_directory"
  "e2e wakeups_e2e::a_trainer_that_sleeps_to_compute_waits_as_it_measured"
  "e2e cuda_e2e::driver_calls_are_what_the_trainer_did"
  "e2e nccl_e2e::nccl_calls_are_what_the_trainer_did"
  "e2e summary_e2e::many_files_summed_again_and_again_lose_nothing"
  "e2e summary_e2e::an_idle_threads_sums_come_in_their_seconds_turn_and_at_the_end"
  "e2e sched_e2e::summary_detail_keeps_the_verdict_per_epoch_and_per_rank"
  "e2e wakeups_e2e::a_trainer_that_sleeps_to_compute_in_summary_detail"
  "e2e summary_e2e::an_attached_busy_threads_time_on_cpu_reaches_the_end"
  "e2e py_stacks_e2e::every_read_carries_the_stack_it_was_made_from"
  "e2e py_stacks_e2e::summary_detail_sums_the_reads_of_each_stack"
)
# MLTRACE_KERNEL_ROUTES="per-call": only these routes (kernel-guest.sh).
# MLTRACE_KERNEL_CHECKS="e2e module::test;...": only these (a change to one
# probe, checked on every kernel without the whole list).
if [ -n "${MLTRACE_KERNEL_CHECKS:-}" ]; then
  IFS=';' read -r -a checks_full <<<"$MLTRACE_KERNEL_CHECKS"
fi
checks_smoke=(
  "e2e accounting_e2e::every_process_matches_the_kernels_own_counts"
  "e2e attach_e2e::a_process_that_becomes_another_user_is_let_go"
)

run_guest() {
  local s=$1 kdir=$2 v res=$out/$1
  v=$(basename "$kdir")
  rm -rf "$res" && mkdir -p "$res"
  {
    echo "BIN=$bin"
    echo "RES=$res"
    echo "SMOKE=$smoke"
    echo "TESTS=$out/tests.txt"
    echo "KDIR=$kdir"
    echo "MLTRACE_KERNEL_ROUTES=\"${MLTRACE_KERNEL_ROUTES:-}\""
  } >"$res/env"
  if [ $smoke = 1 ]; then printf '%s\n' "${checks_smoke[@]}"; else printf '%s\n' "${checks_full[@]}"; fi >"$res/checks"
  # The smoke run takes one to two minutes, every check about half an
  # hour. A guest that stops short (seen once: doctor never returned in
  # a 5.10 guest, and an empty results file passed for 0 checks) is
  # booted once more, then fails.
  local limit=3000 try
  [ $smoke = 1 ] && limit=600
  limit=${MLTRACE_GUEST_LIMIT:-$limit}
  for try in 1 2; do
    echo "test-kernels: booting $v (full emulation; a few minutes)" >&2
    local t0=$SECONDS
    rm -f "$res/results.txt" "$res/finished"
    truncate -s 0 "$res/disk.img" && truncate -s 2G "$res/disk.img"
    # One host thread for both vCPUs (QEMU 7.2's multi-threaded TCG kept
    # running a breakpoint the kernel had patched out of __schedule, on
    # both vCPUs, forever: a 5.10 guest hung in about one doctor-and-record
    # round in ten, as BPF attached or detached its tracepoints).
    PATH=$cache/vng/bin:$PATH timeout $limit vng --disable-kvm --qemu-opts="-accel tcg,thread=single" \
      --run "$kdir/boot/vmlinuz-$v" --memory 4G --cpus 2 \
      --user root --rwdir "$res" --disk "$res/disk.img" \
      --exec "sh $root/scripts/kernel-guest.sh $res/env" >"$res/console.log" 2>&1 || true
    echo "test-kernels: $v done in $((SECONDS - t0)) s" >&2
    [ -f "$res/finished" ] && break
    echo "test-kernels: $v: the guest stopped before its last check (try $try; $(cat "$res/results.txt" 2>/dev/null | wc -l) results)" >&2
    # What it did and when (seconds since boot), and what it was doing
    # at its last look: in CI's output, as the clone is gone after it.
    for f in progress.txt watch.txt console.log; do
      [ -f "$res/$f" ] || continue
      echo "test-kernels: $v, try $try, the end of $f:" >&2
      tail -n 60 "$res/$f" | sed 's/^/  | /' >&2
      mv "$res/$f" "$res/try$try-$f"
    done
    # And what else this machine was running (a guest under full
    # emulation slows to a crawl beside a busy process).
    echo "test-kernels: this machine: $(uptime)" >&2
    ps -eo pid,stat,etime,time,pcpu,args --sort=-pcpu | head -n 12 | cut -c 1-160 | sed 's/^/  | /' >&2
  done
  rm -f "$res/disk.img"
  [ -f "$res/finished" ] ||
    echo "$v - fail guest the guest stopped before its last check, twice (see the output above, and $res/try2-*)" >>"$res/results.txt"
}

# The host kernel: the same checks, without a VM.
run_host() {
  local res=$out/host
  rm -rf "$res" && mkdir -p "$res"
  {
    echo "BIN=$bin"
    echo "RES=$res"
    echo "SMOKE=0"
    echo "TESTS=$out/tests.txt"
    echo "HOST=1"
    echo "MLTRACE_KERNEL_ROUTES=\"${MLTRACE_KERNEL_ROUTES:-}\""
  } >"$res/env"
  printf '%s\n' "${checks_full[@]}" >"$res/checks"
  sh "$root/scripts/kernel-guest.sh" "$res/env" || true
}

[ "$(id -u)" = 0 ] || { echo "test-kernels: needs root (BPF, drop_caches)" >&2; exit 1; }
mkdir -p "$out" "$cache" "$root/target/tmp"
if [ $report_only = 0 ]; then
  need
  build
  for s in "${series[@]}"; do
    if [ "$s" = host ]; then run_host; else run_guest "$s" "$(kernel_dir "$s")"; fi
  done
fi

# Each kernel's recording, exported there, loaded here in Perfetto's own
# importer: it loads without import errors, and its read slices are the
# reads `stats` counts, whose processes match the kernel's /proc/PID/io.
# The tests' own trace processor (make test-tools), as the Rust tests use it.
tools=${MLTRACE_TOOLS_DIR:-$root/target/test-tools}
tp=${MLTRACE_PERFETTO_TP:-$root/tests/tools/tp.js}
[ -n "${MLTRACE_PERFETTO_TP:-}" ] || [ -f "$tools/perfetto/engine_bundle.js" ] || tp=$tools/perfetto/engine_bundle.js
for s in "${series[@]}"; do
  res=$out/$s
  [ -f "$res/smoke.perfetto-trace" ] || continue
  # A guest stopped mid-recording leaves part of a trace and no stats.
  grep -q ' pass record-export' "$res/results.txt" || continue
  k=$(awk 'NR == 1 { print $1 }' "$res/results.txt")
  if [ ! -f "$tp" ]; then
    [ "${CI:-}" = true ] && { echo "$k - fail perfetto-import no trace processor at $tp" >>"$res/results.txt"; continue; }
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
st = json.load(open(f"{res}/smoke.json"))
lines = open(f"{res}/tp.txt").read().split("\n")
n = int(lines[lines.index("n") + 1])
reads = sum(p["reads"] for p in st["processes"])
bad = [p["pid"] for p in st["processes"] if (p.get("kernel") or {}).get("check") != "match"]
if bad:
    print(f"{k} - fail proc-pid-io processes {bad} differ from /proc/PID/io")
else:
    print(f"{k} - pass proc-pid-io")
print(f"{k} - {'pass' if n == reads else 'fail'} perfetto-import" + ("" if n == reads else f" {n} read slices, stats counts {reads} reads"))
PY
done

# The report: one line per kernel, route and check.
status=0
{
  printf '%-26s %-10s %-6s %s\n' kernel route result check
  for s in "${series[@]}"; do
    while read -r k route result check rest; do
      printf '%-26s %-10s %-6s %s %s\n' "$k" "$route" "$result" "$check" "$rest"
      [ "$result" != fail ] || status=1
    done <"$out/$s/results.txt"
  done
} | tee "$out/report.txt"
grep -q ' fail ' "$out/report.txt" && status=1
echo "test-kernels: $(grep -c ' pass ' "$out/report.txt") passed, $(grep -c ' fail ' "$out/report.txt") failed, \
$(grep -c ' skip ' "$out/report.txt") skipped (report: $out/report.txt)"
exit $status
