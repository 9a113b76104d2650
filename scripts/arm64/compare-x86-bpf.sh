#!/usr/bin/env bash
# Whether the x86_64 BPF programs are what they were at REV: builds
# bpf/{mltrace,probe,floor}.bpf.c for x86 (as libbpf-cargo does: clang -O2
# -g -target bpf -D__TARGET_ARCH_x86) from REV and from the working tree,
# then compares their code with relocations (llvm-objdump -d -r), data and
# maps, and BTF types (bpftool btf dump). The objects' own bytes also
# carry line info (source lines and their numbers), which moves with any
# edit to a file with code, so they are compared last, for information.
#
#   scripts/arm64/compare-x86-bpf.sh REV
set -euo pipefail
cd "$(dirname "$0")/../.."
rev=${1:?usage: compare-x86-bpf.sh REV}
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
inc=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/libbpf-sys-*/libbpf/src | sort -V | tail -1)
mkdir -p "$t/inc/bpf" "$t/old" && cp "$inc"/*.h "$t/inc/bpf/"
git archive "$rev" bpf | tar -x -C "$t/old"
same=1
for n in mltrace probe floor; do
  for side in old new; do
    src=$PWD; [ $side = old ] && src=$t/old
    clang -target bpf -O2 -g -Wall -Wno-unused-function -I "$src/bpf" -I "$t/inc" -fno-stack-protector \
      -D__TARGET_ARCH_x86 -c "$src/bpf/$n.bpf.c" -o "$t/$side-$n.o"
    llvm-objdump -d -r "$t/$side-$n.o" | grep -v 'file format' >"$t/$side-$n.dis"
    llvm-objdump -s -j .maps -j .rodata -j .data -j license "$t/$side-$n.o" 2>/dev/null | grep -v 'file format' >"$t/$side-$n.data"
    bpftool btf dump file "$t/$side-$n.o" format raw >"$t/$side-$n.btf"
  done
  for k in dis data btf; do
    cmp -s "$t/old-$n.$k" "$t/new-$n.$k" || { echo "$n: $k differs from $rev's"; same=0; }
  done
  if cmp -s "$t/old-$n.o" "$t/new-$n.o"; then echo "$n: the object is byte for byte $rev's"
  else echo "$n: code, relocations, data and BTF types as $rev's; the object's line info differs"; fi
done
[ $same = 1 ]
