#!/usr/bin/env bash
# Installs the dependencies, checks the formatting (scripts/check-format.sh), then builds and
# tests tapegrad twice:
#   1. build/           Release, every program (library, tests, examples, bench); ctest
#   2. build-sanitize/  AddressSanitizer + UndefinedBehaviorSanitizer (leak checking on) on the
#                       library, tests and examples at -O1 -g1 (line tables for the reports; half
#                       the compile time of -O2 -g, the usual level for sanitizer builds); ctest
# Prints a summary with the time of each phase and exits non-zero if any phase failed.
# CI runs exactly this (through .ci/run). Environment knobs:
#   JOBS=N                 parallel build and test jobs (default: nproc)
#   TAPEGRAD_SKIP_DEPS=1   do not run scripts/install-deps.sh
#   TAPEGRAD_SKIP_SANITIZE=1  only the Release build
#   BUILD_DIR=DIR, SANITIZE_BUILD_DIR=DIR   the two build trees (defaults build, build-sanitize)
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1
JOBS="${JOBS:-$(nproc)}"
BUILD_DIR="${BUILD_DIR:-build}"
SANITIZE_BUILD_DIR="${SANITIZE_BUILD_DIR:-build-sanitize}"

PHASES=()    # "name|status|seconds"
FAILED=0
TOTAL_PASSED=0
TOTAL_FAILED=0

# run_phase NAME COMMAND...: runs the command, prints its output, records status and time.
run_phase() {
  local name="$1"
  shift
  echo
  echo "==== ${name}: $*"
  local start=$SECONDS
  "$@"
  local rc=$?
  local took=$((SECONDS - start))
  if [[ $rc -eq 0 ]]; then
    PHASES+=("${name}|ok|${took}")
  else
    PHASES+=("${name}|FAILED (exit ${rc})|${took}")
    FAILED=1
    echo "==== ${name}: FAILED with exit code ${rc}" >&2
  fi
  return $rc
}

skip_phase() {
  PHASES+=("$1|skipped ($2)|0")
}

# shellcheck disable=SC2317  # (called through run_phase)
# run_ctest BUILD_DIR: ctest with its output also kept in BUILD_DIR/ctest.log, counting the results.
run_ctest() {
  local dir="$1"
  local log="$dir/ctest.log"
  ctest --test-dir "$dir" --output-on-failure --no-tests=error --timeout 600 -j "$JOBS" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  # ctest's closing line: "100% tests passed, 0 tests failed out of 215"
  local line
  line="$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1)"
  if [[ -n "$line" ]]; then
    local failed total
    failed="$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")"
    total="$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\2/' <<<"$line")"
    TOTAL_PASSED=$((TOTAL_PASSED + total - failed))
    TOTAL_FAILED=$((TOTAL_FAILED + failed))
  elif [[ $rc -ne 0 ]]; then
    TOTAL_FAILED=$((TOTAL_FAILED + 1))  # ctest failed before running anything
  fi
  return "$rc"
}

# install-deps.sh installs ninja-build; without it (TAPEGRAD_SKIP_DEPS=1) CMake's default is used.
GENERATOR_NAME="Unix Makefiles"
if command -v ninja >/dev/null 2>&1 || [[ "${TAPEGRAD_SKIP_DEPS:-0}" != "1" ]]; then
  GENERATOR_NAME="Ninja"
fi

# A tree configured earlier with another generator cannot be reused.
reset_if_other_generator() {
  if [[ -f "$1/CMakeCache.txt" ]] && ! grep -qx "CMAKE_GENERATOR:INTERNAL=${GENERATOR_NAME}" "$1/CMakeCache.txt"; then
    echo "test.sh: $1 was configured with another generator; starting it afresh"
    rm -rf "$1"
  fi
}

# ---------------------------------------------------------------- 1. dependencies
if [[ "${TAPEGRAD_SKIP_DEPS:-0}" == "1" ]]; then
  skip_phase "deps" "TAPEGRAD_SKIP_DEPS=1"
else
  run_phase "deps" bash "$ROOT/scripts/install-deps.sh" || {
    echo "test.sh: the dependencies could not be installed; stopping" >&2
  }
fi

if [[ $FAILED -eq 0 ]]; then
  # ---------------------------------------------------------------- formatting (.clang-format)
  run_phase "format" bash "$ROOT/scripts/check-format.sh"

  # ---------------------------------------------------------------- 2. Release build and tests
  reset_if_other_generator "$BUILD_DIR"
  if run_phase "release-configure" cmake -S . -B "$BUILD_DIR" -G "$GENERATOR_NAME" -DCMAKE_BUILD_TYPE=Release \
       -DTAPEGRAD_SANITIZE= &&
     run_phase "release-build" cmake --build "$BUILD_DIR" -j "$JOBS"; then
    run_phase "release-ctest" run_ctest "$BUILD_DIR"
  else
    skip_phase "release-ctest" "build failed"
  fi

  # ---------------------------------------------------------------- 3. sanitizer build and tests
  if [[ "${TAPEGRAD_SKIP_SANITIZE:-0}" == "1" ]]; then
    skip_phase "sanitize" "TAPEGRAD_SKIP_SANITIZE=1"
  else
    # Exported for the build too: doctest's test discovery runs the test binary at build time.
    # allocator_may_return_null: an impossible allocation must reach the library's own
    # out-of-memory error (which the tests check) instead of ASan aborting the process.
    export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=0:check_initialization_order=1:strict_init_order=1:allocator_may_return_null=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
    reset_if_other_generator "$SANITIZE_BUILD_DIR"
    if run_phase "sanitize-configure" cmake -S . -B "$SANITIZE_BUILD_DIR" -G "$GENERATOR_NAME" \
         -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
         -DTAPEGRAD_SANITIZE=address,undefined -DTAPEGRAD_BUILD_BENCH=OFF &&
       run_phase "sanitize-build" cmake --build "$SANITIZE_BUILD_DIR" -j "$JOBS"; then
      run_phase "sanitize-ctest" run_ctest "$SANITIZE_BUILD_DIR"
    else
      skip_phase "sanitize-ctest" "build failed"
    fi
  fi
fi

# ---------------------------------------------------------------- summary
echo
echo "==== summary (ctest output kept in ${BUILD_DIR}/ctest.log and ${SANITIZE_BUILD_DIR}/ctest.log)"
total_time=0
for entry in "${PHASES[@]}"; do
  IFS='|' read -r name status took <<<"$entry"
  printf '  %-20s %-34s %5ss\n' "$name" "$status" "$took"
  total_time=$((total_time + took))
done
printf '  %-20s %-34s %5ss\n' "total" "" "$total_time"
if [[ $FAILED -eq 0 ]]; then
  echo "test.sh: ALL PHASES PASSED"
else
  echo "test.sh: SOME PHASES FAILED"
fi
# One plain closing line over both ctest runs.
echo "ctest: ${TOTAL_PASSED} passed, ${TOTAL_FAILED} failed"
exit "$FAILED"
