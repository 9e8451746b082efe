#!/usr/bin/python3
"""The numbers an operator reads agree, on `make demo`'s own cluster.

    demo_cluster_test.py BUILD_DIR SOURCE_DIR

Runs scripts/demo.sh with KEEP=1 into a temp dir (its coordinator and three agents on loopback,
the playbook sweep and the nightly sweep), then on that cluster:
  - starts a third sweep and cancels it once it has decided something;
  - for each of the three sweeps (two finished, one cancelled): `sweep status -o json`, the last
    line of `sweep watch` and report.json (`sweep report`) give the same decided, total and
    review counts, and status and report the same counts by outcome, each shown on the line;
  - the coordinator's /metrics, scraped after they ended: no entry is left queued or running,
    every entry is done, triage_entries_done_total counts each entry done with a result once
    (the sum of the sweeps' done entries that have an outcome label, no_result aside: the
    decided ones and a nightly sweep's unconfirmed ones), triage_entry_outcomes_total counts
    each decided entry once (the sum of the sweeps' decided counts, settled at the merge or the
    cancel), no running sweep is exported, the sweeps by state are 2 succeeded and 1
    cancelled, and the build info is there;
  - the failure clusters: every triage_failure_cluster_entries series has labels rank and
    cluster (c- and 8 hex digits), each with exactly one triage_failure_cluster_info series of
    the same cluster, value 1 and a non-empty signature; together they are the first ten
    clusters of report.json of the demo sweep that ended last (id, rank, size, signature);
  - promtool evaluates dashboards/alerts.yaml over the scraped values held for three hours:
    no alert fires on the idle farm.
The cluster is stopped at the end (scripts/demo.sh stop), whatever happened.
"""
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

BUILD, SRC = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
CTL = os.path.join(BUILD, "coordinator/triagectl/triagectl")
FAILURES = []


def fail(msg):
    FAILURES.append(msg)
    print("FAIL: " + msg, flush=True)


def expect_eq(what, a, b):
    if a != b:
        fail("%s: %r != %r" % (what, a, b))


def ctl(conn, *args, check=True):
    # A connection that times out while the machine is loaded (the other suites run beside this
    # one on CI's two cores) is tried again, as an operator would; a coordinator that stays
    # unreachable still fails the test.
    for _ in range(5):
        r = subprocess.run([CTL, *args, "--coordinator", conn, "--insecure"], capture_output=True,
                           text=True, timeout=600)
        if r.returncode != 2 or "cannot reach the coordinator" not in r.stderr:
            break
        time.sleep(2)
    if check and r.returncode != 0:
        raise RuntimeError("triagectl %s: exit %d: %s%s" % (" ".join(args), r.returncode,
                                                          r.stdout[-2000:], r.stderr[-2000:]))
    return r


def status(conn, sweep):
    return json.loads(ctl(conn, "sweep", "status", sweep, "-o", "json").stdout)


def last_watch_line(conn, sweep):
    """The last progress line `sweep watch` prints for an ended sweep."""
    r = ctl(conn, "sweep", "watch", sweep, check=False)
    lines = [l for l in r.stdout.splitlines() if l.startswith("[")]
    if not lines:
        raise RuntimeError("sweep watch %s printed no progress line: %s" % (sweep, r.stdout))
    return lines[-1]


def scrape(url):
    """{(name, labels text): value} of a Prometheus text exposition."""
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)(\s+\d+)?$", line)
        if not m:
            raise RuntimeError("cannot read the /metrics line %r" % line)
        samples[(m.group(1), m.group(2) or "")] = float(m.group(3))
    return samples


LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
CLUSTER_ID = re.compile(r"^c-[0-9a-f]{8}$")


def labels_of(text):
    """{name: value} of a series' label text ('{a="x",b="y"}'), the exposition's escapes undone."""
    out = {}
    for m in LABEL.finditer(text):
        out[m.group(1)] = re.sub(r"\\(.)", lambda e: "\n" if e.group(1) == "n" else e.group(1),
                                 m.group(2))
    return out


def total(samples, name, **labels):
    s = 0.0
    for (n, lab), v in samples.items():
        if n != name:
            continue
        if all('%s="%s"' % (k, v_) in lab for k, v_ in labels.items()):
            s += v
    return s


