#!/usr/bin/env bash
# Prints the benchmark figures. Not a test: the machine is shared, so compare figures from one run.
# Google Benchmark binaries: medians of 5 repetitions. farm_bench: three (lease+complete, echo)
# pairs in one run and their medians (1,000 agents, 10 s each, next to a bare gRPC echo; about
# 90 s and 3.5 GB; docs/bench-farm.md).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
for b in "$build"/bench/*_bench; do
  [[ -x "$b" ]] || continue
  echo "== $(basename "$b")"
  if [[ "$(basename "$b")" == farm_bench ]]; then
    "$b" --repeat 3
  else
    "$b" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true 2>&1 |
      grep -E "Benchmark|median|---"
  fi
done
