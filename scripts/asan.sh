#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer build of the whole project in build-asan/ (gcc),
# then the unit and integration ctest labels under it. Any sanitizer report fails the run.
#
#   scripts/asan.sh [build-dir]        default build-asan
#   CTEST_ARGS="-R Editor" scripts/asan.sh
#   scripts/asan.sh --check [build-dir]
#
# --check (make asan-check, part of CI): only what reads untrusted or large input and writes
# what an engineer lands: the nightly intake, the merge, the report, the PR text and the
# landing's unit tests, and the real-size night end to end (tests/e2e/real_night_test.cc). It
# builds just those targets, so it costs a fraction of the whole run.
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
if [[ "${1:-}" == "--check" ]]; then
  check=1
  shift
fi
dir="${1:-build-asan}"
jobs="${JOBS:-$(nproc)}"
launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi

san="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
cmake -S . -B "$dir" -G Ninja "${launcher[@]}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DCMAKE_CXX_FLAGS="$san" \
  -DCMAKE_EXE_LINKER_FLAGS="$san" \
  -DCMAKE_SHARED_LINKER_FLAGS="$san" \
  -DTRIAGE_BUILD_BENCH=OFF
# The --check set: test targets, and what their tests run.
check_tests=(util_test diff_test merge_test nightly_merge_test land_plan_test pr_text_test
  sweep_view_test outcome_counts_test nightly_intake_test nightly_rules_test junit_test
  real_night_test selection_test summary_test lift_test shared_scope_test fan_out_test
  shared_wave_test guards_test issue_drafts_test)
if ((check)); then
  cmake --build "$dir" -j "$jobs" --target "${check_tests[@]}" triage-coordinator triagectl \
    make_night
else
  cmake --build "$dir" -j "$jobs"
fi

# halt_on_error: the first report ends the process with a non-zero status, so the test fails.
# Children (triagectl, coordinator, agent) inherit these options.
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:suppressions=$PWD/scripts/asan.supp${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# shellcheck disable=SC2086
# dockerfile_static compares the runtime packages of the image with what the release binaries
# link; sanitizer builds link libasan/libubsan on purpose, so it has nothing to say here.
if ((check)); then
  # Each test binary whole (ctest names tests by their gtest names, not by target).
  for t in "${check_tests[@]}"; do
    bin="$(find "$dir/tests" -type f -name "$t" -perm -u+x | head -n 1)"
    if [[ -z "$bin" ]]; then
      echo "asan.sh: no test binary $t in $dir" >&2
      exit 1
    fi
    echo "== $t"
    start=$SECONDS
    "$bin" --gtest_brief=1
    echo "== $t passed under ASan+UBSan in $((SECONDS - start)) s"
  done
  exit 0
fi
ctest --test-dir "$dir" --output-on-failure --no-tests=error -j "$jobs" -L 'unit|integration' \
  -E '^dockerfile_static$' ${CTEST_ARGS:-}
