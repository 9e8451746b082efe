#!/usr/bin/env bash
# Prints the benchmark figures. Not a test: the machine is shared, so compare figures from one run.
# Google Benchmark binaries: medians of 5 repetitions. farm_bench: three (lease+complete, echo)
# pairs in one run and their medians (1,000 agents, 10 s each, next to a bare gRPC echo; about
# 90 s and 3.5 GB; docs/bench-farm.md). prepare_bench: Workspace::Prepare per shard on synthetic
# tt-xla-shaped repositories of three sizes (about 2 minutes). nightly_intake_bench: the nightly
# intake over 7 runs x 3 archs x 3,000 synthetic testcases, as directories and .tar.gz (about
# 2 minutes and 400 MB of temporary files; docs/nightly.md). fleet_sim: a sweep's makespan on
# three simulated fleets against its lower bound (seconds), the same over seeds 1-10, each also
# as the next week's sweep planned with what the farm measured (about 20 s), then one
# coordinator's scale: full
# sweeps of 500 and 5,000 entries (SCALE overrides the list; a full 50,000 takes about 17
# minutes and 3 GB) and the planning of 50,000. nightly_replay: tt-xla's maintenance rounds
# replayed through the nightly rules, agreement with the engineers (well under a second). Then bench/device_time.py: device
# time per entry on the fixture, the farm against one at a time (about 3 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
for b in "$build"/bench/*_bench; do
  [[ -x "$b" ]] || continue
  echo "== $(basename "$b")"
  if [[ "$(basename "$b")" == farm_bench ]]; then
    "$b" --repeat 3
  elif [[ "$(basename "$b")" == prepare_bench || "$(basename "$b")" == nightly_intake_bench ]]; then
    "$b"
  else
    "$b" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true 2>&1 |
      grep -E "Benchmark|median|---"
  fi
done
echo "== nightly_replay"
"$build"/bench/nightly_replay  # tt-xla's maintenance rounds through the rules (docs/nightly.md)
echo "== fleet_sim"
"$build"/bench/fleet_sim --seeds 10 --second-week  # seed 1's tables, seeds 1-10; each week 2 too
echo "== fleet_sim scale"
"$build"/bench/fleet_sim --scale "${SCALE:-500,5000}"
"$build"/bench/fleet_sim --scale 50000 --plan-only
echo "== device_time"
bench/device_time.py --build "$build"