def check_sweep(conn, sweep, out_dir):
    """status, the watch line and report.json agree on one sweep; its status and report.json are
    returned."""
    st = status(conn, sweep)
    e = st["entries"]
    line = last_watch_line(conn, sweep)
    ctl(conn, "sweep", "report", sweep, "--out", out_dir)
    report = json.load(open(os.path.join(out_dir, "report.json")))
    t = report["totals"]
    print("%s %s: %s" % (sweep, st["state"], line), flush=True)
    expect_eq(sweep + " decided (status vs report)", e.get("decided", 0), t["decided"])
    expect_eq(sweep + " entries (status vs report)", e.get("total", 0), t["entries"])
    expect_eq(sweep + " review (status vs report)", e.get("review", 0), t["review"])
    expect_eq(sweep + " by outcome (status vs report)", e.get("by_outcome", {}), t["by_outcome"])
    if "%d/%d entries decided" % (t["decided"], t["entries"]) not in line:
        fail("%s: the watch line does not say %d/%d entries decided: %s"
             % (sweep, t["decided"], t["entries"], line))
    if "review=%d" % t["review"] not in line:
        fail("%s: the watch line does not say review=%d: %s" % (sweep, t["review"], line))
    for label, n in t["by_outcome"].items():
        if "%s=%d" % (label, n) not in line:
            fail("%s: the watch line does not show %s=%d: %s" % (sweep, label, n, line))
    if "provisional" in line:
        fail("%s: an ended sweep's line is not provisional: %s" % (sweep, line))
    expect_eq(sweep + " report state", report["state"], st["state"])
    return st, report


def check_clusters(samples, report, sweep):
    """The failure-cluster gauges against report.json of the sweep that ended last (the one whose
    outputs set them): one triage_failure_cluster_entries{rank, cluster} series per cluster of
    its first ten, and one triage_failure_cluster_info{cluster, signature} = 1 for each."""
    sizes = {}  # cluster id -> (rank, entries)
    for (name, text), v in samples.items():
        if name != "triage_failure_cluster_entries":
            continue
        lab = labels_of(text)
        if set(lab) != {"rank", "cluster"}:
            fail("triage_failure_cluster_entries%s: labels %s, expected rank and cluster"
                 % (text, sorted(lab)))
            continue
        if not CLUSTER_ID.match(lab["cluster"]):
            fail("triage_failure_cluster_entries%s: cluster %r is not c- and 8 hex digits"
                 % (text, lab["cluster"]))
        if lab["cluster"] in sizes:
            fail("triage_failure_cluster_entries: cluster %s twice" % lab["cluster"])
        sizes[lab["cluster"]] = (lab["rank"], v)
    info = {}  # cluster id -> [signature, ...]
    for (name, text), v in samples.items():
        if name != "triage_failure_cluster_info":
            continue
        lab = labels_of(text)
        if set(lab) != {"cluster", "signature"}:
            fail("triage_failure_cluster_info%s: labels %s, expected cluster and signature"
                 % (text, sorted(lab)))
            continue
        expect_eq("triage_failure_cluster_info%s" % text, v, 1.0)
        if not lab["signature"]:
            fail("triage_failure_cluster_info%s: empty signature" % text)
        info.setdefault(lab["cluster"], []).append(lab["signature"])
    for cluster in sorted(sizes):
        if len(info.get(cluster, [])) != 1:
            fail("cluster %s: %d triage_failure_cluster_info series, expected 1: %s"
                 % (cluster, len(info.get(cluster, [])), info.get(cluster, [])))
    for cluster in sorted(set(info) - set(sizes)):
        fail("triage_failure_cluster_info of cluster %s, which has no "
             "triage_failure_cluster_entries series" % cluster)
    expected = {c["id"]: (str(i + 1), float(c["size"]), c["signature"])
                for i, c in enumerate(report.get("clusters", [])[:10])}
    got = {c: (rank, n, info[c][0] if len(info.get(c, [])) == 1 else None)
           for c, (rank, n) in sizes.items()}
    expect_eq("failure clusters on /metrics (cluster: rank, entries, signature) vs report.json of "
              + sweep, got, expected)
    print("failure clusters exported: %d (report.json of %s has %d)"
          % (len(sizes), sweep, len(report.get("clusters", []))), flush=True)
    if not expected and not sizes:
        print("note: %s has no failure cluster: the cluster labels had nothing to check" % sweep,
              flush=True)


def promtool_idle(samples, work):
    """promtool test rules: the scraped values held for 3 hours fire no alert."""
    rules = os.path.join(SRC, "dashboards/alerts.yaml")
    names = re.findall(r"^\s*- alert:\s*(\S+)", open(rules).read(), re.M)
    if len(names) < 6:
        fail("only %d alerts in %s" % (len(names), rules))
    series = []
    for (name, labels), v in sorted(samples.items()):
        if not math.isfinite(v):
            continue
        series.append({"series": name + labels, "values": "%s+0x180" % repr(v)})
    test = {
        "rule_files": [rules],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": series,
            "alert_rule_test": [{"eval_time": "180m", "alertname": n, "exp_alerts": []}
                                for n in names],
        }],
    }
    path = os.path.join(work, "idle_test.yaml")
    with open(path, "w") as f:
        json.dump(test, f)  # JSON is YAML
    r = subprocess.run(["promtool", "test", "rules", path], capture_output=True, text=True,
                       timeout=300)
    print("promtool on %d scraped series, %d alerts: exit %d" % (len(series), len(names),
                                                                r.returncode), flush=True)
    if r.returncode != 0:
        fail("an alert fires on the idle farm:\n" + r.stdout[-4000:] + r.stderr[-4000:])


