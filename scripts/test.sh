#!/usr/bin/env bash
# `make test`: everything CI runs, as fast as two cores allow. Stages and budget: docs/testing.md.
#
# After the bootstrap, everything runs inside scripts/isolated.sh (nothing outside the repository is readable
# but the system) in three lanes:
#   main lane       release build of the server → vectors + oracle → interop (stock clients against `cairn serve`)
#   analysis lane   clang-format + clang-tidy                                   } at nice 10: they fill the
#   sanitizer lane  ASan/UBSan build (clang) of the unit tests and the fuzz       } cores the main lane leaves
#                   targets → the unit tests under it → each fuzz target 15 s      } idle
# The main lane's tests are the ones with timeouts and expiring URLs, so it keeps the CPU first.
# Each stage writes build/test-logs/<stage>.log; a failing stage prints its tail. The timings table at the end
# is what docs/testing.md records.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd -P)
cd "$repo"
logs="$repo/build/test-logs"
jobs=${JOBS:-$(nproc)}

since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

if [[ "${1:-}" != "--inside" ]]; then
  mkdir -p "$logs"
  rm -f "$logs"/*.log "$logs"/*.time
  start=$EPOCHREALTIME
  if ! scripts/bootstrap.sh >"$logs/bootstrap.log" 2>&1; then
    tail -n 60 "$logs/bootstrap.log"
    echo "make test: bootstrap failed (log: $logs/bootstrap.log)"
    exit 1
  fi
  echo "bootstrap $(since "$start") -" >"$logs/bootstrap.time"
  exec scripts/isolated.sh scripts/test.sh --inside
fi

# stage NAME CMD...: runs CMD with its output in NAME.log; NAME.time gets its wall and CPU seconds (user +
# system, children included) and exit status. On two cores the CPU seconds of all stages, halved, are the floor
# of the whole run.
stage() {
  local name=$1 rc cpu TIMEFORMAT='%R %U %S'
  shift
  { time "$@" >"$logs/$name.log" 2>&1; } 2>"$logs/$name.cpu"
  rc=$?
  cpu=$(tail -n 1 "$logs/$name.cpu")
  echo "$name $(awk -v t="$cpu" 'BEGIN { split(t, a, " "); printf "%.1f %.1f", a[1], a[2] + a[3] }') $rc" \
    >"$logs/$name.time"
  if ((rc != 0)); then
    echo "=== make test: stage '$name' failed (exit $rc); last lines of $logs/$name.log:"
    tail -n 80 "$logs/$name.log"
  else
    echo "make test: $name passed ($(cut -d' ' -f2 "$logs/$name.time") s)"
  fi
  return "$rc"
}

t_all=$EPOCHREALTIME
# The isolation is in force: beside the repository there is nothing (else a failed namespace would pass unseen).
parent=$(dirname "$repo")
if [[ "${CAIRN_ALLOW_UNISOLATED:-}" != 1 && "$parent" != / && "$(ls -A "$parent")" != "$(basename "$repo")" ]]; then
  echo "make test: the repository's surroundings are visible; scripts/isolated.sh did not take effect"
  exit 1
fi
stage configure cmake --preset release || exit 1

export CAIRN_BIN="$repo/build/release/src/cli/cairn"
pytest="$repo/.venv/bin/pytest"

# The release tree builds what the stock-client suites run (the server and its test tools); the unit tests run
# once, in the sanitizer lane under ASan + UBSan (`make unit` runs them on the release tree).
main_lane() {
  stage build cmake --build --preset release -j "$jobs" --target cairn cairn-test-postgres cairn-test-seaweedfs &&
    stage oracle "$pytest" -q --durations=8 tests/oracle &&
    stage interop "$pytest" -q --durations=8 tests/interop
}
analysis_lane() {
  stage lint nice -n 10 scripts/lint.py -j "$jobs"
}
sanitizer_lane() {
  stage configure-asan cmake --preset asan &&
    stage asan-build nice -n 10 cmake --build --preset asan --target unit_tests fuzz_targets -j "$jobs" &&
    stage asan-test nice -n 10 ctest --preset asan -j "$jobs" &&
    stage fuzz nice -n 10 scripts/fuzz.sh
}

analysis_lane &
analysis=$!
sanitizer_lane &
sanitizer=$!
main_lane
rc_main=$?
wait "$analysis"
rc_analysis=$?
wait "$sanitizer"
rc_sanitizer=$?

total=$(since "$t_all")
echo
echo "make test: stage timings (seconds; lanes run side by side)"
printf '  %-15s %7s %7s\n' stage wall cpu
cat "$logs"/*.time | awk '{ printf "  %-15s %7.1f %7s%s\n", $1, $2, $3, ($4 != "" && $4 != 0) ? "  FAILED" : "" }'
printf '  %-15s %7.1f          (after bootstrap)\n' total "$total"
if ((rc_main || rc_analysis || rc_sanitizer)); then
  # What failed, once more at the very end (CI may show only the last lines of a long run).
  for t in "$logs"/*.time; do
    read -r name _ _ rc <"$t"
    [[ -n "$rc" && "$rc" != 0 ]] || continue
    echo "=== $name failed (exit $rc); log: $logs/$name.log"
    grep -E '^(FAILED|ERROR) |^=+ .*(failed|error)|tests failed out of|\*\*\*(Failed|Exception)|^The following tests FAILED|^reproduce: |_fuzz: FAILED' \
      "$logs/$name.log" | cut -c1-400 | tail -n 30
  done
  echo "make test: FAILED"
  exit 1
fi
echo "make test: passed"
