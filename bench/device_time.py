#!/usr/bin/python3
"""Device time per entry on the ttxla-mini fixture: the farm against one-at-a-time triage.

    bench/device_time.py [--build BUILD_DIR] [--keep]

Both sides run real torch and pytest on this machine, in one run (docs/bench-farm.md, "Device
time per entry"):

1. The farm: `scripts/demo.sh` (coordinator, a cpu agent and an n150 and a p150 agent on
   loopback; every playbook over both archs). Its evidence archive holds every process the
   agents ran: one log per probe process (logs/*.probe-*.log) and one log and JUnit file per
   pytest process (logs/NN-label.log, junit/NN-label.xml).
2. One at a time, as the manual procedure does it, on a fresh workspace of the same fixture: for
   each entry the farm decided, one CPU probe process with its playbook's mode, then (with the
   farm's code fix applied, as the procedure verifies after fixing and before editing the YAML) one pytest process per entry and
   arch, with the agent's own pytest flags. This counts the procedure generously: the manual
   unpack_forward_output procedure also runs an inference test, not counted here.

3. The farm's sessions again, re-timed: every pytest session the farm ran on a device (the keys
   its JUnit file answers, on its arch) run once more, one after another on the one-at-a-time
   workspace. The demo runs three agents and a coordinator on this machine's two cores, so its
   own session times are inflated by contention that separate device hosts do not have; the
   re-run times the farm's choice of sessions under the conditions of the one-at-a-time side.

Device-phase seconds are the pytest sessions' own times (the JUnit testsuite time: collection,
the model's import and the test, the span the device is held), summed over the processes that
verify on an arch; the CPU probes hold no device. A batch's session (docs/farm.md, "Batched
verification") is recorded in each shard it answered and counted once. Prints each side's
device seconds and process starts per entry and both ratios. A benchmark, not a test: it exits
0 unless something failed.
"""
import argparse
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3"
PYTEST_TIMEOUT = 900  # a safety net: the fixture's runner times a hanging test out by itself
PROBE_MODE = {"unpack_forward_output": "structure", "dtype_bfloat16": "dtype",
              "missing_inputs": "inputs"}


