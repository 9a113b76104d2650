# The two commands of the README:
#   make demo   records the bundled sample workload and exports it for Perfetto
#   make test   runs the whole test suite (what CI runs)

CARGO  ?= cargo
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# The interpreter itself, not a pyenv/asdf shim (which would show up as
# extra processes in the trace).
PYTHON := $(shell python3 -c 'import sys; print(sys.executable)' 2>/dev/null || echo python3)
DEMO   := out/demo

.PHONY: deps build demo test lint clean

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

test: lint
	$(CARGO) build --workspace --bins
	$(CARGO) test --workspace

clean:
	$(CARGO) clean
	rm -rf out
