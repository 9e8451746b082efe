#!/usr/bin/env bash
# The fixture sweep under seeded faults (docs/chaos.md): a fault-free run, then one run per seed
# with agents and the coordinator killed, an agent stopped past its lease TTL, the coordinator's
# disk filled and its database deleted. Prints one table row per seed; exits 1 if any run lost,
# duplicated or changed anything.
#
#   scripts/chaos.sh [--seeds N | --seeds A,B,C] [--keep] [--build DIR]
#
# Needs root for the disk-full fault (a tmpfs is mounted as the coordinator's data dir); without
# it that fault is left out and the run says so. make test runs seeds 1,2,3.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
args=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) args+=("$1"); shift ;;
  esac
done
bin=$build/tests/chaos/chaos_run
if [[ ! -x $bin ]]; then
  echo "chaos: $bin is missing; build first (make build)" >&2
  exit 1
fi
exec "$bin" "${args[@]}"
