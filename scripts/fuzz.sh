#!/usr/bin/env bash
# Runs cairn's libFuzzer targets (src/<layer>/*_fuzz.cc, built by the asan preset) for a bounded time each.
#   scripts/fuzz.sh [--seconds N] [TARGET...]      default: 15 s each, every target
# `make test` runs it with the default (its sanitizer lane), `make fuzz` with FUZZ_SECONDS (600 by default).
#
# Each target starts from its committed corpora: tests/fuzz/corpus/<target>/ (seeds from the stock clients'
# traffic, scripts/fuzz_seeds.py) and tests/fuzz/regressions/<target>/ (inputs that once failed; every one
# is run first, as a regression test). What it finds new goes to build/fuzz/<target>/corpus/ (outside git,
# kept between runs, so `make fuzz` grows it); a failing input to build/fuzz/<target>/artifacts/, and the
# run prints how to reproduce it. One summary line per target (executions, executions per second, coverage
# from the seeds to the end, new corpus units, failures) is printed and written to build/fuzz/summary.txt.
# Exits 1 when any target failed.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd -P)
cd "$repo"
seconds=15
if [[ "${1:-}" == "--seconds" ]]; then
  seconds=$2
  shift 2
fi
build="$repo/build/asan"
work="$repo/build/fuzz"
mkdir -p "$work"

mapfile -t all < <(find "$build/src" -maxdepth 2 -type f -name '*_fuzz' -perm -u+x | sort)
if ((${#all[@]} == 0)); then
  echo "fuzz: no fuzz targets in $build (cmake --preset asan && cmake --build --preset asan --target fuzz_targets)"
  exit 1
fi
targets=()
for bin in "${all[@]}"; do
  name=$(basename "$bin")
  if (($# == 0)) || [[ " $* " == *" $name "* ]]; then targets+=("$bin"); fi
done

export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
summary="$work/summary.txt"
: >"$summary"
failed=0
for bin in "${targets[@]}"; do
  name=$(basename "$bin")
  dir="$work/$name"
  mkdir -p "$dir/corpus" "$dir/artifacts" "tests/fuzz/corpus/$name" "tests/fuzz/regressions/$name"
  log="$dir/last.log"
  # The grown corpus first: libFuzzer writes new units into the first folder.
  "$bin" -max_total_time="$seconds" -timeout=30 -print_final_stats=1 -artifact_prefix="$dir/artifacts/" \
    "$dir/corpus" "tests/fuzz/corpus/$name" "tests/fuzz/regressions/$name" >"$log" 2>&1
  rc=$?
  final_stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -n 1; }
  cov_at() { grep -E "#[0-9]+[[:space:]]+$1 " "$log" | sed -n 's/.* cov: \([0-9]*\).*/\1/p' | tail -n 1; }
  execs=$(final_stat number_of_executed_units)
  rate=$(final_stat average_exec_per_sec)
  added=$(final_stat new_units_added)
  cov0=$(cov_at INITED)
  cov1=$(cov_at DONE)
  [[ -n "$cov1" ]] || cov1=$(grep -oE ' cov: [0-9]+' "$log" | tail -n 1 | grep -oE '[0-9]+')
  crash=$(grep -oE "Test unit written to [^ ]+" "$log" | tail -n 1 | sed 's/Test unit written to //')
  if ((rc != 0)); then
    failed=1
    line="$name: FAILED (exit $rc) after ${execs:-?} executions"
    echo "=== $name failed; last lines of $log:"
    grep -E "ERROR|SUMMARY|fuzz invariant|runtime error|==[0-9]+==" "$log" | head -n 20
    if [[ -n "$crash" ]]; then
      echo "reproduce: $bin $crash"
      echo "keep it:   cp $crash tests/fuzz/regressions/$name/ (after the fix)"
    fi
  else
    line=$(printf '%s: %s execs (%s/s), cov %s -> %s (+%s), %s new units, 0 crashes' "$name" "${execs:-0}" \
      "${rate:-0}" "${cov0:-?}" "${cov1:-?}" "$(( ${cov1:-0} - ${cov0:-0} ))" "${added:-0}")
  fi
  echo "$line" | tee -a "$summary"
done
exit "$failed"
