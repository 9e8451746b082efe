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
#   5. nightly maintenance (docs/nightly.md): the fixture's runner writes two nights of CI results
#      (tests/fixtures/make-nightly.sh), a nightly sweep confirms the rules' candidates on the
#      n150 and p150 agents, and writes demo-out/nightly/{tt-xla.patch,report.md,report.json};
#   6. shows what the classifier takes from tt-xla's real training YAML (../shared/data), when present.
#
# Usage: scripts/demo.sh [BUILD_DIR]   (KEEP=1: leave the cluster running afterwards)
#        scripts/demo.sh stop          (stop the cluster a KEEP=1 run left running)
#
# DEMO_OUT=DIR writes everything under DIR instead of demo-out/. TRIAGE_IMAGE=IMAGE runs the
# coordinator from that container image and the agents from TRIAGE_AGENT_IMAGE (default: the
# same), with podman on the host's network, as the image's own non-root user; triagectl stays
# the host's (scripts/image-test.sh, docs/image.md). The run directory is mounted at the same
# path, so every path in the sweep means the same inside and outside.
#
# Every process is stopped on exit, unless KEEP=1 and the demo succeeded: then the coordinator
# and the agents keep running, their pids are in demo-out/run/pids, and `scripts/demo.sh stop`
# stops exactly those. Logs: demo-out/run/*.log.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${DEMO_OUT:-$root/demo-out}
run=$out/run
pidfile=$run/pids
keep=${KEEP:-0}
[[ $keep == 0 || $keep == 1 ]] || { echo "demo: KEEP must be 0 or 1, got '$keep'" >&2; exit 2; }

