#!/usr/bin/python3
"""Static checks of the Helm chart charts/triage-farm (helm itself is not available here).

Usage: chart_test.py SOURCE_DIR

1. values.yaml validates against values.schema.json (JSON Schema draft-07), and invalid values
   (unknown top-level key, wrong types, a device pool without arch, ...) are rejected.
2. Every .Values.a.b.c path used in templates/*.yaml, *.tpl and NOTES.txt exists in values.yaml;
   every $pool.<key> used by the agent DaemonSet is a pool key of the schema; every
   include "name" is defined in _helpers.tpl; {{ and }} are balanced.
3. yamllint (charts/triage-farm/.yamllint: default rules, line-length 120) passes on Chart.yaml,
   values.yaml and dashboards/alerts.yaml.
4. charts/triage-farm/dashboards/*.json and rules/alerts.yaml are byte-identical copies of the
   repository's dashboards/*.json and dashboards/alerts.yaml (same set of files).
5. Chart.yaml has the required fields; no template is empty; the templates' kinds include
   StatefulSet, Service, DaemonSet, ConfigMap, Secret, ServiceMonitor, PrometheusRule, CronJob;
   the weekly-sweep CronJob is off by default and runs triagectl with a request id.
Exit 1 with a message per failure.
"""
import copy
import glob
import json
import os
import re
import subprocess
import sys

import jsonschema
import yaml

failures = []


def fail(msg):
    failures.append(msg)
    print(f"FAIL: {msg}")


