#!/usr/bin/env bash
# Prints the benchmark figures. Not a test: the machine is shared, so compare figures from one run.
# Google Benchmark binaries: medians of 5 repetitions. farm_bench: one run of its own table
# (1,000 agents for 10 s, next to a bare gRPC echo; docs/bench-farm.md).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
for b in "$build"/bench/*_bench; do
  [[ -x "$b" ]] || continue
  echo "== $(basename "$b")"
  if [[ "$(basename "$b")" == farm_bench ]]; then
    "$b"
  else
    "$b" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true 2>&1 |
      grep -E "Benchmark|median|---"
  fi
done
