# The two commands of the README:
#   make demo   records the bundled sample workload and exports it for Perfetto
#   make test   runs the whole test suite (what CI runs)

CARGO  ?= cargo
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# The interpreter itself, not a pyenv/asdf shim (which would show up as
# extra processes in the trace).
PYTHON := $(shell python3 -c 'import sys; print(sys.executable)' 2>/dev/null || echo python3)
DEMO   := out/demo

.PHONY: deps build demo test test-tools lint fuzz bench soak clean test-kernels test-kernels-smoke wheel-deps wheel dist check-wheel \
	arm64 test-arm64

deps:
	@scripts/install-deps.sh

build: deps
	$(CARGO) build --release -p mltrace

demo: build
	rm -rf $(DEMO) && mkdir -p $(DEMO)
	$(SUDO) ./target/release/mltrace record -f -o $(DEMO)/demo.bin -- \
		$(PYTHON) samples/dataloader/train.py --data-dir $(DEMO)/data
	./target/release/mltrace export $(DEMO)/demo.bin -o $(DEMO)/demo.perfetto-trace
	./target/release/mltrace stats $(DEMO)/demo.bin
	@echo
	@echo "Trace written to $(DEMO)/demo.perfetto-trace"
	@echo "Open https://ui.perfetto.dev, click 'Open trace file' and pick it (nothing is uploaded)."

lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# The tests' own tools (Perfetto's importer, Python and Node packages),
# pinned, into target/test-tools ($MLTRACE_TOOLS_DIR): nothing is
# installed outside the tree. A check that had to skip says so in
# target/test-tools/skipped.txt, printed at the end (in CI a missing tool
# fails its test).
TOOLS := $(or $(MLTRACE_TOOLS_DIR),target/test-tools)
test-tools: deps
	PYTHON=$(PYTHON) scripts/test-tools.sh

test: lint test-tools
	@rm -f $(TOOLS)/skipped.txt
	$(CARGO) build --workspace --bins
	$(CARGO) test --workspace || { scripts/test-tools.sh skipped; exit 1; }
	$(MAKE) test-kernels-smoke || { scripts/test-tools.sh skipped; exit 1; }
	$(MAKE) fuzz
	@scripts/test-tools.sh skipped

# Debian's 5.10, 6.1 and 6.12 booted under QEMU (full emulation), each
# running doctor and the end-to-end checks on every syscall route it has,
# with the binary built here; then the same checks on this machine's kernel.
# Kernels are cached in ~/.cache/mltrace (MLTRACE_CACHE). Root; ~30 min.
test-kernels: deps
	$(SUDO) scripts/test-kernels.sh 5.10 6.1 6.12 host

# The oldest kernel only (5.10, a few minutes): doctor, one recording
# checked against /proc/PID/io, exported and loaded in Perfetto's importer.
test-kernels-smoke:
	@if [ -n "$$MLTRACE_SKIP_BPF_TESTS" ]; then \
		echo "SKIPPED test-kernels-smoke: MLTRACE_SKIP_BPF_TESTS is set"; \
	else $(SUDO) scripts/test-kernels.sh --smoke; fi

# The log reader against arbitrary bytes, for FUZZ_SECONDS per target.
# cargo fuzz needs nightly-only sanitizer flags; RUSTC_BOOTSTRAP=1 lets the
# one (stable) toolchain accept them, for this build only. Crashes land in
# fuzz/artifacts/; once fixed, keep them in crates/log/tests/fuzz_regressions/.
FUZZ_SECONDS ?= 30
fuzz: deps
	@command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked
	rm -rf fuzz/seeds && $(CARGO) run -q -p mltrace-log --example seed_logs -- fuzz/seeds
	mkdir -p fuzz/corpus/log_reader fuzz/corpus/frame_payload
	cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run log_reader corpus/log_reader seeds -- -max_total_time=$(FUZZ_SECONDS)
	cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run frame_payload corpus/frame_payload -- -max_total_time=$(FUZZ_SECONDS)

# Overhead, rates, sizes and export speed against the alternatives, in one
# table (needs root; installs bpftrace and strace for their columns).
bench: build
	@command -v bpftrace >/dev/null && command -v strace >/dev/null || \
		{ $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq bpftrace strace >/dev/null; } || \
		echo "bench: could not install bpftrace/strace; their columns will be skipped"
	$(CARGO) build --release -p mltrace-bench
	$(SUDO) ./target/release/mltrace-bench