def main():
    if len(sys.argv) != 2:
        print("usage: chart_test.py SOURCE_DIR", file=sys.stderr)
        return 2
    src = os.path.abspath(sys.argv[1])
    chart = os.path.join(src, "charts", "triage-farm")
    tdir = os.path.join(chart, "templates")

    # ---- 1. schema -------------------------------------------------------------------------
    with open(os.path.join(chart, "values.yaml")) as f:
        values = yaml.safe_load(f)
    with open(os.path.join(chart, "values.schema.json")) as f:
        schema = json.load(f)
    try:
        jsonschema.Draft7Validator.check_schema(schema)
    except jsonschema.SchemaError as e:
        fail(f"values.schema.json is not a valid draft-07 schema: {e.message}")
        schema = {}
    validator = jsonschema.Draft7Validator(schema)
    for e in validator.iter_errors(values):
        fail(f"values.yaml does not validate: {'/'.join(map(str, e.path))}: {e.message}")
    if schema.get("additionalProperties") is not False:
        fail("values.schema.json: additionalProperties must be false at the top level")

    def leaf_paths(node, prefix=()):
        if isinstance(node, dict) and node:
            for k, v in node.items():
                yield from leaf_paths(v, prefix + (k,))
        else:
            yield prefix

    # Every key of values.yaml is declared by the schema (not merely allowed by a free-form map).
    def declared(sch, path):
        for key in path:
            if not isinstance(sch, dict):
                return False
            if "properties" in sch and key in sch["properties"]:
                sch = sch["properties"][key]
            elif isinstance(sch.get("additionalProperties"), dict) or sch.get("type") == "object":
                return True  # free-form map (labels, resources, ...)
            else:
                return False
        return True

    n_keys = 0
    for path in leaf_paths({k: v for k, v in values.items()}):
        n_keys += 1
        if not declared(schema, path):
            fail(f"values.yaml key {'.'.join(path)} is not declared in values.schema.json")

    def mutate(fn):
        v = copy.deepcopy(values)
        fn(v)
        return v

    def drop_arch(v):
        del v["agents"]["pools"]["n150"]["arch"]

    negatives = {
        "unknown top-level key": mutate(lambda v: v.update(bogus=1)),
        "coordinator.replicas is a string": mutate(
            lambda v: v["coordinator"].update(replicas="one")),
        "coordinator.replicas is 2 (SQLite allows one)": mutate(
            lambda v: v["coordinator"].update(replicas=2)),
        "device pool without arch": mutate(drop_arch),
        "cpuOnly pool with an arch": mutate(
            lambda v: v["agents"]["pools"]["cpu"].update(arch="n150")),
        "unknown key in a pool": mutate(lambda v: v["agents"]["pools"]["n150"].update(archs=["x"])),
        "pool name not a DNS label": mutate(lambda v: v["agents"]["pools"].update(
            {"N150_big": dict(v["agents"]["pools"]["n150"])})),
        "pools as a list": mutate(lambda v: v["agents"].update(
            pools=[dict(v["agents"]["pools"]["n150"], name="n150")])),
        "unknown key under coordinator.config": mutate(
            lambda v: v["coordinator"]["config"].update(lease_ttl="2m")),
        "port out of range": mutate(lambda v: v["coordinator"]["ports"].update(agent=70000)),
        "workspace.type not hostPath/emptyDir": mutate(
            lambda v: v["workspace"].update(type="nfs")),
        "token with an unknown role": mutate(lambda v: v["auth"].update(
            tokens=[{"name": "a", "role": "admin", "token": "t"}])),
        "monitoring.serviceMonitor.enabled not a boolean": mutate(
            lambda v: v["monitoring"]["serviceMonitor"].update(enabled="yes")),
        "unknown key under weeklySweep": mutate(lambda v: v["weeklySweep"].update(arch="n150")),
        "weeklySweep.archs is a string": mutate(
            lambda v: v["weeklySweep"].update(archs="n150,p150")),
        "weeklySweep.maxFailedShards is negative": mutate(
            lambda v: v["weeklySweep"].update(maxFailedShards=-1)),
        "weeklySweep.concurrencyPolicy not Allow/Forbid/Replace": mutate(
            lambda v: v["weeklySweep"].update(concurrencyPolicy="Never")),
        "weeklySweep.operatorToken under 16 characters": mutate(
            lambda v: v["weeklySweep"].update(operatorToken="short")),
    }
    for name, bad in negatives.items():
        if validator.is_valid(bad):
            fail(f"values.schema.json accepts invalid values: {name}")
    print(f"[1] schema: values.yaml ({n_keys} leaf keys) valid, all declared; "
          f"{len(negatives)} invalid variants rejected")

    # ---- 2. .Values references -------------------------------------------------------------
    tfiles = sorted(glob.glob(os.path.join(tdir, "*.yaml")) + glob.glob(os.path.join(tdir, "*.tpl"))
                    + glob.glob(os.path.join(tdir, "NOTES.txt")))
    texts = {os.path.basename(p): open(p).read() for p in tfiles}
    ref_re = re.compile(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
    refs = set()
    for name, text in texts.items():
        for m in ref_re.finditer(text):
            path = m.group(1)[1:].split(".")
            refs.add(tuple(path))
            node = values
            for i, key in enumerate(path):
                if not isinstance(node, dict) or key not in node:
                    fail(f"{name}: .Values.{'.'.join(path)} is not in values.yaml "
                         f"(missing at '{key}')")
                    break
                node = node[key]
    pool_props = set(schema.get("properties", {}).get("agents", {}).get("properties", {})
                     .get("pools", {}).get("additionalProperties", {}).get("properties", {}))
    pool_refs = set()
    for name, text in texts.items():
        for key in re.findall(r"\$pool\.([A-Za-z_][A-Za-z0-9_]*)", text):
            pool_refs.add(key)
            if key not in pool_props:
                fail(f"{name}: $pool.{key} is not a pool key of values.schema.json")
    defined = set(re.findall(r'define\s+"([^"]+)"', texts.get("_helpers.tpl", "")))
    includes = set()
    for name, text in texts.items():
        for inc in re.findall(r'include\s+"([^"]+)"', text):
            includes.add(inc)
            if inc not in defined:
                fail(f"{name}: include \"{inc}\" is not defined in _helpers.tpl")
        if text.count("{{") != text.count("}}"):
            fail(f"{name}: unbalanced template delimiters "
                 f"({text.count('{{')} '{{{{' vs {text.count('}}')} '}}}}')")
        if "\t" in text:
            fail(f"{name}: contains a tab")
    print(f"[2] templates: {len(texts)} files, {len(refs)} distinct .Values paths all in "
          f"values.yaml, {len(pool_refs)} $pool keys in the schema, "
          f"{len(includes)} includes defined")

    # ---- 3. yamllint ----------------------------------------------------------------------
    lint_files = [os.path.join(chart, "Chart.yaml"), os.path.join(chart, "values.yaml"),
                  os.path.join(src, "dashboards", "alerts.yaml")]
    cfg = os.path.join(chart, ".yamllint")
    if not os.path.isfile(cfg):
        fail("charts/triage-farm/.yamllint is missing")
    r = subprocess.run(["/usr/bin/yamllint", "-f", "parsable", "-c", cfg] + lint_files,
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail("yamllint failed:\n" + r.stdout + r.stderr)
    print(f"[3] yamllint: {len(lint_files)} files clean (rc {r.returncode})")

    # ---- 4. copies of dashboards and rules -------------------------------------------------
    def same(a, b):
        with open(a, "rb") as fa, open(b, "rb") as fb:
            return fa.read() == fb.read()

    repo_dash = {os.path.basename(p) for p in glob.glob(os.path.join(src, "dashboards", "*.json"))}
    chart_dash = {os.path.basename(p) for p in glob.glob(os.path.join(chart, "dashboards", "*.json"))}
    if not repo_dash:
        fail("no dashboards/*.json in the repository")
    for n in sorted(repo_dash - chart_dash):
        fail(f"charts/triage-farm/dashboards/{n} is missing (cp dashboards/{n} charts/triage-farm/dashboards/)")
    for n in sorted(chart_dash - repo_dash):
        fail(f"charts/triage-farm/dashboards/{n} has no counterpart in dashboards/ (remove it)")
    for n in sorted(repo_dash & chart_dash):
        if not same(os.path.join(src, "dashboards", n), os.path.join(chart, "dashboards", n)):
            fail(f"charts/triage-farm/dashboards/{n} is stale: differs from dashboards/{n} "
                 f"(cp dashboards/{n} charts/triage-farm/dashboards/)")
    rules = os.path.join(chart, "rules", "alerts.yaml")
    if not os.path.isfile(rules):
        fail("charts/triage-farm/rules/alerts.yaml is missing")
    elif not same(os.path.join(src, "dashboards", "alerts.yaml"), rules):
        fail("charts/triage-farm/rules/alerts.yaml is stale: differs from dashboards/alerts.yaml "
             "(cp dashboards/alerts.yaml charts/triage-farm/rules/)")
    else:
        with open(rules) as f:
            groups = yaml.safe_load(f).get("groups") or []
        if not groups:
            fail("rules/alerts.yaml has no groups")
    if ('.Files.Get "rules/alerts.yaml"' not in texts.get("prometheusrule.yaml", "")):
        fail("prometheusrule.yaml does not embed rules/alerts.yaml")
    if '.Files.Glob "dashboards/*.json"' not in texts.get("dashboards-configmap.yaml", ""):
        fail("dashboards-configmap.yaml does not read dashboards/*.json")
    print(f"[4] copies: {len(repo_dash & chart_dash)} dashboards + rules/alerts.yaml "
          f"byte-identical to dashboards/")

    # ---- 5. Chart.yaml, template files, kinds ---------------------------------------------
    with open(os.path.join(chart, "Chart.yaml")) as f:
        meta = yaml.safe_load(f)
    for key, want in (("apiVersion", "v2"), ("name", "triage-farm"), ("version", "0.1.0"),
                      ("appVersion", "0.1.0")):
        if str(meta.get(key)) != want:
            fail(f"Chart.yaml: {key} is {meta.get(key)!r}, want {want!r}")
    if not meta.get("description"):
        fail("Chart.yaml: description is missing")
    for extra in ("_helpers.tpl", "NOTES.txt"):
        if extra not in texts:
            fail(f"templates/{extra} is missing")
    for name, text in texts.items():
        if not text.strip():
            fail(f"templates/{name} is empty")
    kinds = set()
    for name, text in texts.items():
        if name.endswith(".yaml"):
            kinds |= set(re.findall(r"^kind:\s*(\w+)\s*$", text, re.M))
    want_kinds = {"StatefulSet", "Service", "DaemonSet", "ConfigMap", "Secret", "ServiceMonitor",
                  "PrometheusRule", "CronJob"}
    for k in sorted(want_kinds - kinds):
        fail(f"no template has kind: {k}")
    sts = texts.get("coordinator-statefulset.yaml", "")
    for needle in ("volumeClaimTemplates:", "dict \"grpc\"", "triage-coordinator", "--data_dir",
                   "--tokens_file", "--tls_client_ca", "--config"):
        if needle not in sts:
            fail(f"coordinator-statefulset.yaml lacks {needle}")
    ds = texts.get("agent-daemonset.yaml", "")
    for needle in ("triage-agent", "spec.nodeName", "$(NODE_NAME)", "/dev/tenstorrent",
                   "/dev/hugepages-1G", "--cpu_only", "--token_file", "--tls_ca", "--workspace"):
        if needle not in ds:
            fail(f"agent-daemonset.yaml lacks {needle}")
    cj = texts.get("weekly-sweep-cronjob.yaml", "")
    for needle in ("triagectl", "--request-id", "$(TRIAGE_REQUEST_ID)", "metadata.labels['job-name']",
                   "--wait", "--max-failed-shards", "sweep-token", "restartPolicy:"):
        if needle not in cj:
            fail(f"weekly-sweep-cronjob.yaml lacks {needle}")
    if values.get("weeklySweep", {}).get("enabled") is not False:
        fail("values.yaml: weeklySweep.enabled must default to false")
    # Each program reads only its own prefix (TRIAGE_COORDINATOR_*, TRIAGE_AGENT_*) and warns
    # about the old TRIAGE_<SETTING> names; TRIAGE_AGENT_ID is the old name of agent_id.
    for name, text in (("coordinator-statefulset.yaml", sts), ("agent-daemonset.yaml", ds)):
        prefix = "TRIAGE_COORDINATOR_" if name.startswith("coordinator") else "TRIAGE_AGENT_"
        for env in re.findall(r"-\s+name:\s*(TRIAGE_\w+)", text):
            if not env.startswith(prefix) or env == "TRIAGE_AGENT_ID":
                fail(f"{name} sets {env}: the program reads only {prefix}<SETTING> variables")
    if 'grafana_dashboard' not in json.dumps(values):
        fail("values.yaml does not label dashboards grafana_dashboard")
    print(f"[5] Chart.yaml fields ok; {len(texts)} template files non-empty; kinds "
          f"{', '.join(sorted(kinds))}")

    if failures:
        print(f"\nchart_static: {len(failures)} failure(s)")
        return 1
    print("\nchart_static: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
