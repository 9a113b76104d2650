#!/usr/bin/env bash
# The arm64 cross toolchain: a Debian sid chroot (debootstrap, minbase) with
# Debian's own Rust (rustc/cargo, and libstd-rust-dev:arm64, which rustup
# cannot fetch here), gcc-aarch64-linux-gnu, clang/llvm for the BPF objects,
# libelf/zlib/zstd for arm64 (libbpf-sys links them) and what the wheel's
# vendored elfutils build runs (autotools, flex, bison, gawk), plus
# qemu-user-static on this machine to run arm64 binaries.
#
#   scripts/arm64/toolchain.sh            make it (or check the cached one); prints its directory
#   scripts/arm64/toolchain.sh run CMD... run CMD in it, in /src (this repository,
#                                         bind-mounted), with the host's cargo registry
#
# Cached in $MLTRACE_CACHE/arm64/sid (default ~/.cache/mltrace), with a stamp
# naming the recipe it was made with; a later run with the same recipe only
# checks it. Needs root (debootstrap, chroot, mounts); never prompts.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
cache=${MLTRACE_CACHE:-$HOME/.cache/mltrace}/arm64
dir=$cache/sid
export DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8

# Host-arch packages (libelf and zlib: the build scripts link libbpf
# too), then arm64 ones (multiarch).
pkgs_host="rustc cargo clang llvm lld gcc libc6-dev pkg-config make ca-certificates python3 python3-venv python3-pip
  libelf-dev zlib1g-dev libzstd-dev
  autoconf automake autopoint libtool flex bison gawk m4 gettext file xz-utils
  gcc-aarch64-linux-gnu libc6-dev-arm64-cross"
pkgs_arm64="libstd-rust-dev:arm64 libelf-dev:arm64 zlib1g-dev:arm64 libzstd-dev:arm64"
recipe() { echo "sid minbase host=[$(echo $pkgs_host)] arm64=[$pkgs_arm64] v1"; }

fail() { echo "arm64-toolchain: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (debootstrap, chroot, mounts)"

mirror() {
  local m
  m=$(grep -rhoE 'https?://[^ ]+/debian/?' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
      | grep -v -e security -e snapshot | head -1)
  echo "${m:-http://deb.debian.org/debian}"
}

umount_under() {
  local d m
  d=$(realpath -m "$1")
  awk -v d="$d" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r |
    while read -r m; do umount -l "$m" || true; done
}
remove() { [ -e "$1" ] || return 0; umount_under "$1"; rm -rf --one-file-system "$1"; }

host_tools() {
  local missing=()
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  [ -x /usr/bin/qemu-aarch64-static ] || missing+=(qemu-user-static)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "arm64-toolchain: installing ${missing[*]}" >&2
    apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
      fail "apt-get install ${missing[*]} failed"
  fi
}

check() {
  chroot "$1" sh -c 'rustc --version && cargo --version && aarch64-linux-gnu-gcc --version | head -1 &&
    clang --version | head -1 && ls /usr/lib/rustlib/aarch64-unknown-linux-gnu/lib/libstd-*.rlib >/dev/null &&
    test -f /usr/lib/aarch64-linux-gnu/libelf.so && test -f /usr/lib/aarch64-linux-gnu/libz.so' >&2 9>&-
}

build() {
  local log=$cache/sid.log t0=$SECONDS
  host_tools
  rm -f "$dir/.mltrace-stamp"
  # The base system first (kept once complete: a failed package step
  # starts again from it), then the toolchain's packages.
  if [ ! -f "$dir/.mltrace-base" ]; then
    remove "$dir"
    mkdir -p "$dir"
    echo "arm64-toolchain: debootstrap sid from $(mirror) (a few minutes; log in $log)" >&2
    debootstrap --variant=minbase sid "$dir" "$(mirror)" >"$log" 2>&1 9>&- ||
      { umount_under "$dir"; tail -n 15 "$log" | sed 's/^/  /' >&2; fail "debootstrap failed (log: $log)"; }
    umount_under "$dir"
    touch "$dir/.mltrace-base"
  fi
  echo "deb $(mirror) sid main" >"$dir/etc/apt/sources.list"
  # The mirror may serve a snapshot whose Release file has expired.
  echo 'Acquire::Check-Valid-Until "false";' >"$dir/etc/apt/apt.conf.d/99mltrace"
  chroot "$dir" dpkg --add-architecture arm64
  mount -t proc proc "$dir/proc"
  echo "arm64-toolchain: installing the toolchain in the chroot (log in $log)" >&2
  if ! chroot "$dir" sh -c "apt-get update -qq && apt-get install -y -qq --no-install-recommends $(echo $pkgs_host) $pkgs_arm64" \
      >>"$log" 2>&1 9>&-; then
    umount_under "$dir"; tail -n 15 "$log" | sed 's/^/  /' >&2; fail "apt-get install in the chroot failed (log: $log)"
  fi
  umount_under "$dir"
  rm -rf "$dir"/var/cache/apt/archives/*.deb
  check "$dir" || fail "the new chroot fails its check"
  recipe >"$dir/.mltrace-stamp"
  echo "arm64-toolchain: made in $((SECONDS - t0)) s, $(du -sh --one-file-system "$dir" | cut -f1)" >&2
}

ensure() {
  mkdir -p "$cache"
  exec 9>"$cache/.lock-sid"
  flock 9 || fail "lock $cache/.lock-sid failed"
  if [ "$(cat "$dir/.mltrace-stamp" 2>/dev/null)" != "$(recipe)" ]; then
    build
  elif ! check "$dir"; then
    echo "arm64-toolchain: the cached chroot fails its check, making it again" >&2
    build
  fi
  host_tools
  exec 9>&-
}

# Runs a command in the chroot with the repository at /src and the host's
# cargo registry (crates are fetched the way the host fetches them), in a
# mount namespace of its own: its mounts go with it, and two runs at once
# (a build and the wheel's) do not unmount each other's.
run() {
  local reg=${CARGO_HOME:-$HOME/.cargo}/registry
  mkdir -p "$reg" "$dir/src" "$dir/root/.cargo/registry"
  cp /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
  # The CAs this machine trusts (a proxy's own, where there is one), for
  # pip and cargo in the chroot.
  [ -f /etc/ssl/certs/ca-certificates.crt ] &&
    cp /etc/ssl/certs/ca-certificates.crt "$dir/etc/ssl/host-ca-certificates.crt"
  unshare --mount --propagation private "$0" _inside "$reg" "$@"
}

inside() {
  local reg=$1
  shift
  mount --bind "$root" "$dir/src"
  mount --bind "$reg" "$dir/root/.cargo/registry"
  mount -t proc proc "$dir/proc"
  mount --bind /dev "$dir/dev"
  local ca=/etc/ssl/host-ca-certificates.crt
  [ -f "$dir$ca" ] || ca=
  exec chroot "$dir" env -i HOME=/root PATH=/usr/local/bin:/usr/bin:/bin LC_ALL=C.UTF-8 TERM=dumb \
    ${http_proxy:+http_proxy=$http_proxy} ${https_proxy:+https_proxy=$https_proxy} \
    ${ca:+SSL_CERT_FILE=$ca PIP_CERT=$ca CARGO_HTTP_CAINFO=$ca} \
    sh -c 'cd /src && exec "$@"' sh "$@"
}

case "${1:-}" in
  "") ensure; echo "$dir" ;;
  run) shift; [ -f "$dir/.mltrace-stamp" ] || ensure; run "$@" ;;
  _inside) shift; inside "$@" ;;
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2 ;;
  *) fail "unknown argument $1 (expected nothing, or run CMD...)" ;;
esac
