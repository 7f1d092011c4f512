# cairn — the developer entry points. `make test` is what CI runs (.ci/run).
SHELL := /bin/bash
.DEFAULT_GOAL := build

JOBS ?= $(shell nproc)
SOURCES := $(shell git ls-files --cached --others --exclude-standard 'src/*.cc' 'src/*.h' 2>/dev/null)
CAIRN_BIN := $(CURDIR)/build/release/src/cli/cairn
PYTEST := $(CURDIR)/.venv/bin/pytest

configure: deps
	cmake --preset release >/dev/null

.PHONY: bootstrap deps configure build debug asan lint format unit asan-test check oracle interop vectors test run bench \
        measure-transfer measure-clients measure-hub bench-dedup bench-load crash-test measure-overload fuzz fuzz-seeds \
        clean

bootstrap:  ## install every dependency (idempotent)
	scripts/bootstrap.sh

deps:  ## system packages needed to build (idempotent)
	scripts/bootstrap.sh --build

build: configure  ## release build (RelWithDebInfo): the binary, tests and benchmarks
	cmake --build --preset release -j $(JOBS) --target all benchmarks

debug: deps
	cmake --preset debug >/dev/null
	cmake --build --preset debug -j $(JOBS)

asan: deps  ## AddressSanitizer + UndefinedBehaviorSanitizer build
	cmake --preset asan >/dev/null
	cmake --build --preset asan -j $(JOBS)

format:  ## rewrite sources with clang-format
	clang-format -i $(SOURCES)

lint: configure  ## the layering (scripts/layers.py), clang-format (check only) and clang-tidy, warnings are errors; unchanged code is not re-analysed
	scripts/lint.py -j $(JOBS)

unit: build  ## unit and in-process tests
	ctest --preset release -j $(JOBS)

asan-test: deps  ## the unit tests under AddressSanitizer + UndefinedBehaviorSanitizer
	cmake --preset asan >/dev/null
	cmake --build --preset asan --target unit_tests -j $(JOBS)
	ctest --preset asan -j $(JOBS)

FUZZ_SECONDS ?= 600
FUZZ_TARGETS ?=
fuzz: deps  ## each libFuzzer target FUZZ_SECONDS (600) under ASan + UBSan, growing build/fuzz/<target>/corpus; FUZZ_TARGETS=xorb_fuzz... for some
	cmake --preset asan >/dev/null
	cmake --build --preset asan --target fuzz_targets -j $(JOBS)
	scripts/fuzz.sh --seconds $(FUZZ_SECONDS) $(FUZZ_TARGETS)

fuzz-seeds: build bootstrap  ## regenerate tests/fuzz/corpus/ from the stock clients' traffic against `cairn serve`
	.venv/bin/python scripts/fuzz_seeds.py --bin $(CAIRN_BIN)

# The inner loop: one layer's unit tests (make check L=xet), or all of them (make check); release tree only.
L ?=
check: configure  ## build and run one layer's unit tests: make check L=xet|common|ingest|config|http|store|index|cas|repair|hub|api|client
	cmake --build --preset release -j $(JOBS) --target $(if $(L),$(L)_test,unit_tests)
	ctest --preset release -j $(JOBS) $(if $(L),-R '^$(L)_test$$')

oracle: build bootstrap  ## test vectors and cairn against the stock implementations (xetchunk-wasm, hf_xet)
	CAIRN_BIN=$(CAIRN_BIN) $(PYTEST) -q tests/oracle

interop: build bootstrap  ## a real `cairn serve` against hf_xet 1.8.0, @huggingface/hub 2.17.5 and huggingface_hub 2.4.0 (hf CLI)
	CAIRN_BIN=$(CAIRN_BIN) $(PYTEST) -q tests/interop

measure-overload: build bootstrap  ## 500 slow connections beside a normal client; 64 concurrent 64 MiB xorb uploads (p99, RSS, fds)
	.venv/bin/python scripts/measure_overload.py --bin $(CAIRN_BIN)

KILLS ?= 200
crash-test: build bootstrap  ## the SIGKILL crash test, longer: make crash-test KILLS=200 (make test runs 50 per backend)
	CAIRN_BIN=$(CAIRN_BIN) CAIRN_CRASH_KILLS=$(KILLS) $(PYTEST) -q -s tests/interop/test_crash.py

vectors: bootstrap  ## regenerate tests/vectors/xet-vectors.json with the stock JS packages, then check it with hf_xet
	node tests/vectors/generate.mjs --write
	CAIRN_BIN=$(CAIRN_BIN) $(PYTEST) -q tests/oracle/test_vectors.py

test:  ## everything CI runs, in the repository alone (scripts/test.sh; stages and budget in docs/testing.md)
	scripts/test.sh

run: configure  ## build the server alone (not the tests or benchmarks), start it with its defaults, print a token
	cmake --build --preset release -j $(JOBS) --target cairn
	scripts/run.sh

bench: build  ## Google Benchmark programs (see BENCHMARKS.md)
	build/release/src/xet/xet_bench --benchmark_counters_tabular=true
	build/release/src/cas/cas_bench
	build/release/src/api/api_bench
	build/release/src/index/index_bench
	build/release/src/gc/gc_bench --benchmark_counters_tabular=true
	build/release/src/compact/compact_bench

measure-transfer: build bootstrap  ## 1 GiB upload and download with hf_xet against cairn serve (MB/s, peak RSS)
	.venv/bin/python scripts/measure_transfer.py --bin $(CAIRN_BIN)

measure-clients: build bootstrap  ## cairn put/get beside hf_xet: 1 GiB each way, then a re-upload after a 1 % edit
	.venv/bin/python scripts/measure_clients.py --bin $(CAIRN_BIN)

measure-hub: build bootstrap  ## hf upload / hf download through the Hub API beside hf_xet alone: 1 GiB each way
	.venv/bin/python scripts/measure_hub.py --bin $(CAIRN_BIN)

bench-load: build bootstrap  ## reconstruction under load over HTTP on 1,000,000 files and xorbs, SQLite and PostgreSQL
	.venv/bin/python scripts/bench_load.py $(BENCH_ARGS)

bench-dedup: build bootstrap  ## dedup and transfer beside xet-core's local_cas_server: make bench-dedup REFERENCE=PATH
	@test -x "$(REFERENCE)" || { echo "REFERENCE=path/to/local_cas_server is required (see BENCHMARKS.md)"; exit 2; }
	.venv/bin/python scripts/bench_dedup.py --bin $(CAIRN_BIN) --reference $(REFERENCE) $(BENCH_ARGS)

clean:
	rm -rf build
