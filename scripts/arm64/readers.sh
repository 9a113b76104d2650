#!/usr/bin/env bash
# The readers of the aarch64 build against x86_64's: every output the golden
# test holds to tests/golden/digests (Perfetto, Chrome JSON, Parquet, the
# report, stats, stats --json) of tests/golden/*.bin, made by
# target/aarch64-unknown-linux-gnu/release/mltrace under qemu-user, must
# have the same sha256 as the x86_64 build's (the digests file).
#
#   scripts/arm64/readers.sh        (after scripts/arm64/build.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
bin=$root/target/aarch64-unknown-linux-gnu/release/mltrace
[ -x "$bin" ] || { echo "arm64-readers: no $bin (make arm64)" >&2; exit 1; }
command -v qemu-aarch64-static >/dev/null || { echo "arm64-readers: needs qemu-user-static" >&2; exit 1; }
# Its loader and libraries (libc, libelf, zlib) from the toolchain's chroot.
export QEMU_LD_PREFIX=${MLTRACE_CACHE:-$HOME/.cache/mltrace}/arm64/sid
run=(qemu-aarch64-static)
out=$root/target/arm64-readers
rm -rf "$out" && mkdir -p "$out"
cd tests/golden
for l in demo summary stacks gil cuda; do
  b=$l.bin
  "${run[@]}" "$bin" export "$b" -o "$out/$l.perfetto-trace"
  "${run[@]}" "$bin" export --chrome "$b" -o "$out/$l.chrome.json"
  "${run[@]}" "$bin" export --parquet "$b" -o "$out/$l.parquet"
  "${run[@]}" "$bin" report "$b" -o "$out/$l.html"
  "${run[@]}" "$bin" stats "$b" >"$out/$l.stats.txt"
  "${run[@]}" "$bin" stats --json "$b" >"$out/$l.stats.json"
done
cd "$out"
find . -type f | sed 's#^\./##' | LC_ALL=C sort | xargs sha256sum >"$out.digests"
if diff <(LC_ALL=C sort -k2 "$root/tests/golden/digests") <(LC_ALL=C sort -k2 "$out.digests") >"$out.diff"; then
  echo "arm64-readers: all $(wc -l <"$out.digests") outputs of tests/golden's logs equal x86_64's (tests/golden/digests)"
else
  echo "arm64-readers: outputs differ from tests/golden/digests:" >&2
  cat "$out.diff" >&2
  exit 1
fi
