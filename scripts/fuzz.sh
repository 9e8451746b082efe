#!/usr/bin/env bash
# libFuzzer targets of tests/fuzz (docs/fuzzing.md), built with clang-14, ASan and UBSan in
# build-fuzz/.
#
#   scripts/fuzz.sh [TARGET...]          fuzz each target FUZZ_SECONDS (default 300) over its
#                                        committed corpus and the seeds; new inputs are merged
#                                        (minimised) into tests/fuzz/corpus/TARGET
#   scripts/fuzz.sh --check [TARGET...]  regression: every committed corpus and regression input,
#                                        then FUZZ_SECONDS (default 15) of fuzzing; the committed
#                                        corpus is not changed. Fails on any crash.
#   scripts/fuzz.sh --build              configure and build only
#
# Seeds are made at run time from ../shared/data (tt-xla test configs; skipped when absent) and
# tests/fixtures/ttxla-mini into build-fuzz/seeds/TARGET; they are never copied into the
# repository. A crash leaves its input in build-fuzz/artifacts/TARGET/; copy it to
# tests/fuzz/regressions/TARGET/ once the bug is fixed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build="${FUZZ_BUILD_DIR:-build-fuzz}"
jobs="${JOBS:-$(nproc)}"
shared="${TRIAGE_SHARED_DIR:-$root/../shared}"
all_targets=(inventory edits junit python_literal probe diff tokens config nightly_intake)