# $pidfile lines: PID<tab>EXE<tab>MARK. A pid is the demo's process only while /proc/PID/cmdline
# still starts with EXE and has MARK (the process's own --data_dir, under demo-out/run) as an
# argument: a pid the kernel has given to another process since is never touched.
is_ours() {
  local pid=$1 exe=$2 mark=$3 argv a
  [[ -r /proc/$pid/cmdline ]] || return 1
  mapfile -d '' -t argv <"/proc/$pid/cmdline" 2>/dev/null || return 1
  [[ ${#argv[@]} -gt 0 && ${argv[0]} == "$exe" ]] || return 1
  for a in "${argv[@]:1}"; do [[ $a == "$mark" ]] && return 0; done
  return 1
}

# Stops the processes of $pidfile that are still ours: SIGTERM, then up to 15 s for them to go.
stop_recorded() {
  [[ -f $pidfile ]] || { echo "demo: nothing to stop (no $pidfile)"; return 0; }
  local pid exe mark i pids_=() exes=() marks=()
  while IFS=$'\t' read -r pid exe mark; do
    [[ -n $pid ]] || continue
    if is_ours "$pid" "$exe" "$mark"; then
      echo "demo: stopping $(basename "$exe") (pid $pid)"
      kill -TERM "$pid" 2>/dev/null || true
      pids_+=("$pid") exes+=("$exe") marks+=("$mark")
    else
      echo "demo: pid $pid is no longer the demo's $(basename "$exe"): left alone"
    fi
  done <"$pidfile"
  local left=
  for _ in $(seq 1 150); do
    left=
    for i in "${!pids_[@]}"; do
      is_ours "${pids_[$i]}" "${exes[$i]}" "${marks[$i]}" && left+=" ${pids_[$i]}"
    done
    [[ -z $left ]] && break
    sleep 0.1
  done
  if [[ -n $left ]]; then
    echo "demo: still running after 15 s:$left (see $run/*.log)" >&2
    return 1
  fi
  rm -f "$pidfile"
  echo "demo: stopped"
}

if [[ ${1:-} == stop ]]; then
  stop_recorded
  exit
fi

build=${1:-build}
ctl="$root/$build/coordinator/triagectl/triagectl"
coordinator="$root/$build/coordinator/triage-coordinator"
agent="$root/$build/agent/triage-agent"
data=${TRIAGE_SHARED_DIR:-$root/../shared}/data/tt-xla

for b in "$ctl" "$coordinator" "$agent"; do
  [[ -x $b ]] || { echo "demo: $b is missing; run 'make demo' (it builds first)" >&2; exit 1; }
done
[[ -x /usr/bin/python3 ]] || { echo "demo: /usr/bin/python3 is missing; run scripts/install-deps.sh" >&2; exit 1; }

# A fixed, empty git identity: the demo must not depend on the user's git config.
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1

image=${TRIAGE_IMAGE:-}
agent_image=${TRIAGE_AGENT_IMAGE:-$image}
if [[ -n $image ]]; then
  command -v podman >/dev/null || { echo "demo: TRIAGE_IMAGE needs podman (scripts/install-deps.sh)" >&2; exit 1; }
  for i in "$image" "$agent_image"; do
    podman image exists "$i" || { echo "demo: no image $i (make image)" >&2; exit 1; }
  done
  source scripts/podman-lib.sh
  # The containers run as the image's user, which owns the run directory; the host's git (as
  # another user) is told that those repositories are safe to read, in a global config file
  # (git drops command-line config when it runs upload-pack for a local clone).
  image_uid=$("${podman_run[@]}" --network none "$image" id -u)
fi
export GIT_AUTHOR_NAME=triage-demo GIT_AUTHOR_EMAIL=triage-demo@localhost
export GIT_COMMITTER_NAME=triage-demo GIT_COMMITTER_EMAIL=triage-demo@localhost

# A cluster left by KEEP=1 would lose its directory under its feet: stop it first.
if [[ -f $pidfile ]]; then
  while IFS=$'\t' read -r pid exe mark; do
    if [[ -n $pid ]] && is_ours "$pid" "$exe" "$mark"; then
      echo "demo: the cluster of an earlier KEEP=1 run is still running (pid $pid);" \
           "stop it with: scripts/demo.sh stop" >&2
      exit 1
    fi
  done <"$pidfile"
fi

pids=()
containers=()
stop_all() {
  local status=$?
  if [[ $status -eq 0 && $keep == 1 ]]; then exit 0; fi
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for c in "${containers[@]}"; do podman rm -f -t 5 "$c" >/dev/null 2>&1 || true; done
  rm -f "$pidfile"
  if [[ $status -ne 0 ]]; then
    echo "demo: failed (exit $status); logs are in $run/" >&2
  fi
  exit $status
}
trap stop_all EXIT
trap 'exit 130' INT TERM

# Starts a daemon in the background, its output in LOG; records it in $pidfile.
launch() {
  local log=$1 data_dir=$2
  shift 2
  "$@" >"$log" 2>&1 &
  pids+=($!)
  printf '%s\t%s\t%s\n' "$!" "$1" "$data_dir" >>"$pidfile"
}

# The argv that runs PROGRAM (a binary of the build) here, or in IMAGE as container NAME on the
# host's network with the run directory at its own path.
in_place() {
  local img=$1 name=$2 program=$3
  shift 3
  if [[ -z $img ]]; then
    cmd=("$program" "$@")
    return
  fi
  containers+=("$name")
  cmd=("${podman_run[@]}" --name "$name" --network host -v "$run:$run" "$img"
       "$(basename "$program")" "$@")
}

start=$(date +%s)
rm -rf "$out" && mkdir -p "$run"
if [[ -n $image ]]; then
  printf '[safe]\n\tdirectory = *\n' >"$out/host.gitconfig"
  export GIT_CONFIG_GLOBAL=$out/host.gitconfig
fi

echo "== 1. Workspace: the ttxla-mini fixture as a git repository with its submodule"
repo=$(tests/fixtures/make-workspace.sh "$run/src")
echo "   tt-xla checkout: $repo"
for a in cpu n150 p150; do
  tests/fixtures/make-workspace.sh --clone "$repo" "$run/ws-$a" >/dev/null
done
# The fixture emulates the devices: each device agent's self-check looks for its one device in
# a stand-in for /dev/tenstorrent (--device_path; docs/farm.md, "Only a working agent is a
# witness").
for a in n150 p150; do
  mkdir -p "$run/dev-$a" && : >"$run/dev-$a/0"
done

if [[ -n $image ]]; then
  chown -R "$image_uid" "$run"
  echo "   containers: coordinator from $image, agents from $agent_image (uid $image_uid)"
fi

echo "== 2. Coordinator and three agents on loopback"
# The fixture's .test_durations are real measurements of emulated tests (milliseconds): trusted
# from 0 s, so the report's predicted makespan comes from them, not from estimates for real models.
in_place "$image" "triage-demo-coordinator-$$" "$coordinator" --insecure --data_dir "$run/coordinator" \
  --agent_address 127.0.0.1:0 --control_address 127.0.0.1:0 --metrics_address 127.0.0.1:0 \
  --tick_ms 200 --heartbeat_interval_seconds 2 --min_trusted_seconds 0
launch "$run/coordinator.log" "$run/coordinator" "${cmd[@]}"
for _ in $(seq 1 300); do
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
  if [[ $a == cpu ]]; then
    args+=(--cpu_only)
  else
    args+=(--arch "$a" --device_path "$run/dev-$a")
  fi
  in_place "$agent_image" "triage-demo-agent-$a-$$" "$agent" "${args[@]}"
  launch "$run/agent-$a.log" "$run/agent-$a" "${cmd[@]}"
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

echo
echo "== 5. Nightly maintenance: two nights of the fixture's CI results, confirmed on the fleet"
tests/fixtures/make-nightly.sh "$repo" "$run/nightly" >"$run/make-nightly.log" 2>&1 ||
  { cat "$run/make-nightly.log" >&2; exit 1; }
echo "   the fixture's runner wrote $(find "$run/nightly" -name '*.xml' | wc -l) JUnit files" \
     "under $run/nightly (night-1, night-2; n150 and p150)"
nightly=$("$ctl" sweep start --insecure --repo "$repo" --nightly "$run/nightly/night-1" \
            --nightly "$run/nightly/night-2" --reason "make demo: nightly maintenance" -o json |
          sed -n 's/.*"id": *"\([^"]*\)".*/\1/p' | head -1)
[[ -n $nightly ]] || { echo "demo: the nightly sweep did not start" >&2; exit 1; }
echo "   sweep $nightly"
"$ctl" sweep watch --insecure "$nightly"
mkdir -p "$out/nightly"
"$ctl" sweep patch --insecure "$nightly" --out "$out/nightly"
"$ctl" sweep report --insecure "$nightly" --out "$out/nightly" >/dev/null
/usr/bin/python3 - "$out/nightly/report.json" <<'EOF_NIGHTLY'
import json, sys
n = json.load(open(sys.argv[1]))["nightly"]
i = n["intake"]
print(f"   {i['runs']} runs, {i['records']} records ({i['mapped']} mapped); candidates "
      + ", ".join(f"{k} {v}" for k, v in sorted(i["candidates"].items())))
for section, lines in n["sections"].items():
    archs = {}
    for l in lines:
        archs.setdefault(l["key"], []).append(l["arch"])
    for key, on in sorted(archs.items()):
        print(f"     {section:<12} {key} ({', '.join(on)})")
EOF_NIGHTLY
echo "   report: $out/nightly/report.md, patch: $out/nightly/tt-xla.patch"

if [[ -f $data/sweep-parents/unpack_parent_test_config_training_single_device.yaml ]]; then
  echo
  echo "== 6. The same classifier on tt-xla's real training YAML (before a real bulk sweep)"
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
"$ctl" sweep status --insecure "$sweep" -o json >"$run/sweep-final.json"
/usr/bin/python3 - "$out/report.json" "$run/sweep-final.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["totals"]
print(f"   sweep {r['sweep']} {r['state']}: {t['decided']} of {t['entries']} entries decided")
for k, v in sorted(t["by_outcome"].items()):
    print(f"     {k:<36} {v}")
print(f"   flagged for review: {t['review']}, entries in conflict: {t['conflicted_entries']}")
m = r.get("makespan", {})
if m:
    print(f"   makespan: predicted {m['predicted_seconds']:.0f}s from {m.get('predicted_from') or '-'}"
          f" ({m.get('entries_recorded', 0)} entries recorded, {m.get('entries_estimated', 0)} estimated),"
          f" actual {m['actual_seconds']:.0f}s")
# Entries on which one shard ran several playbooks (docs/playbooks.md, "Chaining").
for e in r["entries"]:
    if len(e.get("playbooks", [])) > 1:
        print(f"   chained: {e['key']}: {' -> '.join(e['playbooks'])} (fix {e.get('fix_path', '?')})")
# The same counts as `triagectl sweep status` (one function computes both).
e = json.load(open(sys.argv[2]))["entries"]
same = (e.get("by_outcome", {}) == t["by_outcome"] and e.get("review", 0) == t["review"]
        and e.get("total", 0) == t["entries"])
if not same:
    sys.exit(f"demo: report totals {t} differ from sweep status {e}")
EOF
for f in tt-xla.patch tt-forge-models.patch report.md report.json; do
  printf '   %-22s %s (%s lines)\n' "$f" "$out/$f" "$(wc -l <"$out/$f")"
done
echo "   evidence per shard:   $out/evidence/"

if [[ $keep == 1 ]]; then
  c="$build/coordinator/triagectl/triagectl"
  conn="--coordinator 127.0.0.1:$control_port --insecure"
  echo
  echo "== The cluster keeps running (KEEP=1): coordinator and agents demo-cpu, demo-n150, demo-p150"
  echo "   pids in $pidfile, logs in $run/"
  echo "   Try the on-call verbs against it:"
  echo "     $c agents list $conn"
  echo "     $c sweep status $sweep $conn"
  echo "     $c shards list --stuck $conn"
  echo "     $c agents drain demo-p150 --reason 'try drain' $conn"
  echo "     $c agents undrain demo-p150 --reason 'try undrain' $conn"
  echo "     $c sweep start --repo $repo --arch n150,p150 --executor native --reason again --watch $conn"
  echo "   (or export TRIAGECTL_SERVER=127.0.0.1:$control_port TRIAGECTL_INSECURE=1)"
  echo "   Stop exactly these processes with: scripts/demo.sh stop"
fi
