# `make run`: build, then show Strata working on ./strata-data (a short bench, then its stats).
# `make test`: install what is missing, then format check, clippy, every test (the crash test among
# them), the WASI build, and a short run of each fuzz target (see doc/testing.md).

CARGO ?= cargo
DATA ?= ./strata-data
STRATA = $(CARGO) run --quiet --release -p strata-cli --

.PHONY: run test deps fmt bench-rocksdb

run:
	$(CARGO) build --release -p strata-cli
	$(STRATA) --db $(DATA) bench --num 200000 --benchmarks fillseq,fillrandom,readrandom,readmissing,readseq,seekrandom,stats
	$(STRATA) --db $(DATA) stats

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
