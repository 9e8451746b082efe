#!/usr/bin/env bash
# `make demo`: what triage-farm does with the real tt-xla test-config files in ../shared/data.
# Validates tt-xla's YAML at its head commit, then shows which entries each playbook would take
# from the YAML as it was before three real bulk sweeps landed.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
ctl="$build/coordinator/triagectl/triagectl"
data=${TRIAGE_SHARED_DIR:-../shared}/data/tt-xla
out=demo-out

if [[ ! -d "$data/head" ]]; then
  echo "demo: real tt-xla data not found at $data (the shared folder must sit beside the project)" >&2
  exit 1
fi
rm -rf "$out" && mkdir -p "$out"

echo "== 1. Validate tt-xla's test-config YAML (13 files at commit 95c1c1ce7)"
set +e
"$ctl" inventory check --repo "$data/head" | tee "$out/check.txt"
set -e
echo

for sweep in unpack bf16 inputs; do
  tree="$out/parents/$sweep"
  mkdir -p "$tree/tests/runner/test_config/torch"
  cp "$data/sweep-parents/${sweep}_parent_test_config_training_single_device.yaml" \
     "$tree/tests/runner/test_config/torch/test_config_training_single_device.yaml"
  echo "== 2. Entries a playbook would take: training YAML before the '$sweep' sweep landed"
  "$ctl" inventory classify --repo "$tree" --matched -o json > "$out/classify-$sweep.json" 2> "$out/classify-$sweep.log"
  cat "$out/classify-$sweep.log"
  "$ctl" inventory classify --repo "$tree" --matched 2>/dev/null | head -6
  echo "   ... full list: $out/classify-$sweep.json"
  echo
done
echo "demo: outputs under $out/"