# A recorded run of ~42M events exported into an overview and parts, each
# loaded in Perfetto's importer, the parts' syscalls checked against the
# log's, and the overview and a part rendered in the real UI (root; ~10 min).
soak: build
	$(SUDO) scripts/soak-big-run.sh

# The wheel (`mltrace-ebpf`: PyPI's `mltrace` is another project, see
# docs/python.md): one binary for x86_64 Linux with glibc 2.17+ (libbpf,
# libelf and zlib linked in: the cli's `static` feature), and the Python
# module in python/mltrace_ebpf. maturin and zig (zig cc links
# against glibc 2.17's symbols) come pinned from PyPI into a venv under
# target/; the build has its own target dir, as its C is built by zig.
MATURIN_VERSION := 1.16.0
ZIG_VERSION     := 0.17.1
WHEEL_VENV      := target/wheel-venv
VERSION         := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)

wheel-deps: deps
	@scripts/install-deps.sh --wheel
	@$(WHEEL_VENV)/bin/python -c 'import maturin, ziglang' 2>/dev/null && \
		$(WHEEL_VENV)/bin/pip freeze | grep -qx 'maturin==$(MATURIN_VERSION)' && \
		$(WHEEL_VENV)/bin/pip freeze | grep -qx 'ziglang==$(ZIG_VERSION)' || \
		{ python3 -m venv $(WHEEL_VENV) && \
		  $(WHEEL_VENV)/bin/pip install -q maturin==$(MATURIN_VERSION) ziglang==$(ZIG_VERSION); }

wheel: wheel-deps
	rm -f dist/mltrace_ebpf-$(VERSION)-*.whl
	CARGO_TARGET_DIR=$(CURDIR)/target/wheel PATH="$(CURDIR)/$(WHEEL_VENV)/bin:$$PATH" \
		maturin build --release --zig --compatibility manylinux2014 \
		--target x86_64-unknown-linux-gnu -o dist

# The wheel's binary, as a release artefact with its checksum.
dist: wheel
	$(WHEEL_VENV)/bin/python -c 'import sys, zipfile; \
		z = zipfile.ZipFile(sys.argv[1]); \
		n = [x for x in z.namelist() if x.endswith(".data/scripts/mltrace")][0]; \
		open(sys.argv[2], "wb").write(z.read(n))' \
		dist/mltrace_ebpf-$(VERSION)-*.whl dist/mltrace-$(VERSION)-x86_64-linux
	chmod 755 dist/mltrace-$(VERSION)-x86_64-linux
	cd dist && sha256sum mltrace-$(VERSION)-x86_64-linux > mltrace-$(VERSION)-x86_64-linux.sha256
	@cat dist/mltrace-$(VERSION)-x86_64-linux.sha256

# arm64 (aarch64), built on this x86_64 machine in a Debian sid chroot with
# Debian's own Rust and libstd-rust-dev:arm64 (scripts/arm64/toolchain.sh,
# cached in ~/.cache/mltrace/arm64): the release binary,
# target/aarch64-unknown-linux-gnu/release/mltrace, and the aarch64
# manylinux2014 wheel in dist/, the same version and features as x86_64's.
# Root (debootstrap, chroot).
arm64:
	$(SUDO) scripts/arm64/build.sh --wheel

# The aarch64 build's readers against x86_64's (tests/golden's outputs under
# qemu-user, to the byte), then Debian's arm64 6.1, 6.12 and 6.12 with
# 16 KiB pages booted under qemu-system-aarch64 (full emulation), each
# running doctor, a recording checked against /proc/PID/io and loaded in
# Perfetto's importer, and end-to-end checks built for aarch64 (see
# scripts/arm64/test-kernels.sh). Root.
test-arm64: arm64
	$(SUDO) scripts/arm64/build.sh --tests
	$(SUDO) scripts/arm64/readers.sh
	$(SUDO) scripts/arm64/test-kernels.sh

# The wheel in a fresh venv and the binary alone in a Debian bullseye root
# (root; see the script).
check-wheel: dist
	$(SUDO) scripts/check-wheel.sh

clean:
	$(CARGO) clean
	rm -rf out
