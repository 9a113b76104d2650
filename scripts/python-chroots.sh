#!/usr/bin/env bash
# Makes chroots with Debian's own CPython (and numpy) for the Python stack
# tests: each suite's interpreter as Debian builds it, not pyenv's.
#
#   scripts/python-chroots.sh [bullseye|trixie|sid ...]     (default: all three)
#
#   bullseye  python3.9   python3-numpy
#   trixie    python3.13  python3-numpy
#   sid       python3.14  (installed by name: sid's default python3 may be
#             another) and python3-numpy, which Debian builds for every
#             supported version
#
# Prints one line per suite on stdout, `SUITE DIR PYTHON` (PYTHON: the
# interpreter's path inside DIR), after checking that
# `chroot DIR PYTHON -c 'import sys, numpy'` runs; everything else goes to
# stderr. The chroots are cached in $MLTRACE_CACHE/pythons/SUITE (default
# ~/.cache/mltrace): debootstrap (minbase) builds one in a temporary
# directory beside it, renamed into place once complete, with a stamp
# (DIR/.mltrace-stamp) naming what it was made with; a later run with the
# same recipe only checks it (well under a second). Needs root (debootstrap,
# chroot); installs debootstrap with apt-get when missing; never prompts.
#
# Running a command in one (as a test should):
#   cp workload.py DIR/tmp/ && chroot DIR PYTHON /tmp/workload.py ARGS...
# Paths the workload sees (and prints) are inside the chroot (/tmp/...);
# one that reads /proc/PID/fd from outside (strace -y) names the same file
# with DIR in front, so a test matches on the part after DIR or knows
# which its tracer gives. /proc is not needed: the interpreter,
# numpy, threads, os.fork, multiprocessing's spawn and forkserver and
# os.cpu_count all work without it (tests/workloads/py_stacks.py runs the
# same with and without; CPython 3.12+'s os.fork reads /proc/self/stat
# when it is there, to warn about threads, and falls back when not). A
# test whose workload reads /proc itself mounts it and unmounts it after:
# `mount -t proc proc DIR/proc; ...; umount DIR/proc`. This script leaves
# no mounts behind, and removes any that a killed build left.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${MLTRACE_CACHE:-$HOME/.cache/mltrace}/pythons

declare -A python=([bullseye]=/usr/bin/python3.9 [trixie]=/usr/bin/python3.13 [sid]=/usr/bin/python3.14)
declare -A include=([bullseye]=python3,python3-numpy [trixie]=python3,python3-numpy [sid]=python3.14,python3-numpy)

suites=()
for a in "$@"; do
  case $a in
    bullseye|trixie|sid) suites+=("$a") ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 0 ;;
    *) echo "python-chroots: unknown argument $a (expected bullseye, trixie, sid)" >&2; exit 2 ;;
  esac
done
[ ${#suites[@]} -gt 0 ] || suites=(bullseye trixie sid)
[ "$(id -u)" = 0 ] || { echo "python-chroots: needs root (debootstrap, chroot)" >&2; exit 1; }
exec </dev/null
export DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8

fail() { echo "python-chroots: $1: $2" >&2; exit 1; }

# What a chroot is made with: a cached one made otherwise is made again.
recipe() { echo "variant=minbase include=${include[$1]} python=${python[$1]}"; }

# Unmounts whatever is mounted at or under $1 (a build killed while
# debootstrap had /proc or /sys mounted in its target), deepest first.
umount_under() {
  local d m
  d=$(realpath -m "$1")
  awk -v d="$d" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r |
    while read -r m; do umount -l "$m" || true; done
}

# Removes a directory that may hold mounts, never crossing into them.
remove() {
  [ -e "$1" ] || return 0
  umount_under "$1"
  rm -rf --one-file-system "$1"
}

need_debootstrap() {
  command -v debootstrap >/dev/null && return 0
  echo "python-chroots: installing debootstrap" >&2
  apt-get update -qq >&2 || fail all "apt-get update failed"
  apt-get install -y -qq --no-install-recommends debootstrap >/dev/null ||
    fail all "apt-get install debootstrap failed"
}

# The machine's own Debian mirror (as test-kernels.sh picks it).
mirror() {
  local m
  m=$(grep -rhoE 'https?://[^ ]+/debian/?' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
      | grep -v -e security -e snapshot | head -1)
  echo "${m:-http://deb.debian.org/debian}"
}

# Runs the interpreter of a finished chroot once: sys and numpy import.
# On failure, what it said is in $checked.
check() {
  checked=$(chroot "$1" "${python[$2]}" -c 'import sys, numpy; print(sys.version.split()[0], "numpy", numpy.__version__)' 2>&1 9>&-) ||
    return 1
  echo "python-chroots: $2: Python $checked" >&2
}
check_says() { echo "chroot $1 ${python[$2]} -c 'import sys, numpy' failed: $checked"; }

build() {
  local s=$1 dir=$2 tmp log t0=$SECONDS
  need_debootstrap
  # Beside the final directory, so that the rename is atomic.
  tmp=$(mktemp -d "$cache/.build-$s.XXXXXX")
  chmod 755 "$tmp"
  log=$cache/$s.log
  trap 'remove "$tmp"' EXIT
  echo "python-chroots: $s: debootstrap from $(mirror) (a minute or two; log in $log)" >&2
  if ! debootstrap --variant=minbase --include="${include[$s]}" "$s" "$tmp" "$(mirror)" >"$log" 2>&1 9>&-; then
    tail -n 15 "$log" | sed 's/^/  /' >&2
    fail "$s" "debootstrap failed (log: $log)"
  fi
  umount_under "$tmp"
  [ -x "$tmp${python[$s]}" ] || fail "$s" "install: no ${python[$s]} in the chroot (log: $log)"
  # The downloaded packages and apt lists: not needed to run Python.
  rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/* "$tmp"/debootstrap
  check "$tmp" "$s" || fail "$s" "check: $(check_says "$tmp" "$s")"
  recipe "$s" >"$tmp/.mltrace-stamp"
  remove "$dir"
  mv -T "$tmp" "$dir" || fail "$s" "rename of $tmp to $dir failed"
  trap - EXIT
  echo "python-chroots: $s: made in $((SECONDS - t0)) s, $(du -sh --one-file-system "$dir" | cut -f1)" >&2
}

mkdir -p "$cache"
for s in "${suites[@]}"; do
  dir=$cache/$s
  # One build of a suite at a time (two test runs starting together).
  exec 9>"$cache/.lock-$s"
  if ! flock -n 9; then
    echo "python-chroots: $s: waiting for another run that holds it" >&2
    flock 9 || fail "$s" "lock $cache/.lock-$s failed"
  fi
  # Leftovers of builds that were killed.
  for t in "$cache/.build-$s".*; do [ -e "$t" ] && remove "$t"; done
  if [ "$(cat "$dir/.mltrace-stamp" 2>/dev/null)" != "$(recipe "$s")" ]; then
    build "$s" "$dir"
  elif ! check "$dir" "$s"; then
    echo "python-chroots: $s: the cached chroot fails its check, making it again: $(check_says "$dir" "$s")" >&2
    build "$s" "$dir"
  fi
  exec 9>&-
  echo "$s $dir ${python[$s]}"
done
