#!/usr/bin/env bash
# Builds mltrace for aarch64 in the cross toolchain's chroot
# (scripts/arm64/toolchain.sh): the release binary, with the same version
# and features as `make build`'s, into
# target/aarch64-unknown-linux-gnu/release/mltrace; with --wheel, also the
# aarch64 manylinux2014 wheel into dist/, built as `make wheel` builds
# x86_64's (maturin --zig, the cli's `static` feature, pinned maturin and
# ziglang from PyPI in a venv inside the chroot).
#
#   scripts/arm64/build.sh [--wheel] [--tests]
#
# --tests: also the end-to-end test binaries (tests/e2e) for aarch64, which
# scripts/arm64/test-kernels.sh runs in its guests, listed in
# target/arm64/tests.txt (name, then the path the guest sees: the
# repository is /src there as in the chroot).
#
# The chroot's cargo builds into target/arm64/ (its own target dir: another
# rustc than the host's), and the binary is copied to the usual place.
set -euo pipefail
cd "$(dirname "$0")/../.."
wheel=0
tests=0
for a in "$@"; do
  case $a in
    --wheel) wheel=1 ;;
    --tests) tests=1 ;;
    *) echo "arm64-build: unknown argument $a (expected --wheel, --tests)" >&2; exit 2 ;;
  esac
done
tc=scripts/arm64/toolchain.sh
"$tc" >/dev/null
T=aarch64-unknown-linux-gnu
# Cross settings for cargo, cc-rs (libbpf-sys's C) and pkg-config.
cross="export CARGO_TARGET_DIR=/src/target/arm64 \
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
  CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar \
  PKG_CONFIG_ALLOW_CROSS=1 PKG_CONFIG_aarch64_unknown_linux_gnu=/usr/bin/aarch64-linux-gnu-pkg-config \
  PKG_CONFIG_LIBDIR_aarch64_unknown_linux_gnu=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig"
"$tc" run sh -c "$cross; cargo build --locked --release -p mltrace --target $T"
mkdir -p target/$T/release
cp target/arm64/$T/release/mltrace target/$T/release/mltrace
echo "arm64-build: target/$T/release/mltrace: $(file -b target/$T/release/mltrace | cut -d, -f1-2)" >&2

if [ $tests = 1 ]; then
  "$tc" run sh -c "$cross; cargo test --locked -p mltrace-tests --no-run --target $T --message-format=json \
    >/src/target/arm64/tests.json"
  python3 -c 'import json,sys
for l in open(sys.argv[1]):
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "test" in m["target"]["kind"]:
        print(m["target"]["name"], m["executable"])' target/arm64/tests.json >target/arm64/tests.txt
  echo "arm64-build: test binaries: $(cut -d' ' -f1 target/arm64/tests.txt | tr '\n' ' ')" >&2
fi

if [ $wheel = 1 ]; then
  maturin_v=$(sed -n 's/^MATURIN_VERSION *:= *//p' Makefile)
  zig_v=$(sed -n 's/^ZIG_VERSION *:= *//p' Makefile)
  version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
  rm -f dist/mltrace_ebpf-"$version"-*aarch64*.whl
  # The venv lives in the chroot (its Python), the build in target/arm64-wheel.
  # maturin's zig sets the linker and C compiler (glibc 2.17's symbols):
  # none of the cross settings above.
  "$tc" run sh -c "set -e; export CARGO_TARGET_DIR=/src/target/arm64-wheel
    v=/opt/wheel-venv
    \$v/bin/pip freeze 2>/dev/null | grep -qx maturin==$maturin_v && \$v/bin/pip freeze | grep -qx ziglang==$zig_v ||
      { python3 -m venv \$v && \$v/bin/pip install -q maturin==$maturin_v ziglang==$zig_v; }
    PATH=\$v/bin:\$PATH maturin build --release --zig --compatibility manylinux2014 --target $T -o dist"
  ls -1 dist/mltrace_ebpf-"$version"-*aarch64*.whl
fi
