#!/usr/bin/env bash
# `promtool check metrics` on the /metrics output of a real coordinator and a real agent
# (loopback, ports chosen by the OS), after the agent has registered and been served a Lease.
#   metrics_lint_test.sh BUILD_DIR
set -euo pipefail
build=$1
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "metrics_lint_test: $*" >&2; for f in "$work"/*.log; do echo "--- $f"; tail -20 "$f"; done >&2; exit 1; }

fetch() {  # URL -> stdout
  /usr/bin/python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "$1"
}
free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

"$build/coordinator/triage-coordinator" --insecure --data_dir "$work/coordinator" \
  --agent_address 127.0.0.1:0 --control_address 127.0.0.1:0 --metrics_address 127.0.0.1:0 \
  --tick_ms 200 >"$work/coordinator.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do [[ -s $work/coordinator/ports.json ]] && break; sleep 0.1; done
[[ -s $work/coordinator/ports.json ]] || fail "the coordinator did not write ports.json"
port() { sed -n "s/.*\"$1\": \([0-9]*\).*/\1/p" "$work/coordinator/ports.json"; }

agent_metrics=$(free_port)
mkdir -p "$work/ws"
"$build/agent/triage-agent" --insecure --coordinator "127.0.0.1:$(port agent_port)" \
  --agent_id lint-agent --arch n150 --workspace "$work/ws" --data_dir "$work/agent" \
  --executors replay --replay_dir "$work" --lease_wait_seconds 1 \
  --metrics_address "127.0.0.1:$agent_metrics" >"$work/agent.log" 2>&1 &
pids+=($!)

# Both endpoints up, the agent registered (its arch appears in the coordinator's agent gauge).
coord_url="http://127.0.0.1:$(port metrics_port)/metrics"
agent_url="http://127.0.0.1:$agent_metrics/metrics"
ok=0
for _ in $(seq 1 100); do
  if fetch "$coord_url" 2>/dev/null | grep -q 'triage_agents{.*arch="n150"' &&
     fetch "$agent_url" >/dev/null 2>&1; then ok=1; break; fi
  sleep 0.1
done
[[ $ok == 1 ]] || fail "the agent did not register or /metrics did not answer"
sleep 1.5  # one more Lease round trip and a few ticks

for who in coordinator agent; do
  url=coord_url; [[ $who == agent ]] && url=agent_url
  fetch "${!url}" >"$work/$who.prom"
  lines=$(grep -c '^triage_' "$work/$who.prom" || true)
  [[ $lines -gt 0 ]] || fail "$who /metrics has no triage_ series"
  if ! out=$(promtool check metrics <"$work/$who.prom" 2>&1); then
    echo "$out" >&2
    fail "promtool check metrics failed on the $who's /metrics"
  fi
  echo "metrics_lint_test: $who /metrics: $lines triage_ samples, promtool check metrics clean"
done
# No id may be a label value: the agent's id and the sweep/shard id prefixes never appear.
if grep -E 'lint-agent|"sw-[0-9]|"sh-[0-9]' "$work/coordinator.prom" "$work/agent.prom"; then
  fail "an agent, sweep or shard id is used as a label value"
fi