def main():
    work = tempfile.mkdtemp(prefix="triage-demo-cluster-")
    out = os.path.join(work, "demo-out")
    env = dict(os.environ, KEEP="1", DEMO_OUT=out)
    env.pop("TRIAGECTL_SERVER", None)
    demo = [os.path.join(SRC, "scripts/demo.sh"), os.path.relpath(BUILD, SRC)]
    try:
        t0 = time.time()
        r = subprocess.run(demo, cwd=SRC, env=env, capture_output=True, text=True, timeout=1500)
        print("make demo (KEEP=1): exit %d in %.0fs" % (r.returncode, time.time() - t0), flush=True)
        if r.returncode != 0:
            fail("the demo failed:\n" + r.stdout[-4000:] + r.stderr[-4000:])
            return
        ports = json.load(open(os.path.join(out, "run/coordinator/ports.json")))
        conn = "127.0.0.1:%d" % ports["control_port"]
        metrics = "http://127.0.0.1:%d/metrics" % ports["metrics_port"]

        listed = json.loads(ctl(conn, "sweep", "list", "-o", "json").stdout)["sweeps"]
        demo_sweeps = [s["id"] for s in listed]
        expect_eq("the demo's sweeps", len(demo_sweeps), 2)
        first = status(conn, demo_sweeps[0])

        # A third sweep, cancelled once it decided something.
        started = json.loads(ctl(conn, "sweep", "start", "--repo", first["repo"], "--arch",
                                 "n150,p150", "--reason", "cancelled on purpose", "-o",
                                 "json").stdout)
        cancelled = started["id"]
        deadline = time.time() + 300
        while time.time() < deadline:
            s = status(conn, cancelled)
            if s["state"] not in ("running", "blocked") or s["entries"].get("decided", 0) >= 3:
                break
            time.sleep(0.5)
        ctl(conn, "sweep", "cancel", cancelled, "--reason", "demo cluster test")
        # The shards that were running end; the sweep's counts stop moving.
        deadline = time.time() + 120
        while time.time() < deadline:
            by_state = status(conn, cancelled).get("shards_by_state", {})
            if by_state.get("leased", 0) + by_state.get("running", 0) == 0:
                break
            time.sleep(0.5)

        decided = entries = with_result = 0
        states = {}
        last = None  # (finished, sweep, report.json) of the sweep that ran to its end last
        for sweep in demo_sweeps + [cancelled]:
            st, report = check_sweep(conn, sweep, os.path.join(work, "out-" + sweep))
            decided += st["entries"].get("decided", 0)
            entries += st["entries"].get("total", 0)
            # Done with a result: every done entry but those without one (no_result).
            with_result += sum(n for label, n in st["entries"].get("by_outcome", {}).items()
                               if label != "no_result")
            states[st["state"]] = states.get(st["state"], 0) + 1
            finished = int(st.get("finished_unix_ms", 0))
            if st["state"] == "succeeded" and (last is None or finished > last[0]):
                last = (finished, sweep, report)
        expect_eq("sweep states", states, {"succeeded": 2, "cancelled": 1})
        if status(conn, cancelled)["entries"].get("decided", 0) == 0:
            fail("the cancelled sweep decided nothing before it was cancelled: nothing checked")

        time.sleep(2)  # a tick after the end: the running sweeps' gauge is refreshed
        samples = scrape(metrics)
        expect_eq("triage_entries not done", total(samples, "triage_entries")
                  - total(samples, "triage_entries", state="done"), 0.0)
        expect_eq("triage_entries done vs the sweeps' entries",
                  total(samples, "triage_entries", state="done"), float(entries))
        expect_eq("triage_entries_done_total vs the sweeps' entries done with a result",
                  total(samples, "triage_entries_done_total"), float(with_result))
        expect_eq("triage_entry_outcomes_total vs the sweeps' decided entries",
                  total(samples, "triage_entry_outcomes_total"), float(decided))
        expect_eq("triage_running_sweep_entries after every sweep ended",
                  [k for k in samples if k[0] == "triage_running_sweep_entries"], [])
        for state, n in (("succeeded", 2), ("cancelled", 1), ("running", 0), ("merging", 0)):
            expect_eq("triage_sweeps{state=%s}" % state,
                      total(samples, "triage_sweeps", state=state), float(n))
        if not any(k[0] == "triage_coordinator_build_info" for k in samples):
            fail("no triage_coordinator_build_info")
        if last is None:
            fail("no succeeded sweep to compare the failure clusters with")
        else:
            check_clusters(samples, last[2], last[1])
        promtool_idle(samples, work)
    finally:
        subprocess.run([os.path.join(SRC, "scripts/demo.sh"), "stop"], cwd=SRC, env=env,
                       capture_output=True, text=True, timeout=120)
        if not FAILURES:
            subprocess.run(["rm", "-rf", work])
        else:
            print("kept for a look: " + work, flush=True)


if __name__ == "__main__":
    main()
    if FAILURES:
        print("demo_cluster_test: %d failure(s)" % len(FAILURES))
        sys.exit(1)
    print("demo_cluster_test: ok")