mode=fuzz
if [[ "${1:-}" == "--check" || "${1:-}" == "--build" ]]; then
  mode=${1#--}
  shift
fi
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then targets=("${all_targets[@]}"); fi
if [[ $mode == check ]]; then seconds="${FUZZ_SECONDS:-15}"; else seconds="${FUZZ_SECONDS:-300}"; fi

# --- build ---------------------------------------------------------------------------------
cxx="${FUZZ_CXX:-clang++-14}"
launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
if [[ ! -f "$build/build.ninja" ]]; then
  # -O1 without NDEBUG: assertions (ours, absl's, nlohmann's) stay on.
  cmake -S . -B "$build" -G Ninja "${launcher[@]}" \
    -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DTRIAGE_FUZZ=ON -DTRIAGE_BUILD_TESTS=OFF -DTRIAGE_BUILD_BENCH=OFF >/dev/null
fi
build_targets=()
for t in "${targets[@]}"; do build_targets+=("${t}_fuzz"); done
cmake --build "$build" -j "$jobs" --target "${build_targets[@]}"
if [[ $mode == build ]]; then exit 0; fi

# --- seeds ---------------------------------------------------------------------------------
yaml_files() {
  find tests/fixtures/ttxla-mini/tests/runner/test_config -name '*.yaml'
  if [[ -d "$shared/data" ]]; then
    find "$shared/data" -name '*.yaml' | sort
  else
    echo "fuzz: $shared/data not found: seeding from the fixture only" >&2
  fi
}

# Slices of a test-config file: its lines before the first entry, then up to 3 entries each,
# so that the seeds stay small (fast to run, and within -max_len).
slice_yaml() {  # FILE OUTDIR PREFIX
  awk -v out="$2" -v prefix="$3" '
    function flush() { if (body != "") { n++; printf "%s%s", head, body > (out "/" prefix "-" n ".yaml"); close(out "/" prefix "-" n ".yaml") } body = ""; count = 0 }
    !started && /^[A-Za-z_]+:/ { head = head $0 "\n"; started = 1; next }
    !started { head = head $0 "\n"; next }
    /^  [^ #]/ { if (count == 3) flush(); count++ }
    { body = body $0 "\n" }
    END { flush() }' "$1"
}

make_seeds() {  # TARGET DIR
  local t=$1 dir=$2 i=0 f
  rm -rf "$dir"
  mkdir -p "$dir"
  case $t in
    inventory)
      while read -r f; do
        i=$((i + 1))
        slice_yaml "$f" "$dir" "s$i"
      done < <(yaml_files)
      ;;
    diff)
      # A slice, NUL, the slice with its statuses changed and a line added.
      while read -r f; do
        i=$((i + 1))
        slice_yaml "$f" "$dir" "s$i"
      done < <(yaml_files)
      for f in "$dir"/*.yaml; do
        { cat "$f"; printf '\0'; sed -e 's/EXPECTED_PASSING/KNOWN_FAILURE_XFAIL/' -e '3a\
    reason: "added"' "$f"; } > "$f.pair"
        rm "$f"
      done
      ;;
  esac
}

# --- run -----------------------------------------------------------------------------------
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
if command -v llvm-symbolizer-14 >/dev/null 2>&1; then
  export ASAN_SYMBOLIZER_PATH="${ASAN_SYMBOLIZER_PATH:-$(command -v llvm-symbolizer-14)}"
fi

max_len() {
  case $1 in
    inventory | diff) echo 8192 ;;
    *) echo 4096 ;;
  esac
}

# Mutations per target in --check mode: about FUZZ_SECONDS (15) of fuzzing each, from the
# executions per second measured on a 2-core machine (docs/fuzzing.md).
check_runs() {
  local per_second
  case $1 in
    inventory) per_second=3000 ;;
    edits) per_second=5000 ;;
    junit) per_second=5000 ;;
    python_literal) per_second=15000 ;;
    probe) per_second=1800 ;;
    diff) per_second=250 ;;
    tokens) per_second=2500 ;;
    config) per_second=2500 ;;
    nightly_intake) per_second=15000 ;;
    *) per_second=1000 ;;
  esac
  echo $((per_second * seconds))
}

failed=()
summary=()
for t in "${targets[@]}"; do
  bin="$build/tests/fuzz/${t}_fuzz"
  corpus="tests/fuzz/corpus/$t"
  regress="tests/fuzz/regressions/$t"
  seeds="$build/seeds/$t"
  work="$build/work/$t"
  artifacts="$build/artifacts/$t"
  log="$build/logs/$t.log"
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  make_seeds "$t" "$seeds"
  rm -rf "$work"
  mkdir -p "$work"
  opts=(-max_len="$(max_len "$t")" -timeout=20 -rss_limit_mb=2560 -print_final_stats=1
        -artifact_prefix="$artifacts/")
  if [[ -f "tests/fuzz/dict/$t.dict" ]]; then opts+=(-dict="tests/fuzz/dict/$t.dict"); fi
  dirs=("$corpus" "$seeds")
  if [[ -d "$regress" ]]; then dirs+=("$regress"); fi

  echo "=== $t: $mode, ${seconds}s ($(find "${dirs[@]}" -type f | wc -l) inputs)"
  status=0
  if [[ $mode == check ]]; then
    # A regression test must give the same answer on every run: a fixed seed and a fixed
    # number of runs (about FUZZ_SECONDS on a 2-core machine; check_runs), not a time limit.
    opts+=(-seed=1 -runs="$(check_runs "$t")")
  else
    opts+=(-max_total_time="$seconds")
  fi
  "$bin" "${opts[@]}" "$work" "${dirs[@]}" >"$log" 2>&1 || status=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1 || true)
  if [[ $status -ne 0 ]]; then
    failed+=("$t")
    echo "--- $t FAILED (exit $status); log: $log; input in $artifacts/" >&2
    grep -E -m1 -A40 'ERROR: |property violated|runtime error|terminate called' "$log" >&2 || tail -40 "$log" >&2
  fi
  summary+=("$(printf '%-15s %12s execs  %s  %s' "$t" "${execs:-?}" "${cov:-}" \
    "$([[ $status -eq 0 ]] && echo ok || echo CRASH)")")

  if [[ $mode == fuzz && $status -eq 0 ]]; then
    # Minimise: what the seeds do not already cover, from the committed corpus and the new
    # inputs, into a fresh directory that replaces the committed one.
    min="$build/min/$t"
    rm -rf "$min"
    mkdir -p "$min"
    for f in "$seeds"/*; do [[ -f "$f" ]] && cp "$f" "$min/seed-$(basename "$f")"; done
    # -use_counters=0: edges only (not hit counts), which keeps the corpus to a few hundred files.
    "$bin" -merge=1 -use_counters=0 -max_len="$(max_len "$t")" -timeout=20 -rss_limit_mb=2560 \
      "$min" "$corpus" "$work" >"$build/logs/$t.merge.log" 2>&1
    rm -f "$min"/seed-*
    rm -rf "$corpus"
    mv "$min" "$corpus"
    echo "    corpus: $(find "$corpus" -type f | wc -l) files, $(du -sk "$corpus" | cut -f1) KiB"
  fi
done

echo
echo "fuzz ($mode, ${seconds}s per target):"
printf '  %s\n' "${summary[@]}"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: crashes in: ${failed[*]}" >&2
  exit 1
fi
