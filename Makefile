# `make run`: build, then serve ./strata-data (seeded with a demo keyspace when empty) over the REST
# API on 127.0.0.1:7070, mounted at ./strata-mnt when FUSE is usable, until Ctrl-C.
# `make test`: install what is missing, build the console, then its checks, format check, clippy,
# every test (the crash test and the WASI component's among them), the REST contract test, the
# bucket backend's against SeaweedFS, the engine's unit tests on wasm32-wasip2 under wasmtime, a short run of each fuzz
# target, and the console's Playwright tests (see doc/testing.md).

CARGO ?= cargo
DATA ?= ./strata-data
MNT ?= ./strata-mnt
STRATA = $(CARGO) run --quiet --release -p strata-cli --

WEB = web-admin

.PHONY: run test deps web web-check e2e gallery wasm-test fmt bench-rocksdb bench-rest bench-peers

run: deps web
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

# The console's packages (only when the lockfile changed since the last install) and its build,
# which the strata binary embeds.
web:
	cd $(WEB) && { [ node_modules/.package-lock.json -nt package-lock.json ] || npm ci --no-audit --no-fund; }
	cd $(WEB) && npm run build

# Generated API types match openapi.json; eslint, prettier, tsc and the Vitest unit tests.
web-check: web
	cd $(WEB) && npm run check

# Playwright in Debian's chromium against the debug strata that `cargo test` built.
PLAYWRIGHT = cd $(WEB) && npx playwright test
e2e: web
	$(PLAYWRIGHT)

# The README's gallery: the console spec's screenshots of every page, taken anew.
gallery: web
	cd $(WEB) && SCREENSHOTS=../doc/gallery npx playwright test e2e/console.spec.ts

test: deps web web-check
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --features strata-engine/internals -- -D warnings
	$(CARGO) fmt --manifest-path crates/wasi-guest/Cargo.toml -- --check
	$(CARGO) clippy --manifest-path crates/wasi-guest/Cargo.toml --target wasm32-wasip2 --all-targets -- -D warnings
	$(CARGO) test --workspace --no-run # the bucket tests' binaries too, run beside wasm-test below
	# Schemathesis (one Python thread, every check on) fills the core the native tests leave idle.
	./scripts/beside.sh ./scripts/api-contract-test.sh -- $(CARGO) test --workspace --exclude strata-bucket
	./scripts/readme-test.sh
	$(CARGO) clippy -p strata-engine --target wasm32-wasip2 --all-targets -- -D warnings # 32-bit cfg too
	# SeaweedFS's waits beside wasm's work; the bucket tests' binaries listed first (bucket-test.sh).
	./scripts/beside.sh ./scripts/bucket-test.sh $$(CARGO="$(CARGO)" ./scripts/bucket-test.sh --list) -- $(MAKE) wasm-test
	# The console's tests mostly wait on the page (a fifth of the cores busy): the fuzzers, niced
	# so that the page comes first, fill the rest. The console was built above, before cargo
	# embedded it.
	cd $(WEB) && ../scripts/beside.sh nice -n 15 ../scripts/fuzz.sh -- npx playwright test

# The engine's unit, integration and model tests built for wasm32-wasip2 and run under wasmtime
# (the host crate's runner, one preopened temp directory), so a 32-bit regression fails here.
# Threads, processes, file locks and catching panics are not there: those tests are marked
# ignore on WASI; background work runs through Db::maintenance, as a host drives it.
wasm-test:
	CARGO="$(CARGO)" ./scripts/wasm-test.sh

fmt:
	$(CARGO) fmt --all

# The REST API against its /healthz floor, measured by wrk in one run (not part of CI).
bench-rest: deps
	$(CARGO) build --release -p strata-cli
	./scripts/rest-bench.sh

# Strata beside fjall and the in-memory BTreeMap, same flags, one after another (not part of CI;
# BENCH_FLAGS adds flags to every run; ROCKSDB=1 adds RocksDB, compiled from source: 20+ minutes
# the first time).
BENCH_FLAGS ?= --num 1000000 --cache_size 536870912 --benchmarks fillrandom,compact,readrandom,readrandom,multireadrandom,stats
PEERS_FEATURES = $(if $(ROCKSDB),--features rocksdb)
# deps: RocksDB's bindings are generated with libclang, which Debian's clang brings.
bench-peers: deps
	$(CARGO) build --release -p strata-cli $(PEERS_FEATURES)
	for engine in strata $(if $(ROCKSDB),rocksdb) fjall memory; do \
		rm -rf /tmp/strata-peers-$$engine; \
		$(CARGO) run --quiet --release -p strata-cli $(PEERS_FEATURES) -- \
			--db /tmp/strata-peers-$$engine bench --engine $$engine $(BENCH_FLAGS) || exit 1; \
	done

# Strata against RocksDB in one run (compiles RocksDB: 20+ minutes the first time; not part of CI).
bench-rocksdb: deps
	$(CARGO) build --release -p strata-cli --features rocksdb
	$(CARGO) run --release -p strata-cli --features rocksdb -- --db /tmp/strata-bench bench --engine strata
	$(CARGO) run --release -p strata-cli --features rocksdb -- --db /tmp/rocksdb-bench bench --engine rocksdb
