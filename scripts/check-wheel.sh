#!/usr/bin/env bash
# Checks what `make wheel` and `make dist` built, as a user would get it
# (root; `make check-wheel`):
#  1. the dist binary links only glibc, and nothing newer than GLIBC_2.17;
#  2. the wheel, pip-installed with its [pandas] extra into a fresh venv
#     after PyPI's other `mltrace` (pinned: an unrelated project that has
#     the name): `mltrace doctor`, the demo recorded and exported, the
#     Python module's phases read back with mltrace_ebpf.load; both modules
#     import as their own; the command on the PATH is ours (the one
#     installed last: the docs say to keep the two apart);
#  3. the dist binary copied alone into a Debian bullseye root (debootstrap,
#     cached in target/bullseye-root), entered with chroot: doctor, a small
#     workload recorded, exported.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "check-wheel: needs root (BPF)" >&2; exit 1; }

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
bin=dist/mltrace-$version-x86_64-linux
wheel=$(ls -t dist/mltrace_ebpf-"$version"-*.whl 2>/dev/null | head -1)
[ -x "$bin" ] && [ -n "$wheel" ] || { echo "check-wheel: run make dist first" >&2; exit 1; }
work=target/check-wheel
rm -rf "$work" && mkdir -p "$work"
step() { printf '\n== %s\n' "$*"; }

step "1. $bin: dynamic dependencies and glibc symbol versions"
(cd dist && sha256sum -c "$(basename "$bin").sha256")
ldd "$bin"
extra=$(ldd "$bin" | grep -Ev 'linux-vdso|ld-linux-x86-64|lib(c|m|dl|pthread|rt|gcc_s)\.so' || true)
[ -z "$extra" ] || { echo "check-wheel: unexpected libraries: $extra" >&2; exit 1; }
newest=$(objdump -T "$bin" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
echo "newest glibc symbol version: $newest"
[ "$(printf '%s\n' "$newest" GLIBC_2.17 | sort -V | tail -1)" = GLIBC_2.17 ] ||
  { echo "check-wheel: needs $newest, newer than GLIBC_2.17" >&2; exit 1; }

step "2. $wheel in a fresh venv, beside PyPI's other mltrace"
python3 -m venv "$work/venv"
# The other project, pinned, without its dependencies (flask, docker,
# sqlalchemy...): its files are what could clash with ours.
other=mltrace==0.17
"$work/venv/bin/pip" install -q --no-deps "$other"
"$work/venv/bin/pip" install -q "$wheel[pandas]"
mltrace="$PWD/$work/venv/bin/mltrace"
# The venv's python (not what its symlink points at: that has no mltrace).
py="$PWD/$work/venv/bin/python"
"$py" - "$other" <<'EOF'
import importlib.util, sys
ours = importlib.util.find_spec("mltrace_ebpf")
theirs = importlib.util.find_spec("mltrace")
assert ours and ours.origin.endswith("mltrace_ebpf/__init__.py"), ours
assert theirs and theirs.origin.endswith("mltrace/__init__.py"), theirs
text = open(theirs.origin).read()
assert "from mltrace.client import" in text, f"{theirs.origin} is not {sys.argv[1]}'s any more"
import mltrace_ebpf
assert callable(mltrace_ebpf.phase) and callable(mltrace_ebpf.load)
print(f"modules: mltrace_ebpf is ours ({ours.origin}); mltrace is still {sys.argv[1]}'s ({theirs.origin})")
EOF
"$mltrace" --version | grep -q '^mltrace ' || {
  echo "check-wheel: $mltrace is not ours: the other project's command was installed over it" >&2
  exit 1
}
echo "command: $mltrace is ours; $other's own mltrace script, installed before, was replaced:"
echo "         one mltrace command per environment (docs/python.md says to keep the two apart)"
"$mltrace" --version
"$mltrace" doctor
"$mltrace" record -q -f -o "$work/demo.bin" -- "$py" samples/dataloader/train.py --data-dir "$work/data" >"$work/demo.out"
"$mltrace" export "$work/demo.bin" -o "$work/demo.perfetto-trace"
"$mltrace" export --parquet "$work/demo.bin" -o "$work/demo.parquet"
"$mltrace" stats "$work/demo.bin" >"$work/demo.stats" && head -12 "$work/demo.stats"
cat >"$work/phases.py" <<'EOF'
import sys, time, mltrace_ebpf as mltrace
with mltrace.phase("eval", epoch_num=1):
    time.sleep(0.05)
mltrace.mark("accuracy", 0.75)
EOF
"$mltrace" record -q -f -o "$work/phases.bin" -- "$py" "$work/phases.py"
"$mltrace" export --parquet "$work/phases.bin" -o "$work/phases.parquet"
(cd "$work" && "$py" - <<'EOF'
import mltrace_ebpf as mltrace
demo = mltrace.load("demo.parquet")
print("demo tables:", ", ".join(f"{k} ({len(v)} rows)" for k, v in sorted(demo.items())))
assert len(demo["syscalls"]) > 1000, len(demo["syscalls"])
t = mltrace.load("phases.parquet")
print(t["phases"].to_string(), t["marks"].to_string(), sep="\n")
assert list(t["phases"]["name"]) == ["EVAL (epoch 1)"], t["phases"]
assert list(t["marks"]["name"]) == ["accuracy"], t["marks"]
print("installed module: ok")
EOF
)

step "3. $bin alone in a Debian bullseye root"
root=target/bullseye-root
if [ ! -x "$root/usr/bin/python3" ]; then
  command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null
  rm -rf "$root.tmp"
  debootstrap --variant=minbase --include=python3-minimal,libpython3.9-stdlib bullseye "$root.tmp" \
    http://deb.debian.org/debian
  mv "$root.tmp" "$root"
fi
mounts=()
cleanup() {
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount "${mounts[i]}" || umount -l "${mounts[i]}"; done
}
trap cleanup EXIT
mnt() { mount "$@" && mounts+=("${@: -1}"); }
mnt -t proc proc "$root/proc"
mnt -t sysfs sysfs "$root/sys"
mnt -t tracefs tracefs "$root/sys/kernel/tracing"
mnt -t bpf bpf "$root/sys/fs/bpf"
mnt --bind /dev "$root/dev"
install -m 0755 "$bin" "$root/usr/local/bin/mltrace"
rm -rf "$root/work" && mkdir -p "$root/work"
cp samples/dataloader/train.py "$root/work/"
in_root() { chroot "$root" env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root "$@"; }
in_root ldd --version >"$work/ldd-version" && head -1 "$work/ldd-version"
in_root ldd /usr/local/bin/mltrace
in_root mltrace doctor
in_root sh -c 'cd /work && mltrace record -q -f -o demo.bin -- python3 train.py --data-dir data --epochs 1 >demo.out'
in_root mltrace export /work/demo.bin -o /work/demo.perfetto-trace
in_root mltrace export --parquet /work/demo.bin -o /work/demo.parquet
in_root mltrace stats /work/demo.bin >"$work/bullseye.stats" && head -12 "$work/bullseye.stats"
ls -l "$root/work/demo.perfetto-trace" "$root/work/demo.parquet"

printf '\ncheck-wheel: all checks passed\n'
