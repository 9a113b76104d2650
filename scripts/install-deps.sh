#!/usr/bin/env bash
# Installs what building and testing mltrace needs on Debian/Ubuntu and is
# missing: clang (BPF target), libelf-dev, zlib1g-dev, pkg-config, make, gcc,
# python3 (the sample workload), util-linux (setpriv), libcap2-bin (setcap) and
# passwd (useradd), used by tests; python3-venv, node and npm, which fill the
# tests' own tools (scripts/test-tools.sh), and chromium, which renders the
# HTML report in report_e2e.
# With --wheel, also what `make wheel` needs: the autotools, flex, bison and
# gawk that libbpf-sys's vendored elfutils (libelf) build runs, and venv.
# Idempotent; uses sudo when not root; never prompts.
set -euo pipefail

missing=()
# With --kernels, what `make test-kernels` (and make test's 5.10 part)
# boots other kernels with: QEMU, a static busybox for virtme-ng's init,
# kmod for the kernels' modules, mkfs.ext4 for the scratch disk.
if [ "${1:-}" = --kernels ]; then
  command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
  [ -x /bin/busybox ] || [ -x /usr/bin/busybox ] || missing+=(busybox-static)
  command -v depmod >/dev/null || missing+=(kmod)
  command -v mkfs.ext4 >/dev/null || missing+=(e2fsprogs)
fi
if [ "${1:-}" = --wheel ]; then
  for tool in autoconf automake autopoint flex bison gawk; do
    command -v $tool >/dev/null || missing+=($tool)
  done
  python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
fi
command -v clang >/dev/null || missing+=(clang)
command -v llvm-strip >/dev/null || missing+=(llvm)
command -v pkg-config >/dev/null || missing+=(pkg-config)
pkg-config --exists libelf 2>/dev/null || missing+=(libelf-dev)
pkg-config --exists zlib 2>/dev/null || missing+=(zlib1g-dev)
command -v make >/dev/null || missing+=(make)
command -v cc >/dev/null || missing+=(gcc)
command -v python3 >/dev/null || missing+=(python3)
command -v setpriv >/dev/null || missing+=(util-linux)
command -v setcap >/dev/null || missing+=(libcap2-bin)
command -v useradd >/dev/null || missing+=(passwd)
python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
[ -x /usr/bin/chromium ] || missing+=(chromium)

if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null; then
  echo "cargo is missing: install Rust from https://rustup.rs (curl https://sh.rustup.rs -sSf | sh)" >&2
  exit 1
fi
