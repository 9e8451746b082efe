#!/usr/bin/env bash
# Prints the benchmark figures (medians of 5 repetitions). Not a test: the machine is shared.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
for b in "$build"/bench/*_bench; do
  [[ -x "$b" ]] || continue
  echo "== $(basename "$b")"
  "$b" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true 2>&1 | grep -E "Benchmark|median|---"
done