def suite_seconds(xml_path):
    root = ET.parse(xml_path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    return sum(float(s.get("time", "0")) for s in suites)


def suite_keys(xml_path):
    """The keys a JUnit file's testcases answer, in file order."""
    keys = []
    for tc in ET.parse(xml_path).getroot().iter("testcase"):
        name = tc.get("name", "")
        if "[" in name and name.endswith("]"):
            keys.append(name[name.index("[") + 1:-1])
    return keys


def pytest_session(ws, arch, keys, xml, runs, penv):
    """One pytest process over keys with the agent's flags; its JUnit time, or None (no XML)."""
    subprocess.run([PYTHON, "-m", "pytest", "-p", "triage_pytest_plugin", "--force-run",
                    "--runxfail", f"--junitxml={xml}", "-o", "junit_family=xunit1",
                    f"--arch={arch}", "-q", "-rA"] +
                   [f"{ws}/tests/runner/test_models.py::test_all_models_torch[{k}]" for k in keys],
                   cwd=runs, env=penv, capture_output=True, text=True, timeout=PYTEST_TIMEOUT)
    return suite_seconds(xml) if os.path.exists(xml) else None


def run(argv, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"device_time: {' '.join(argv[:4])}... exited {r.returncode}:\n"
                 f"{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return r.stdout


def farm(build, out):
    """Runs the demo; returns (report, figures)."""
    env = dict(os.environ, DEMO_OUT=out, KEEP="0")
    start = time.monotonic()
    r = subprocess.run([os.path.join(ROOT, "scripts/demo.sh"), build], env=env, cwd=ROOT,
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"device_time: the demo failed:\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    wall = time.monotonic() - start
    report = json.load(open(os.path.join(out, "report.json")))
    probes = 0
    # A batch's pytest session (docs/farm.md, "Batched verification") is recorded in the
    # evidence of each shard it verified; a shard decided while the session ran on holds the
    # session's JUnit file as it was then. Every copy names the session's start (the testsuite's
    # timestamp and hostname), so a session is counted once, with its longest copy's time and
    # keys. A run that left no JUnit file is counted by its log's content.
    by_session = {}  # id -> [arch or None, seconds, keys]

    def session_id(xml):
        root = ET.parse(xml).getroot()
        suite = root if root.tag == "testsuite" else root.find("testsuite")
        return ("junit", suite.get("timestamp"), suite.get("hostname"))

    for shard in sorted(glob.glob(os.path.join(out, "evidence", "*"))):
        name = os.path.basename(shard)
        probes += len(glob.glob(os.path.join(shard, "logs", "*.probe-*.log")))
        device = "-probe-" not in name  # verify and full phases hold a device
        arch = name.split("-")[2] if device else None  # <wave>-<phase>-<arch>-<playbook>-<loader>
        for log in glob.glob(os.path.join(shard, "logs", "*.log")):
            stem = os.path.basename(log)[:-len(".log")]
            if not re.match(r"^\d+-", stem):
                continue
            xml = os.path.join(shard, "junit", stem + ".xml")
            if os.path.exists(xml):
                sid = session_id(xml)
                seconds, keys = suite_seconds(xml), suite_keys(xml)
            else:
                with open(log, "rb") as f:
                    sid = ("log", hashlib.sha256(f.read()).hexdigest())
                seconds, keys = 0.0, []
            got = by_session.setdefault(sid, [None, 0.0, []])
            if device and sid[0] == "junit":
                got[0] = arch
            got[1] = max(got[1], seconds)
            if len(keys) > len(got[2]):
                got[2] = keys
    pytests = len(by_session)
    no_junit = sum(1 for sid in by_session if sid[0] == "log")
    device_s = sum(v[1] for v in by_session.values() if v[0] is not None)
    sessions = [(v[0], v[2]) for _, v in sorted(by_session.items()) if v[0] is not None]
    return report, {"wall": wall, "probes": probes, "pytests": pytests, "device_s": device_s,
                    "no_junit": no_junit}, sessions


def one_at_a_time(report, farm_out, farm_sessions, tmp):
    """The per-entry procedure's commands on a fresh workspace of the fixture; then the farm's
    sessions re-run there. Returns the procedure's figures and the re-timed farm seconds."""
    env = dict(os.environ, GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1",
               GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@localhost",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@localhost")
    mk = os.path.join(ROOT, "tests/fixtures/make-workspace.sh")
    src = run([mk, os.path.join(tmp, "src")], env=env).strip()
    ws = run([mk, "--clone", src, os.path.join(tmp, "ws")], env=env).strip()
    scripts = os.path.join(ROOT, "agent/scripts")
    runs = os.path.join(tmp, "runs")
    os.makedirs(runs)
    entries = report["entries"]
    probes = pytests = no_junit = 0
    device_s = 0.0
    start = time.monotonic()
    for e in entries:  # the CPU probe, before the fix
        mode = PROBE_MODE[e["playbook"]]
        run([PYTHON, os.path.join(scripts, "triage_probe.py"), "--root", ws, "--key", e["key"],
             "--mode", mode], cwd=runs, env=env)
        probes += 1
    # The fix the procedure would have made: the farm's code changes (tt_forge_models: loaders
    # and registry lines). Not the YAML: the procedure verifies before it edits the YAML, so the
    # runner's markers (a timeout, say) are still the committed ones, as in the farm's verify.
    p = os.path.join(farm_out, "tt-forge-models.patch")
    if os.path.getsize(p) > 0:
        run(["git", "-C", os.path.join(ws, "third_party/tt_forge_models"), "apply",
             "--whitespace=nowarn", p], env=env)
    penv = dict(env, ENABLE_BRINGUP_STAGE_LOGGING="1", PYTHONPATH=scripts,
                PYTHONDONTWRITEBYTECODE="1")
    for i, e in enumerate(entries):
        for arch in sorted((e.get("arch_outcomes") or {}).keys()):
            t = pytest_session(ws, arch, [e["key"]], os.path.join(runs, f"{i}-{arch}.xml"), runs,
                               penv)
            pytests += 1
            if t is not None:
                device_s += t
            else:  # a crashed run (the fixture's crash entries): no session time, on both sides
                no_junit += 1
    # The farm's own sessions, timed the same way on the same workspace.
    retimed = 0.0
    for n, (arch, keys) in enumerate(farm_sessions):
        t = pytest_session(ws, arch, keys, os.path.join(runs, f"farm-{n}-{arch}.xml"), runs, penv)
        retimed += t or 0.0
    return {"wall": time.monotonic() - start, "probes": probes, "pytests": pytests,
            "device_s": device_s, "no_junit": no_junit}, retimed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build", help="the build directory (default build)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="device_time.")
    try:
        print("device_time: the farm (scripts/demo.sh) ...", file=sys.stderr, flush=True)
        report, f, sessions = farm(args.build, os.path.join(tmp, "farm"))
        n = len(report["entries"])
        print(f"device_time: one at a time over the same {n} entries ...", file=sys.stderr,
              flush=True)
        o, retimed = one_at_a_time(report, os.path.join(tmp, "farm"), sessions,
                                   os.path.join(tmp, "one"))
        print(f"{'':22} {'device s':>9} {'per entry':>10} {'pytest':>7} {'no junit':>9} "
              f"{'probes':>7} {'starts/entry':>13} {'wall s':>7}")
        for name, x in (("farm", f), ("one at a time", o)):
            print(f"{name:22} {x['device_s']:9.1f} {x['device_s'] / n:10.2f} {x['pytests']:7d} "
                  f"{x['no_junit']:9d} {x['probes']:7d} {(x['pytests'] + x['probes']) / n:13.2f} "
                  f"{x['wall']:7.1f}")
        print(f"{'farm, re-timed':22} {retimed:9.1f} {retimed / n:10.2f} {len(sessions):7d}   "
              f"(the farm's {len(sessions)} device sessions with JUnit, re-run one after another)")
        ratio = o["device_s"] / f["device_s"] if f["device_s"] else float("inf")
        fair = o["device_s"] / retimed if retimed else float("inf")
        print(f"entries: {n}; device-seconds per entry, one at a time / farm: {ratio:.2f}x "
              f"as run, {fair:.2f}x re-timed (goal >= 2x)")
    finally:
        if args.keep:
            print(f"kept: {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
