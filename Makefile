# cairn — the developer entry points. `make test` is what CI runs (.ci/run).
SHELL := /bin/bash
.DEFAULT_GOAL := build

JOBS ?= $(shell nproc)
SOURCES := $(shell git ls-files --cached --others --exclude-standard 'src/*.cc' 'src/*.h' 2>/dev/null)
CAIRN_BIN := $(CURDIR)/build/release/src/cli/cairn
PYTEST := $(CURDIR)/.venv/bin/pytest

.PHONY: bootstrap deps build debug asan lint format unit asan-test oracle interop test run bench measure-transfer clean

bootstrap:  ## install every dependency (idempotent)
	scripts/bootstrap.sh

deps:  ## system packages needed to build (idempotent)
	scripts/bootstrap.sh --build

build: deps  ## release build (RelWithDebInfo): the binary, tests and benchmarks
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS)

debug: deps
	cmake --preset debug >/dev/null
	cmake --build --preset debug -j $(JOBS)

asan: deps  ## AddressSanitizer + UndefinedBehaviorSanitizer build
	cmake --preset asan >/dev/null
	cmake --build --preset asan -j $(JOBS)

format:  ## rewrite sources with clang-format
	clang-format -i $(SOURCES)

lint: build  ## clang-format (check only) and clang-tidy, warnings are errors
	clang-format --dry-run -Werror $(SOURCES)
	@# The static analyzer (clang-analyzer-*, 85% of clang-tidy's time) runs on the code that ships; tests and
	@# benchmarks get every other check (their bugs show up when they run, under ASan and UBSan too).
	run-clang-tidy -quiet -p build/release -j $(JOBS) '$(CURDIR)/src/.*(?<!_test)(?<!_bench)\.cc$$' \
	  >/tmp/cairn-tidy.log 2>&1 || { grep -E "error:|warning:" -A3 /tmp/cairn-tidy.log | head -80; exit 1; }
	run-clang-tidy -quiet -p build/release -j $(JOBS) -checks='-clang-analyzer-*' '$(CURDIR)/src/.*_(test|bench)\.cc$$' \
	  >/tmp/cairn-tidy-tests.log 2>&1 || { grep -E "error:|warning:" -A3 /tmp/cairn-tidy-tests.log | head -80; exit 1; }

unit: build  ## unit and in-process tests
	ctest --preset release -j $(JOBS)

asan-test: asan  ## the unit tests under the sanitizers
	ctest --preset asan -j $(JOBS)

oracle: build bootstrap  ## cairn against the stock implementations (@huggingface/xetchunk-wasm, hf_xet)
	CAIRN_BIN=$(CAIRN_BIN) $(PYTEST) -q tests/oracle

interop: build bootstrap  ## a real `cairn serve` against hf_xet 1.8.0 and @huggingface/hub 2.17.5
	CAIRN_BIN=$(CAIRN_BIN) $(PYTEST) -q tests/interop

test: bootstrap lint unit asan-test oracle interop  ## everything CI runs

run: build  ## start the server with its defaults and print a development token
	scripts/run.sh

bench: build  ## Google Benchmark programs (see BENCHMARKS.md)
	build/release/src/xet/xet_bench --benchmark_counters_tabular=true
	build/release/src/cas/cas_bench
	build/release/src/api/api_bench
	build/release/src/index/index_bench

measure-transfer: build bootstrap  ## 1 GiB upload and download with hf_xet against cairn serve (MB/s, peak RSS)
	.venv/bin/python scripts/measure_transfer.py --bin $(CAIRN_BIN)

clean:
	rm -rf build
