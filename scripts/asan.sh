#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer build of the whole project in build-asan/ (gcc),
# then the unit and integration ctest labels under it. Any sanitizer report fails the run.
#
#   scripts/asan.sh [build-dir]        default build-asan
#   CTEST_ARGS="-R Editor" scripts/asan.sh
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-build-asan}"
jobs="${JOBS:-$(nproc)}"
launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi

san="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
cmake -S . -B "$dir" -G Ninja "${launcher[@]}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DCMAKE_CXX_FLAGS="$san" \
  -DCMAKE_EXE_LINKER_FLAGS="$san" \
  -DCMAKE_SHARED_LINKER_FLAGS="$san" \
  -DTRIAGE_BUILD_BENCH=OFF
cmake --build "$dir" -j "$jobs"

# halt_on_error: the first report ends the process with a non-zero status, so the test fails.
# Children (triagectl, coordinator, agent) inherit these options.
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:suppressions=$PWD/scripts/asan.supp${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# shellcheck disable=SC2086
# dockerfile_static compares the runtime packages of the image with what the release binaries
# link; sanitizer builds link libasan/libubsan on purpose, so it has nothing to say here.
ctest --test-dir "$dir" --output-on-failure --no-tests=error -j "$jobs" -L 'unit|integration' \
  -E '^dockerfile_static$' ${CTEST_ARGS:-}
