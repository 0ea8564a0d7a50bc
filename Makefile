# `make run`: build, then serve ./strata-data (seeded with a demo keyspace when empty) over the REST
# API on 127.0.0.1:7070, mounted at ./strata-mnt when FUSE is usable, until Ctrl-C.
# `make test`: install what is missing, then format check, clippy, every test (the crash test among
# them), the WASI build, and a short run of each fuzz target (see doc/testing.md).

CARGO ?= cargo
DATA ?= ./strata-data
MNT ?= ./strata-mnt
STRATA = $(CARGO) run --quiet --release -p strata-cli --

.PHONY: run test deps fmt bench-rocksdb

run: deps
	$(CARGO) build --release -p strata-cli
	mkdir -p $(MNT)
	@if [ -w /dev/fuse ] && command -v fusermount3 >/dev/null; then \
		$(STRATA) --db $(DATA) serve --seed-demo --mount $(MNT); \
	else \
		echo "FUSE is not usable here (make deps installs fuse3): serving without the mount"; \
		$(STRATA) --db $(DATA) serve --seed-demo; \
	fi

deps:
	./scripts/install-deps.sh

test: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --features strata-engine/internals -- -D warnings
	$(CARGO) test --workspace
	$(CARGO) build -p strata-engine --target wasm32-wasip2
	./scripts/fuzz.sh

fmt:
	$(CARGO) fmt --all

# Strata against RocksDB in one run (compiles RocksDB: 20+ minutes the first time; not part of CI).
bench-rocksdb:
	$(CARGO) build --release -p strata-cli --features rocksdb
	$(CARGO) run --release -p strata-cli --features rocksdb -- --db /tmp/strata-bench bench --engine strata
	$(CARGO) run --release -p strata-cli --features rocksdb -- --db /tmp/rocksdb-bench bench --engine rocksdb
