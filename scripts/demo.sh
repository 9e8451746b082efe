#!/usr/bin/env bash
# `make demo`: one whole sweep on this machine, with real processes on loopback.
#
#   1. makes a tt-xla-shaped git workspace from tests/fixtures/ttxla-mini (with its nested
#      tt_forge_models submodule) and one clone of it per agent;
#   2. starts a coordinator (SQLite under demo-out/run/) and three agents: n150, p150 and a
#      cpu_only one that runs the CPU probes; the fixture's runner stands in for the device;
#   3. starts a sweep of every playbook over both archs and follows it with `triagectl sweep watch`;
#   4. writes demo-out/{tt-xla.patch,tt-forge-models.patch,report.md,report.json} and checks that
#      both patches apply to a fresh clone at the sweep's commits;
#   5. shows what the classifier takes from tt-xla's real training YAML (../shared/data), when present.
#
# Every process is stopped on exit. Logs: demo-out/run/*.log.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${1:-build}
ctl="$root/$build/coordinator/triagectl/triagectl"
coordinator="$root/$build/coordinator/triage-coordinator"
agent="$root/$build/agent/triage-agent"
out=$root/demo-out
run=$out/run
data=${TRIAGE_SHARED_DIR:-$root/../shared}/data/tt-xla

for b in "$ctl" "$coordinator" "$agent"; do
  [[ -x $b ]] || { echo "demo: $b is missing; run 'make demo' (it builds first)" >&2; exit 1; }
done
[[ -x /usr/bin/python3 ]] || { echo "demo: /usr/bin/python3 is missing; run scripts/install-deps.sh" >&2; exit 1; }

# A fixed, empty git identity: the demo must not depend on the user's git config.
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
export GIT_AUTHOR_NAME=triage-demo GIT_AUTHOR_EMAIL=triage-demo@localhost
export GIT_COMMITTER_NAME=triage-demo GIT_COMMITTER_EMAIL=triage-demo@localhost

pids=()
stop_all() {
  local status=$?
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [[ $status -ne 0 ]]; then
    echo "demo: failed (exit $status); logs are in $run/" >&2
  fi
  exit $status
}
trap stop_all EXIT
trap 'exit 130' INT TERM

start=$(date +%s)
rm -rf "$out" && mkdir -p "$run"

echo "== 1. Workspace: the ttxla-mini fixture as a git repository with its submodule"
repo=$(tests/fixtures/make-workspace.sh "$run/src")
echo "   tt-xla checkout: $repo"
for a in cpu n150 p150; do
  tests/fixtures/make-workspace.sh --clone "$repo" "$run/ws-$a" >/dev/null
done

echo "== 2. Coordinator and three agents on loopback"
"$coordinator" --insecure --data_dir "$run/coordinator" \
  --agent_address 127.0.0.1:0 --control_address 127.0.0.1:0 --metrics_address 127.0.0.1:0 \
  --tick_ms 200 --heartbeat_interval_seconds 2 >"$run/coordinator.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
  [[ -s $run/coordinator/ports.json ]] && break
  kill -0 "${pids[0]}" 2>/dev/null || { cat "$run/coordinator.log" >&2; exit 1; }
  sleep 0.1
done
[[ -s $run/coordinator/ports.json ]] || { echo "demo: the coordinator did not start" >&2; exit 1; }
port() { sed -n "s/.*\"$1\": \([0-9]*\).*/\1/p" "$run/coordinator/ports.json"; }
agent_port=$(port agent_port)
control_port=$(port control_port)
export TRIAGECTL_SERVER=127.0.0.1:$control_port
echo "   coordinator: agents on :$agent_port, control on :$control_port," \
     "metrics on http://127.0.0.1:$(port metrics_port)/metrics, store $run/coordinator/"

for a in cpu n150 p150; do
  args=(--insecure --coordinator "127.0.0.1:$agent_port" --agent_id "demo-$a"
        --workspace "$run/ws-$a" --data_dir "$run/agent-$a" --executors native
        --lease_wait_seconds 2 --metrics_address "")
  if [[ $a == cpu ]]; then args+=(--cpu_only); else args+=(--arch "$a"); fi
  "$agent" "${args[@]}" >"$run/agent-$a.log" 2>&1 &
  pids+=($!)
done
for _ in $(seq 1 100); do
  live=$("$ctl" agents list --insecure 2>/dev/null | grep -c "demo-" || true)
  [[ $live -ge 3 ]] && break
  sleep 0.2
done
"$ctl" agents list --insecure

echo
echo "== 3. Sweep: every playbook, archs n150 and p150"
sweep=$("$ctl" sweep start --insecure --repo "$repo" --arch n150,p150 --executor native \
          --reason "make demo" -o json | sed -n 's/.*"id": *"\([^"]*\)".*/\1/p' | head -1)
[[ -n $sweep ]] || { echo "demo: the sweep did not start" >&2; exit 1; }
echo "   sweep $sweep"
"$ctl" sweep watch --insecure "$sweep"

echo
echo "== 4. Patches and report"
"$ctl" sweep patch --insecure "$sweep" --out "$out"
"$ctl" sweep report --insecure "$sweep" --out "$out"
fresh=$run/fresh
tests/fixtures/make-workspace.sh --clone "$repo" "$fresh" >/dev/null
"$ctl" sweep apply --insecure "$sweep" --repo "$fresh" >/dev/null
echo "   both patches apply to a fresh clone at the sweep's commits: $fresh"

if [[ -f $data/sweep-parents/unpack_parent_test_config_training_single_device.yaml ]]; then
  echo
  echo "== 5. The same classifier on tt-xla's real training YAML (before a real bulk sweep)"
  tree=$run/real
  mkdir -p "$tree/tests/runner/test_config/torch"
  cp "$data/sweep-parents/unpack_parent_test_config_training_single_device.yaml" \
     "$tree/tests/runner/test_config/torch/test_config_training_single_device.yaml"
  "$ctl" inventory classify --repo "$tree" --matched -o json >"$out/classify-real.json" 2>"$run/classify-real.log" || true
  cat "$run/classify-real.log"
  echo "   full list: $out/classify-real.json"
fi

echo
echo "== Summary ($(( $(date +%s) - start ))s)"
/usr/bin/python3 - "$out/report.json" <<'EOF'
import collections, json, sys
r = json.load(open(sys.argv[1]))
entries = r["entries"]
print(f"   {len(entries)} entries triaged, sweep {r['sweep']['id'] if isinstance(r['sweep'], dict) else r['sweep']}")
by = collections.Counter()
for e in entries:
    o = e.get("outcome")
    by["unchanged" if o is None else o.get("status") or "?"] += 1
for k, v in sorted(by.items()):
    print(f"     {k:<22} {v}")
review = sum(1 for e in entries if e.get("review"))
conflicts = sum(1 for e in entries if e.get("conflict"))
print(f"   flagged for review: {review}, conflicts: {conflicts}")
EOF
for f in tt-xla.patch tt-forge-models.patch report.md report.json; do
  printf '   %-22s %s (%s lines)\n' "$f" "$out/$f" "$(wc -l <"$out/$f")"
done
echo "   evidence per shard:   $out/evidence/"
