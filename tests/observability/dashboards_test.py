#!/usr/bin/python3
"""Every dashboard panel and every alert, evaluated by a real Prometheus during a fixture sweep.

    dashboards_test.py BUILD_DIR SOURCE_DIR

Starts (on 127.0.0.1, ports chosen by the OS, everything under a temp dir, all stopped at the end):
a coordinator, three agents (n150, p150, cpu_only) on the ttxla-mini fixture, and Debian's
Prometheus scraping all four every second. Runs a native sweep to the end, then
  - for every target of every panel of dashboards/*.json: substitutes $arch / $playbook with
    values Prometheus has seen and $__rate_interval with 2m, queries /api/v1/query, and fails on
    an error or an empty result at the end and in the middle of the sweep (a panel of running
    sweeps has data only while one runs);
  - triage_running_sweep_entries names the sweep in its middle and has no series at its end;
  - for every alert of dashboards/alerts.yaml: the expression must evaluate without error and
    every metric it names must have series (a threshold makes the expression itself empty when
    nothing is wrong).
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

BUILD, SRC = sys.argv[1], sys.argv[2]
CTL = os.path.join(BUILD, "coordinator/triagectl/triagectl")
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def wait_for(pred, seconds, what):
    end = time.time() + seconds
    while time.time() < end:
        try:
            if pred():
                return
        except Exception:
            pass
        time.sleep(0.2)
    raise RuntimeError("timed out waiting for " + what)


def main():
    work = tempfile.mkdtemp(prefix="triage-dash-")
    procs = []
    env = dict(os.environ, GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1",
               GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@localhost",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@localhost")

    def start(name, argv):
        log = open(os.path.join(work, name + ".log"), "w")
        procs.append((name, subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                             env=env, cwd=work)))

    try:
        mk = os.path.join(SRC, "tests/fixtures/make-workspace.sh")
        repo = subprocess.run([mk, os.path.join(work, "src")], check=True, env=env,
                              capture_output=True, text=True).stdout.strip().splitlines()[-1]
        cdata = os.path.join(work, "coordinator")
        start("coordinator", [os.path.join(BUILD, "coordinator/triage-coordinator"), "--insecure",
                              "--data_dir", cdata, "--agent_address", "127.0.0.1:0",
                              "--control_address", "127.0.0.1:0", "--metrics_address",
                              "127.0.0.1:0", "--tick_ms", "200",
                              "--heartbeat_interval_seconds", "1"])
        wait_for(lambda: os.path.getsize(os.path.join(cdata, "ports.json")) > 0, 20, "ports.json")
        ports = json.load(open(os.path.join(cdata, "ports.json")))
        targets = {"triage-coordinator": ["127.0.0.1:%d" % ports["metrics_port"]],
                   "triage-agent": []}
        for arch in ("cpu", "n150", "p150"):
            ws = os.path.join(work, "ws-" + arch)
            subprocess.run([mk, "--clone", repo, ws], check=True, env=env, capture_output=True)
            mport = free_port()
            targets["triage-agent"].append("127.0.0.1:%d" % mport)
            argv = [os.path.join(BUILD, "agent/triage-agent"), "--insecure", "--coordinator",
                    "127.0.0.1:%d" % ports["agent_port"], "--agent_id", "dash-" + arch,
                    "--workspace", ws, "--data_dir", os.path.join(work, "agent-" + arch),
                    "--executors", "native", "--lease_wait_seconds", "2",
                    "--metrics_address", "127.0.0.1:%d" % mport]
            if arch == "cpu":
                argv += ["--cpu_only"]
            else:
                # The fixture emulates the device: a stand-in for /dev/tenstorrent, one device.
                dev = os.path.join(work, "dev-" + arch)
                os.makedirs(dev)
                open(os.path.join(dev, "0"), "w").close()
                argv += ["--arch", arch, "--device_path", dev]
            start("agent-" + arch, argv)

        # Prometheus: 1 s scrape, data in the temp dir, loopback only, the alert rules loaded.
        prom_port = free_port()
        shutil.copy(os.path.join(SRC, "dashboards/alerts.yaml"), work)
        scrape = [{"job_name": job, "scrape_interval": "1s",
                   "static_configs": [{"targets": t}]} for job, t in targets.items()]
        cfg = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
               "rule_files": [os.path.join(work, "alerts.yaml")], "scrape_configs": scrape}
        with open(os.path.join(work, "prometheus.yml"), "w") as f:
            json.dump(cfg, f)  # JSON is YAML
        start("prometheus", ["prometheus", "--config.file=" + os.path.join(work, "prometheus.yml"),
                             "--storage.tsdb.path=" + os.path.join(work, "tsdb"),
                             "--web.listen-address=127.0.0.1:%d" % prom_port,
                             "--log.level=warn"])
        prom = "http://127.0.0.1:%d" % prom_port
        wait_for(lambda: "Ready" in get(prom + "/-/ready"), 60, "Prometheus ready")

        def query(expr, at=None):
            args = {"query": expr}
            if at is not None:
                args["time"] = "%.3f" % at
            return json.loads(get(prom + "/api/v1/query?" + urllib.parse.urlencode(args)))

        def all_up():
            r = query('up{job=~"triage.*"} == 1')["data"]["result"]
            return len(r) == 4
        wait_for(all_up, 60, "Prometheus scraping the coordinator and three agents")

        ctl = [CTL, "--insecure", "--coordinator", "127.0.0.1:%d" % ports["control_port"]]
        wait_for(lambda: subprocess.run(ctl[:1] + ["agents", "list"] + ctl[1:], capture_output=True,
                                        text=True).stdout.count("dash-") >= 3, 30, "agents")
        out = subprocess.run([CTL, "sweep", "start", "--repo", repo, "--arch", "n150,p150",
                              "--reason", "dashboards test", "-o", "json"] + ctl[1:],
                             check=True, capture_output=True, text=True).stdout
        sweep = json.loads(out)["id"]
        t0 = time.time()
        w = subprocess.run([CTL, "sweep", "watch", sweep] + ctl[1:], capture_output=True, text=True)
        t1 = time.time()
        print("sweep %s ended in %.0fs (exit %d)" % (sweep, t1 - t0, w.returncode), flush=True)
        if w.returncode != 0:
            fail("the sweep did not succeed: " + w.stdout[-500:] + w.stderr[-500:])
        time.sleep(4)  # a few more scrapes after the end

        def values(expr, label):
            return sorted({r["metric"].get(label) for r in query(expr)["data"]["result"]} - {None})
        archs = [a for a in values("triage_shards", "arch") if a != "cpu"] or values("triage_shards", "arch")
        playbooks = values("triage_entries", "playbook")
        if not archs or not playbooks:
            fail("no arch/playbook label values to substitute: %s %s" % (archs, playbooks))
            return
        subst = {"$arch": archs[0], "$playbook": playbooks[0], "$__rate_interval": "2m"}
        print("variables: %s" % subst, flush=True)
        mid = (t0 + t1) / 2  # the sweep was running then

        # The running sweeps' gauge names the sweep while it runs and drops it when it ends.
        running = query("triage_running_sweep_entries", mid)["data"]["result"]
        if {r["metric"].get("sweep") for r in running} != {sweep}:
            fail("triage_running_sweep_entries mid-sweep: %s" % running)
        if query("triage_running_sweep_entries")["data"]["result"]:
            fail("triage_running_sweep_entries still has series after the sweep ended")

        checked = 0
        for name in sorted(os.listdir(os.path.join(SRC, "dashboards"))):
            if not name.endswith(".json"):
                continue
            d = json.load(open(os.path.join(SRC, "dashboards", name)))
            for v in d["templating"]["list"]:
                if v["type"] == "query":
                    m = re.fullmatch(r"label_values\((\w+), *(\w+)\)", v["definition"])
                    if not m or not values(m.group(1), m.group(2)):
                        fail("%s: variable %s: %s has no values" % (name, v["name"], v["definition"]))
            for p in d["panels"]:
                for t in p["targets"]:
                    expr = t["expr"]
                    for k, val in subst.items():
                        expr = expr.replace(k, val)
                    if "$" in expr:
                        fail("%s / %s: unsubstituted variable in %s" % (name, p["title"], expr))
                        continue
                    try:
                        r = query(expr)
                    except urllib.error.HTTPError as e:
                        fail("%s / %s: %s -> HTTP %d %s" % (name, p["title"], expr, e.code,
                                                            e.read().decode()[:300]))
                        continue
                    checked += 1
                    if r.get("status") == "success" and not r["data"]["result"]:
                        # A panel of running sweeps only has data while one runs.
                        r = query(expr, mid)
                    if r.get("status") != "success":
                        fail("%s / %s: %s -> %s" % (name, p["title"], expr, r))
                    elif not r["data"]["result"]:
                        fail("%s / %s: %s -> no series at the end or in the middle of the sweep"
                             % (name, p["title"], expr))
        print("dashboard expressions evaluated: %d" % checked, flush=True)
        if checked < 20:
            fail("only %d dashboard expressions found" % checked)

        # Alerts: the expression evaluates, and every metric it names has series.
        rules = json.loads(get(prom + "/api/v1/rules"))["data"]["groups"]
        alerts = [r for g in rules for r in g["rules"] if r["type"] == "alerting"]
        if len(alerts) < 6:
            fail("Prometheus loaded %d alerts, expected 6" % len(alerts))
        for a in alerts:
            if a.get("health") != "ok":
                fail("alert %s: health %s %s" % (a["name"], a.get("health"), a.get("lastError")))
            try:
                r = query(a["query"])
                if r.get("status") != "success":
                    fail("alert %s: %s" % (a["name"], r))
            except urllib.error.HTTPError as e:
                fail("alert %s: HTTP %d %s" % (a["name"], e.code, e.read().decode()[:300]))
            for metric in set(re.findall(r"\b(triage_[a-z_]+)", a["query"])):
                if not query("count(%s)" % metric)["data"]["result"]:
                    fail("alert %s: metric %s has no series" % (a["name"], metric))
        print("alerts checked: %d" % len(alerts), flush=True)
    finally:
        for name, p in procs:
            p.send_signal(signal.SIGTERM)
        for name, p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
        if failures:
            for f in sorted(os.listdir(work)):
                if f.endswith(".log"):
                    print("--- %s (tail)" % f)
                    print("".join(open(os.path.join(work, f), errors="replace").readlines()[-15:]))
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 — any setup error is a failure with its message
        fail("%s: %s" % (type(e).__name__, e))
    if failures:
        print("dashboards_test: %d failure(s)" % len(failures))
        sys.exit(1)
    print("dashboards_test: every panel and alert expression has data")
