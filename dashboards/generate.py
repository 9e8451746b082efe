#!/usr/bin/python3
"""Writes the Grafana dashboards dashboards/*.json from the panel lists below.

    /usr/bin/python3 dashboards/generate.py          rewrite the JSON files (and the Helm chart's copies)
    /usr/bin/python3 dashboards/generate.py --check  exit 1 if a JSON file differs from this source

Every expression here is evaluated against a real Prometheus during a fixture sweep by
tests/observability/dashboards_test.py. Variables: $arch, $playbook (multi-value, regex match).
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CHART = os.path.join(HERE, "..", "charts", "triage-farm", "dashboards")
DS = {"type": "prometheus", "uid": "${datasource}"}


def panel(title, exprs, unit="short", kind="timeseries", legend=None, description=""):
    if isinstance(exprs, str):
        exprs = [exprs]
    targets = []
    for i, e in enumerate(exprs):
        t = {"refId": chr(ord("A") + i), "datasource": DS, "expr": e}
        if legend:
            t["legendFormat"] = legend[i] if isinstance(legend, list) else legend
        targets.append(t)
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DS,
        "targets": targets,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {},
    }


def variables(names):
    out = [{
        "name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus",
        "current": {}, "hide": 0,
    }]
    queries = {
        "arch": "label_values(triage_shards, arch)",
        "playbook": "label_values(triage_entries, playbook)",
    }
    for n in names:
        out.append({
            "name": n, "label": n, "type": "query", "datasource": DS,
            "definition": queries[n], "query": {"query": queries[n], "refId": n},
            "multi": True, "includeAll": True, "allValue": ".*", "current": {}, "refresh": 2,
            "hide": 0,
        })
    return {"list": out}


def dashboard(uid, title, description, panels, vars_):
    laid = []
    for i, p in enumerate(panels):
        p = dict(p, id=i + 1, gridPos={"h": 8, "w": 12, "x": (i % 2) * 12, "y": (i // 2) * 8})
        laid.append(p)
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["triage-farm"],
        "timezone": "utc",
        "schemaVersion": 38,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-24h", "to": "now"},
        "templating": variables(vars_),
        "annotations": {"list": []},
        "panels": laid,
    }


RI = "$__rate_interval"

SWEEP = dashboard(
    "triage-sweep-progress", "triage-farm / sweep progress",
    "Entries done and decided by outcome and stage, what remains, shards per arch, queue and run "
    "times.",
    [
        # Progress is the entries done: a sweep's outcomes are counted only when its counts
        # settle, so they arrive in one step at its end.
        panel("Entries decided by outcome and stage",
              f'sum by (outcome, stage) (increase(triage_entry_outcomes_total{{playbook=~"$playbook"}}[{RI}]))',
              legend="{{outcome}} {{stage}}",
              description="Each decided entry counted once, when its sweep's counts settle (the "
                          "merge, or a cancel), under the label sweep status and report.json "
                          "count it under (docs/farm.md, \"Decided entries\"): a sweep's "
                          "outcomes arrive in one step at its end. Progress while sweeps run: "
                          "\"Entries done\"."),
        panel("Entries done",
              f'sum by (playbook) (increase(triage_entries_done_total{{playbook=~"$playbook"}}[{RI}]))',
              legend="{{playbook}}",
              description="Entries done with a result (every shard that carries one ended), "
                          "each counted once, as their shards end: the farm's progress while "
                          "sweeps run."),
        panel("Entries remaining",
              'sum by (state) (triage_entries{playbook=~"$playbook", state!="done"})',
              legend="{{state}}"),
        panel("ETA of the running sweeps (remaining / entries done per second over 15m)",
              'sum(triage_entries{playbook=~"$playbook", state!="done"}) / '
              'clamp_min(sum(rate(triage_entries_done_total{playbook=~"$playbook"}[15m])), 0.0001)',
              unit="s", kind="stat"),
        panel("Shards by state per arch", 'sum by (arch, state) (triage_shards{arch=~"$arch"})',
              legend="{{arch}} {{state}}"),
        panel("Queue wait p50 / p90 per playbook",
              [f'histogram_quantile(0.5, sum by (le, playbook) (rate(triage_shard_queue_seconds_bucket{{arch=~"$arch", playbook=~"$playbook"}}[{RI}])))',
               f'histogram_quantile(0.9, sum by (le, playbook) (rate(triage_shard_queue_seconds_bucket{{arch=~"$arch", playbook=~"$playbook"}}[{RI}])))'],
              unit="s", legend=["p50 {{playbook}}", "p90 {{playbook}}"]),
        panel("Run time p50 / p90 per playbook",
              [f'histogram_quantile(0.5, sum by (le, playbook) (rate(triage_shard_run_seconds_bucket{{arch=~"$arch", playbook=~"$playbook"}}[{RI}])))',
               f'histogram_quantile(0.9, sum by (le, playbook) (rate(triage_shard_run_seconds_bucket{{arch=~"$arch", playbook=~"$playbook"}}[{RI}])))'],
              unit="s", legend=["p50 {{playbook}}", "p90 {{playbook}}"]),
        panel("Merge conflicts", 'sum by (kind) (triage_merge_conflicts_total)', legend="{{kind}}"),
        panel("Sweeps by state", 'sum by (state) (triage_sweeps)', legend="{{state}}"),
        # By cluster id, not rank: a cluster stays one line over the weeks when its rank changes.
        # Its whole signature comes from the info gauge (one series per cluster id; max by on the
        # right keeps the match one-to-one when two targets export the same cluster).
        panel("Top failure clusters",
              'max by (cluster, signature) (triage_failure_cluster_entries'
              ' * on(cluster) group_left(signature)'
              ' max by (cluster, signature) (triage_failure_cluster_info))',
              legend="{{signature}}",
              description="Entries in the ten largest failure clusters of the latest finished "
                          "sweep, one line per cluster id (c- and 8 hex digits, as report.json's "
                          "clusters have it), named by its whole signature (report.md, "
                          "\"Failure clusters\"); triagectl sweep diff A B shows how they moved "
                          "between two sweeps."),
        # The one per-sweep family: running sweeps only, so the label set stays bounded.
        panel("Running sweeps", 'sum by (sweep, state) (triage_running_sweep_entries)',
              legend="{{sweep}} {{state}}",
              description="Entries of each running sweep by state, as triagectl sweep status "
                          "counts them; a sweep leaves the panel when it ends (docs/farm.md, "
                          "\"Which sweep\")."),
    ],
    ["arch", "playbook"])

FLEET = dashboard(
    "triage-fleet", "triage-farm / fleet",
    "Agents per arch, heartbeats, lease expirations, requeues, rejected results, quarantine.",
    [
        panel("Agents by state per arch", 'sum by (arch, state) (triage_agents{arch=~"$arch"})',
              legend="{{arch}} {{state}}"),
        panel("Heartbeat age p90 per arch",
              f'histogram_quantile(0.9, sum by (le, arch) (rate(triage_agent_heartbeat_age_seconds_bucket{{arch=~"$arch"}}[{RI}])))',
              unit="s", legend="{{arch}}"),
        panel("Lease expirations",
              f'sum by (arch, reason) (increase(triage_lease_expirations_total{{arch=~"$arch"}}[{RI}]))',
              legend="{{arch}} {{reason}}"),
        panel("Backup leases of stragglers, and device time they ran",
              [f'sum by (arch, outcome) (increase(triage_backup_leases_total{{arch=~"$arch"}}[{RI}]))',
               f'sum by (arch) (increase(triage_backup_device_seconds_total{{arch=~"$arch"}}[{RI}])) / 3600'],
              legend=["{{arch}} {{outcome}}", "{{arch}} device hours"],
              description=("Granted, then won (the backup's result decided the shard) or lost; "
                           "and the hours backup attempts ran, whatever their outcome "
                           "(docs/farm.md, \"Backup leases\").")),
        panel("Requeues, manual vs auto",
              f'sum by (source) (increase(triage_requeues_total{{arch=~"$arch"}}[{RI}]))',
              legend="{{source}}"),
        panel("Stale results rejected",
              f'sum by (reason) (increase(triage_stale_results_rejected_total[{RI}]))',
              legend="{{reason}}"),
        panel("Quarantined shards", 'sum by (arch) (triage_shards{arch=~"$arch", state="quarantined"})',
              legend="{{arch}}"),
        panel("Agent step time p90",
              f'histogram_quantile(0.9, sum by (le, playbook, step) (rate(triage_agent_step_seconds_bucket{{playbook=~"$playbook"}}[{RI}])))',
              unit="s", legend="{{playbook}} {{step}}"),
        panel("Verify shards per lease p50 / p90 per arch (batched verification)",
              [f'histogram_quantile(0.5, sum by (le, arch) (rate(triage_verify_batch_shards_bucket{{arch=~"$arch"}}[{RI}])))',
               f'histogram_quantile(0.9, sum by (le, arch) (rate(triage_verify_batch_shards_bucket{{arch=~"$arch"}}[{RI}])))'],
              legend=["p50 {{arch}}", "p90 {{arch}}"],
              description="Verify shards granted in one lease, one pytest session: 1 when a shard runs alone."),
        panel("Agents scraped up", 'sum by (job) (up{job=~"triage.*"})', legend="{{job}}"),
        panel("Coordinator database commit time p50 / p99",
              [f'histogram_quantile(0.5, sum by (le) (rate(triage_store_commit_seconds_bucket[{RI}])))',
               f'histogram_quantile(0.99, sum by (le) (rate(triage_store_commit_seconds_bucket[{RI}])))'],
              unit="s", legend=["p50", "p99"],
              description="One commit carries every state change staged meanwhile (group commit)."),
    ],
    ["arch", "playbook"])

ONCALL = dashboard(
    "triage-on-call", "triage-farm / on-call",
    "What needs a person: stuck and quarantined shards, the queue, offline agents, the last sweep.",
    [
        panel("Longest time a shard went without progress (stuck above 30m)",
              'max by (arch) (triage_shard_progress_age_max_seconds{arch=~"$arch"})', unit="s",
              legend="{{arch}}",
              description="triagectl shards list --stuck; triagectl shard requeue ID --reason ..."),
        panel("Oldest queued shard", 'max by (arch) (triage_shard_queued_oldest_seconds{arch=~"$arch"})',
              unit="s", legend="{{arch}}"),
        panel("Shards quarantined", 'sum(triage_shards{arch=~"$arch", state="quarantined"})',
              kind="stat"),
        panel("Sweeps blocked (need a person)", 'max(triage_sweeps_blocked)', kind="stat",
              description="triagectl sweep status ID lists the problems"),
        panel("Shards no live agent can take",
              'sum by (arch, reason) (triage_shards_unservable{arch=~"$arch"})',
              legend="{{arch}} {{reason}}",
              description="reason: arch, executor, playbook, devices (no agent offers it), runner "
                          "(its agents cannot run tt-xla's runner), drained, offline"),
        panel("Time since the last successful sweep",
              'time() - max(triage_sweep_last_success_timestamp_seconds)', unit="s", kind="stat"),
        panel("Agents offline", 'sum by (arch) (triage_agents{arch=~"$arch", state="offline"})',
              legend="{{arch}}"),
        panel("Agents that cannot run the runner (leased no native work)",
              'sum by (arch) (triage_agents_runner_problem{arch=~"$arch"})', legend="{{arch}}",
              description="Live agents whose self-check failed (interpreter, pytest's collection "
                          "of the runner, device). triagectl agents list: column RUNNER says "
                          "what failed (docs/farm.md, \"Only a working agent is a witness\")."),
        panel("Database commits failed (changes answered UNAVAILABLE, state reloaded)",
              f'sum(increase(triage_store_commit_failures_total[{RI}]))', kind="stat"),
        panel("Subprocess timeouts on agents",
              f'sum by (step) (increase(triage_agent_subprocess_timeouts_total[{RI}]))',
              legend="{{step}}"),
    ],
    ["arch"])

DASHBOARDS = {"sweep-progress.json": SWEEP, "fleet.json": FLEET, "on-call.json": ONCALL}


def main():
    check = "--check" in sys.argv[1:]
    stale = []
    for name, path in [(n, os.path.join(dir_, n)) for n in DASHBOARDS for dir_ in (HERE, CHART)]:
        d = DASHBOARDS[name]
        text = json.dumps(d, indent=2, sort_keys=True) + "\n"
        if check:
            try:
                with open(path, encoding="utf-8") as f:
                    if f.read() != text:
                        stale.append(os.path.relpath(path, os.path.join(HERE, "..")))
            except FileNotFoundError:
                stale.append(os.path.relpath(path, os.path.join(HERE, "..")))
        else:
            tmp = path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
    if stale:
        print("dashboards out of date (run /usr/bin/python3 dashboards/generate.py): "
              + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
