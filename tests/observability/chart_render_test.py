#!/usr/bin/python3
"""Renders charts/triage-farm with helm's own template engine and checks what comes out.

Usage: chart_render_test.py HELM_TEMPLATE SOURCE_DIR

HELM_TEMPLATE is the offline `helm template` (../shared/tools/helm-template beside the checkout):
helm v3.12.3's engine, values.schema.json validation and `fail` included. The output is parsed with
yaml.safe_load_all. A missing HELM_TEMPLATE fails the test.

Cases (the weekly-sweep CronJob, templates/weekly-sweep-cronjob.yaml):
1. TLS from a throwaway self-signed certificate (openssl), weeklySweep off: the chart renders, no
   CronJob, and the Secret has no sweep-token.
2. weeklySweep on (mutual TLS): one CronJob with the schedule, time zone and concurrency policy;
   `triagectl sweep start` args with the coordinator Service's control port, gitUrl, ref, archs,
   playbooks, --max-failed-shards, --request-id $(TRIAGE_REQUEST_ID), --wait; TRIAGE_REQUEST_ID
   from the job-name label, TRIAGECTL_TOKEN from the Secret key sweep-token; the Secret holds
   sweep-token and its tokens.yaml the weekly-sweep operator entry; every mounted Secret item is a
   key of the rendered Secret; a non-root, read-only container.
3. auth.insecure (no TLS): --insecure, no token env, no Secret volume.
4. secret.existingSecret: no Secret rendered, the token comes from the existing Secret.
5. A long release name: the CronJob's name stays within 52 characters (the Job name adds 11).
6. Rendering fails, naming the value: enabled without gitUrl; enabled without operatorToken while
   auth is not insecure and the chart makes the Secret; an operatorToken under 16 characters.
7. agents.pools, a map keyed by pool name: `--set agents.pools.cpu.enabled=true` and
   `--set agents.pools.n300-llmbox.enabled=false` give exactly the cpu, n150 and p150 DaemonSets;
   each has its pool's node selector, --arch, --device_count, device resources (requested and
   limited) and memory limit; the cpu pool runs --cpu_only as non-root; a pool without arch fails.
8. No values at all (the default install), and with tls.mutual: the Secret holds a generated CA,
   a coordinator certificate for the Service's names that verifies against it (and an agent
   client certificate with mutual), and a generated agent token that tokens.yaml lists.
9. A matrix of value sets (defaults, TLS off, mutual TLS, insecure, ServiceMonitor and
   PrometheusRule, a cpu-only pool alone, the weekly CronJob, an existing Secret, tcpSocket
   probes, other ports and data dir): the coordinator's args (addresses, data dir, TLS, client
   CA, tokens or --insecure), its probe, the kinds rendered, the monitors' ports and labels, the
   pools' DaemonSets, and for every workload that each Secret item and each file its args name
   under a Secret mount is a key the Secret holds, and each mounted ConfigMap is rendered.
11. weeklySweep.nightly: --nightly /nightly/<path> per run, --confirm, --max-device-hours, no
   --arch or --playbooks, and the runs' claim mounted read-only at /nightly; paths without a
   claim, or with playbooks, fail (case 6).
10. Every manifest of the matrix is validated strictly against the Kubernetes 1.27 API types and
   the prometheus-operator CRDs (tests/observability/k8s-validate/validate.js, pinned npm
   packages installed by scripts/install-deps.sh): an unknown or misspelt field, a missing
   required field or a wrong scalar type is an error. A copy with six planted mistakes must fail
   with each one named at its path, so the validator is shown to be strict.
Exit 1 with a message per failure.
"""
import base64
import copy
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

failures = []
OPERATOR_TOKEN = "weekly-sweep-token-0123456789"
AGENT_TOKEN = "agent-token-0123456789abcdef"
GIT_URL = "https://git.example.com/tenstorrent/tt-xla.git"
VALIDATOR = "tests/observability/k8s-validate/validate.js"


def fail(msg):
    failures.append(msg)
    print(f"FAIL: {msg}")


def check(cond, msg):
    if not cond:
        fail(msg)
    return cond


class Chart:
    def __init__(self, helm, chart):
        self.helm = helm
        self.chart = chart

    def run(self, args, release="rel"):
        argv = [self.helm, release, self.chart] + args
        return subprocess.run(argv, capture_output=True, text=True, timeout=120)

    def render(self, args, release="rel"):
        """The rendered objects, or None (with a failure) when helm-template fails."""
        r = self.run(args, release)
        if r.returncode != 0:
            fail(f"helm-template {' '.join(args)} exited {r.returncode}:\n{r.stderr}")
            return None
        return [d for d in yaml.safe_load_all(r.stdout) if d]


def of_kind(docs, kind):
    return [d for d in docs if d.get("kind") == kind]


def make_tls(tmp):
    """A self-signed certificate and key for <fullname>-coordinator; returns their paths."""
    crt, key = os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=rel-triage-farm-coordinator", "-keyout", key, "-out", crt],
                   check=True, capture_output=True, timeout=60)
    return crt, key


def flag_values(args, flag):
    """Values following each occurrence of flag in an argv list."""
    return [args[i + 1] for i, a in enumerate(args[:-1]) if a == flag]


def one_flag(args, flag, want, what):
    got = flag_values(args, flag)
    check(got == [want], f"{what}: {flag} is {got}, want [{want!r}]")


def env_of(container):
    return {e["name"]: e for e in container.get("env") or []}


def job_pod(cronjob):
    return cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def secret_data(secret):
    return {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}


def check_expansions(container, what):
    """Every $(VAR) in args names an env var of the container (the kubelet leaves others as is)."""
    names = set(env_of(container))
    for arg in container.get("args") or []:
        for var in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", str(arg)):
            check(var in names, f"{what}: args reference $({var}), which the container's env lacks")


def case_off(chart, tls_args):
    docs = chart.render(tls_args + ["--set", f"auth.agentToken={AGENT_TOKEN}"])
    if docs is None:
        return
    check(not of_kind(docs, "CronJob"), "weeklySweep off: a CronJob was rendered")
    check(of_kind(docs, "StatefulSet"), "weeklySweep off: no coordinator StatefulSet rendered")
    secrets = of_kind(docs, "Secret")
    if check(len(secrets) == 1, f"weeklySweep off: {len(secrets)} Secrets rendered, want 1"):
        data = secret_data(secrets[0])
        check("sweep-token" not in data, "weeklySweep off: the Secret has sweep-token")
        check("tls.crt" in data and data["tls.crt"].startswith("-----BEGIN CERTIFICATE"),
              "weeklySweep off: the Secret's tls.crt is not the given certificate")
        tokens = yaml.safe_load(data.get("tokens.yaml", "")) or {}
        check(all(t.get("name") != "weekly-sweep" for t in tokens.get("tokens") or []),
              "weeklySweep off: tokens.yaml has a weekly-sweep entry")
    print("[1] weeklySweep off: no CronJob, no sweep-token")


def sweep_args():
    return ["--set", "weeklySweep.enabled=true",
            "--set", f"weeklySweep.gitUrl={GIT_URL}",
            "--set", "weeklySweep.ref=release-1.2",
            "--set", "weeklySweep.schedule=30 2 * * 0",
            "--set", "weeklySweep.timeZone=Europe/Berlin",
            "--set", "weeklySweep.archs={n150,p150}",
            "--set", "weeklySweep.playbooks={unpack_forward_output,dtype_bfloat16}",
            "--set", "weeklySweep.maxFailedShards=7",
            "--set", "weeklySweep.incremental=true"]


def case_on(chart, tls_args):
    what = "weeklySweep on"
    docs = chart.render(tls_args + sweep_args() + [
        "--set", f"auth.agentToken={AGENT_TOKEN}",
        "--set", f"weeklySweep.operatorToken={OPERATOR_TOKEN}",
        "--set", "tls.mutual=true"])
    if docs is None:
        return
    cronjobs = of_kind(docs, "CronJob")
    if not check(len(cronjobs) == 1, f"{what}: {len(cronjobs)} CronJobs rendered, want 1"):
        return
    cj = cronjobs[0]
    spec = cj["spec"]
    check(cj.get("apiVersion") == "batch/v1", f"{what}: apiVersion {cj.get('apiVersion')}")
    check(cj["metadata"]["name"] == "rel-triage-farm-weekly-sweep",
          f"{what}: CronJob named {cj['metadata']['name']}")
    check(spec.get("schedule") == "30 2 * * 0", f"{what}: schedule {spec.get('schedule')!r}")
    check(spec.get("timeZone") == "Europe/Berlin", f"{what}: timeZone {spec.get('timeZone')!r}")
    check(spec.get("concurrencyPolicy") == "Forbid",
          f"{what}: concurrencyPolicy {spec.get('concurrencyPolicy')!r}")
    check(spec["jobTemplate"]["spec"].get("backoffLimit") == 3, f"{what}: backoffLimit")
    pod = job_pod(cj)
    check(pod.get("restartPolicy") == "Never", f"{what}: restartPolicy {pod.get('restartPolicy')}")
    containers = pod.get("containers") or []
    if not check(len(containers) == 1, f"{what}: {len(containers)} containers, want 1"):
        return
    c = containers[0]
    check(c.get("command") == ["triagectl"], f"{what}: command {c.get('command')}")
    args = [str(a) for a in c.get("args") or []]
    check(args[:2] == ["sweep", "start"], f"{what}: args start {args[:2]}, want sweep start")

    # --coordinator names the coordinator Service and its control port, as rendered.
    services = {s["metadata"]["name"]: s for s in of_kind(docs, "Service")}
    svc = services.get("rel-triage-farm-coordinator")
    if check(svc is not None, f"{what}: no Service rel-triage-farm-coordinator"):
        ports = {p["name"]: p["port"] for p in svc["spec"]["ports"]}
        check("grpc-control" in ports, f"{what}: the coordinator Service has no grpc-control port")
        one_flag(args, "--coordinator", f"rel-triage-farm-coordinator:{ports.get('grpc-control')}",
                 what)
    one_flag(args, "--git-url", GIT_URL, what)
    one_flag(args, "--ref", "release-1.2", what)
    one_flag(args, "--arch", "n150,p150", what)
    one_flag(args, "--playbooks", "unpack_forward_output,dtype_bfloat16", what)
    one_flag(args, "--max-failed-shards", "7", what)
    one_flag(args, "--request-id", "$(TRIAGE_REQUEST_ID)", what)
    one_flag(args, "--reason", "weekly sweep", what)
    check(args.count("--wait") == 1, f"{what}: --wait missing from args {args}")
    check(args.count("--incremental") == 1, f"{what}: --incremental missing from args {args}")
    for absent in ("--forge-ref", "--max-attempts", "--priority", "--insecure"):
        check(absent not in args, f"{what}: {absent} is in args, its value was not set")
    one_flag(args, "--tls-ca", "/etc/triage/secret/ca.crt", what)
    one_flag(args, "--tls-cert", "/etc/triage/secret/agent.crt", what)
    one_flag(args, "--tls-key", "/etc/triage/secret/agent.key", what)

    env = env_of(c)
    req = env.get("TRIAGE_REQUEST_ID", {})
    check(req.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
          == "metadata.labels['job-name']",
          f"{what}: TRIAGE_REQUEST_ID is not the job-name label: {req}")
    tok = env.get("TRIAGECTL_TOKEN", {}).get("valueFrom", {}).get("secretKeyRef", {})
    check(tok == {"name": "rel-triage-farm-secret", "key": "sweep-token"},
          f"{what}: TRIAGECTL_TOKEN is not the Secret's sweep-token: {tok}")
    check_expansions(c, what)

    secrets = {s["metadata"]["name"]: s for s in of_kind(docs, "Secret")}
    secret = secrets.get("rel-triage-farm-secret")
    if check(secret is not None, f"{what}: no Secret rel-triage-farm-secret"):
        data = secret_data(secret)
        check(data.get("sweep-token") == OPERATOR_TOKEN,
              f"{what}: the Secret's sweep-token is {data.get('sweep-token')!r}")
        tokens = (yaml.safe_load(data.get("tokens.yaml", "")) or {}).get("tokens") or []
        check({"name": "weekly-sweep", "role": "operator", "token": OPERATOR_TOKEN} in tokens,
              f"{what}: tokens.yaml lacks the weekly-sweep operator entry: {tokens}")
        check({"name": "agents", "role": "agent", "token": AGENT_TOKEN} in tokens,
              f"{what}: tokens.yaml lost the agents' entry: {tokens}")
        volumes = {v["name"]: v for v in pod.get("volumes") or []}
        mounts = {m["name"]: m for m in c.get("volumeMounts") or []}
        sv = volumes.get("secret", {}).get("secret", {})
        check(sv.get("secretName") == "rel-triage-farm-secret",
              f"{what}: the secret volume names {sv.get('secretName')!r}")
        items = [i["key"] for i in sv.get("items") or []]
        check(sorted(items) == ["agent.crt", "agent.key", "ca.crt"],
              f"{what}: secret items {items}, want ca.crt, agent.crt, agent.key")
        for key in items:
            check(key in data, f"{what}: mounted item {key} is not a key of the rendered Secret")
        check("tls.key" not in items and "tokens.yaml" not in items,
              f"{what}: the job mounts the server key or the tokens file")
        check(mounts.get("secret", {}).get("mountPath") == "/etc/triage/secret",
              f"{what}: the secret volume is not mounted at /etc/triage/secret")

    sc = c.get("securityContext") or {}
    check(sc.get("runAsNonRoot") is True, f"{what}: runAsNonRoot is {sc.get('runAsNonRoot')}")
    check(sc.get("readOnlyRootFilesystem") is True, f"{what}: root filesystem not read-only")
    check(sc.get("allowPrivilegeEscalation") is False, f"{what}: privilege escalation allowed")
    check("ALL" in (sc.get("capabilities") or {}).get("drop", []), f"{what}: capabilities kept")
    check(not sc.get("privileged"), f"{what}: privileged container")
    check((pod.get("securityContext") or {}).get("fsGroup") == 1000,
          f"{what}: no fsGroup, the 0440 Secret files would be unreadable")
    print(f"[2] {what}: CronJob {cj['metadata']['name']} args {' '.join(args)}")


def case_insecure(chart):
    what = "auth.insecure"
    docs = chart.render(sweep_args() + ["--set", "auth.insecure=true", "--set", "tls.enabled=false",
                                        "--set", "weeklySweep.incremental=false"])
    if docs is None:
        return
    cronjobs = of_kind(docs, "CronJob")
    if not check(len(cronjobs) == 1, f"{what}: {len(cronjobs)} CronJobs rendered, want 1"):
        return
    pod = job_pod(cronjobs[0])
    c = pod["containers"][0]
    args = [str(a) for a in c.get("args") or []]
    check("--insecure" in args, f"{what}: --insecure missing from args {args}")
    check("--incremental" not in args, f"{what}: --incremental in args, incremental is false")
    check("--tls-ca" not in args, f"{what}: --tls-ca in args without TLS")
    env = env_of(c)
    check("TRIAGECTL_TOKEN" not in env, f"{what}: TRIAGECTL_TOKEN is set: {env.get('TRIAGECTL_TOKEN')}")
    check("TRIAGE_REQUEST_ID" in env, f"{what}: TRIAGE_REQUEST_ID missing")
    check(all(v["name"] != "secret" for v in pod.get("volumes") or []),
          f"{what}: the job mounts the Secret without TLS")
    check_expansions(c, what)
    print(f"[3] {what}: --insecure, no token env, no Secret volume")


def case_existing_secret(chart):
    what = "secret.existingSecret"
    docs = chart.render(sweep_args() + ["--set", "secret.existingSecret=farm-secret"])
    if docs is None:
        return
    check(not of_kind(docs, "Secret"), f"{what}: the chart rendered a Secret")
    cronjobs = of_kind(docs, "CronJob")
    if not check(len(cronjobs) == 1, f"{what}: {len(cronjobs)} CronJobs rendered, want 1"):
        return
    pod = job_pod(cronjobs[0])
    tok = env_of(pod["containers"][0]).get("TRIAGECTL_TOKEN", {}).get("valueFrom", {})
    check(tok.get("secretKeyRef") == {"name": "farm-secret", "key": "sweep-token"},
          f"{what}: TRIAGECTL_TOKEN is {tok}, want farm-secret's sweep-token")
    vol = {v["name"]: v for v in pod.get("volumes") or []}.get("secret", {}).get("secret", {})
    check(vol.get("secretName") == "farm-secret", f"{what}: secret volume {vol}")
    print(f"[4] {what}: token and CA from farm-secret")


def case_long_name(chart):
    what = "long release name"
    release = "a-very-long-release-name-for-the-weekly-sweep-x"
    docs = chart.render(sweep_args() + ["--set", "secret.existingSecret=s"], release=release)
    if docs is None:
        return
    cronjobs = of_kind(docs, "CronJob")
    if check(len(cronjobs) == 1, f"{what}: {len(cronjobs)} CronJobs rendered, want 1"):
        name = cronjobs[0]["metadata"]["name"]
        check(len(name) <= 52 and name.endswith("-weekly-sweep"),
              f"{what}: CronJob name {name!r} ({len(name)} characters): want at most 52, "
              "ending in -weekly-sweep")
        print(f"[5] {what}: CronJob {name} ({len(name)} characters)")


def case_pools(chart, tls_args):
    """agents.pools is a map: `--set agents.pools.<name>.<key>` switches one pool and keeps the rest."""
    what = "pools"
    values = yaml.safe_load(open(os.path.join(chart.chart, "values.yaml")))
    pools = values["agents"]["pools"]
    docs = chart.render(tls_args + ["--set", f"auth.agentToken={AGENT_TOKEN}",
                                    "--set", "agents.pools.cpu.enabled=true",
                                    "--set", "agents.pools.n300-llmbox.enabled=false",
                                    "--set", "agents.pools.p150.deviceCount=2"])
    if docs is None:
        return
    daemonsets = {d["metadata"]["name"]: d for d in of_kind(docs, "DaemonSet")}
    want = {f"rel-triage-farm-agent-{n}" for n in ("cpu", "n150", "p150")}
    check(set(daemonsets) == want, f"{what}: DaemonSets {sorted(daemonsets)}, want {sorted(want)}")
    for name in ("cpu", "n150", "p150"):
        ds = daemonsets.get(f"rel-triage-farm-agent-{name}")
        if ds is None:
            continue
        pool = pools[name]
        pod = ds["spec"]["template"]["spec"]
        c = pod["containers"][0]
        args = [str(a) for a in c.get("args") or []]
        label = ds["spec"]["template"]["metadata"]["labels"].get("triage-farm/pool")
        check(label == name, f"{what}: {name}: pod label triage-farm/pool is {label!r}")
        check(pod.get("nodeSelector") == (pool.get("nodeSelector") or None),
              f"{what}: {name}: nodeSelector {pod.get('nodeSelector')}, "
              f"want {pool.get('nodeSelector')}")
        limits = (c.get("resources") or {}).get("limits") or {}
        requests = (c.get("resources") or {}).get("requests") or {}
        for res, n in (pool.get("deviceResources") or {}).items():
            check(limits.get(res) == n and requests.get(res) == n,
                  f"{what}: {name}: {res} requested {requests.get(res)}, limited {limits.get(res)}, "
                  f"want {n}")
        check(limits.get("memory") == pool["resources"]["limits"]["memory"],
              f"{what}: {name}: memory limit {limits.get('memory')}")
        if pool.get("cpuOnly"):
            check("--cpu_only" in args and "--arch" not in args,
                  f"{what}: {name}: a cpuOnly pool's args {args}")
            check((c.get("securityContext") or {}).get("runAsNonRoot") is True,
                  f"{what}: {name}: a cpuOnly pool runs as root")
        else:
            one_flag(args, "--arch", pool["arch"], f"{what}: {name}")
            want_count = "2" if name == "p150" else str(pool["deviceCount"])
            one_flag(args, "--device_count", want_count, f"{what}: {name}")
    r = chart.run(tls_args + ["--set", f"auth.agentToken={AGENT_TOKEN}",
                              "--set", "agents.pools.n150.cpuOnly=false",
                              "--set", "agents.pools.big.enabled=true"])
    check(r.returncode != 0 and "arch" in r.stderr,
          f"{what}: a new device pool without arch rendered (exit {r.returncode}):\n{r.stderr}")
    print(f"[7] {what}: --set agents.pools.<name> switches one pool; node selectors, archs, "
          "device resources and cpu-only settings follow each pool")


def case_defaults(chart, tmp):
    """`helm install` with no values: the chart generates its CA, certificates and agent token."""
    what = "defaults"
    for mutual in (False, True):
        label = f"{what}{' + tls.mutual' if mutual else ''}"
        docs = chart.render(["--set", "tls.mutual=true"] if mutual else [])
        if docs is None:
            continue
        secrets = of_kind(docs, "Secret")
        if not check(len(secrets) == 1, f"{label}: {len(secrets)} Secrets rendered"):
            continue
        data = secret_data(secrets[0])
        want = {"tls.crt", "tls.key", "ca.crt", "tokens.yaml", "agent-token"}
        if mutual:
            want |= {"agent.crt", "agent.key"}
        check(set(data) == want, f"{label}: Secret keys {sorted(data)}, want {sorted(want)}")
        paths = {}
        for key in want & {"tls.crt", "ca.crt", "agent.crt"}:
            paths[key] = os.path.join(tmp, f"{label.replace(' ', '_')}-{key}")
            with open(paths[key], "w") as f:
                f.write(data.get(key, ""))
        certs = [paths[k] for k in ("tls.crt", "agent.crt") if k in paths]
        r = subprocess.run(["openssl", "verify", "-CAfile", paths["ca.crt"]] + certs,
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, f"{label}: the generated certificates do not verify against "
                                 f"ca.crt:\n{r.stdout}{r.stderr}")
        r = subprocess.run(["openssl", "x509", "-in", paths["tls.crt"], "-noout", "-ext",
                            "subjectAltName"], capture_output=True, text=True, timeout=60)
        for name in ("rel-triage-farm-coordinator", "rel-triage-farm-coordinator.default.svc"):
            check(f"DNS:{name}," in r.stdout + ",",
                  f"{label}: the coordinator certificate does not name {name}: {r.stdout}")
        token = data.get("agent-token", "")
        check(len(token) >= 40, f"{label}: agent-token has {len(token)} characters")
        tokens = yaml.safe_load(data.get("tokens.yaml", "")) or {}
        check({"name": "agents", "role": "agent", "token": token} in tokens.get("tokens", []),
              f"{label}: tokens.yaml lacks the generated agent token")
    print(f"[8] {what}: renders without values; generated CA, coordinator certificate (Service "
          "names), agent certificate with mutual, and agent token in tokens.yaml")


WORKLOAD_KINDS = ("StatefulSet", "DaemonSet", "CronJob")


def pod_spec(doc):
    if doc["kind"] == "CronJob":
        return job_pod(doc)
    return doc["spec"]["template"]["spec"]


def check_secret_wiring(docs, what):
    """Every file a container reads from a Secret volume is a key the rendered Secret holds (or,
    with an existing Secret, one the chart documents); ConfigMaps mounted are rendered."""
    secrets = {d["metadata"]["name"]: secret_data(d) for d in of_kind(docs, "Secret")}
    configmaps = {d["metadata"]["name"] for d in of_kind(docs, "ConfigMap")}
    documented = {"tls.crt", "tls.key", "ca.crt", "agent.crt", "agent.key", "tokens.yaml",
                  "agent-token", "sweep-token"}
    n = 0
    for doc in docs:
        if doc["kind"] not in WORKLOAD_KINDS:
            continue
        pod = pod_spec(doc)
        name = f"{what}: {doc['kind']} {doc['metadata']['name']}"
        provided = {}  # mount path -> files it provides
        volumes = {v["name"]: v for v in pod.get("volumes") or []}
        for claim in doc["spec"].get("volumeClaimTemplates") or []:  # a StatefulSet's
            volumes[claim["metadata"]["name"]] = {"persistentVolumeClaim": {}}
        for c in pod.get("containers") or []:
            for m in c.get("volumeMounts") or []:
                v = volumes.get(m["name"])
                if not check(v is not None, f"{name}: mounts volume {m['name']}, not declared"):
                    continue
                if "configMap" in v:
                    check(v["configMap"]["name"] in configmaps,
                          f"{name}: ConfigMap {v['configMap']['name']} is not rendered")
                if "secret" not in v:
                    continue
                secret_name = v["secret"]["secretName"]
                keys = set(secrets[secret_name]) if secret_name in secrets else documented
                if secret_name not in secrets:
                    check(not secrets, f"{name}: Secret {secret_name} is neither rendered nor the "
                                       "existing one")
                items = v["secret"].get("items")
                files = {}
                for item in items or [{"key": k, "path": k} for k in keys]:
                    n += 1
                    check(item["key"] in keys, f"{name}: mounts Secret key {item['key']}, which "
                                               f"{secret_name} does not hold ({sorted(keys)})")
                    files[item["path"]] = item["key"]
                provided[m["mountPath"].rstrip("/")] = files
                # A Secret volume without items projects every key: agents must never see the
                # coordinator's key or the tokens file.
                if doc["kind"] == "DaemonSet":
                    seen = {"tls.key", "tokens.yaml"} & set(files.values())
                    check(not seen, f"{name}: the agent's Secret volume gives it {sorted(seen)}")
            # Files named in args under a Secret mount are mounted.
            for arg in c.get("args") or []:
                for path, files in provided.items():
                    if str(arg).startswith(path + "/"):
                        check(str(arg)[len(path) + 1:] in files,
                              f"{name}: args name {arg}, which the Secret volume does not provide")
    return n


def coordinator_container(docs):
    sts = of_kind(docs, "StatefulSet")
    return sts[0]["spec"]["template"]["spec"]["containers"][0] if sts else None


def case_matrix(chart):
    """The values a user combines, each rendered and checked for what it must change."""
    token = ["--set", f"weeklySweep.operatorToken={OPERATOR_TOKEN}"]
    variants = [
        ("defaults", [], {}),
        ("tls off, auth.insecure", ["--set", "tls.enabled=false", "--set", "auth.insecure=true"],
         {"tls": False, "insecure": True}),
        ("mutual TLS", ["--set", "tls.mutual=true"], {"mutual": True}),
        ("tls on, auth.insecure", ["--set", "auth.insecure=true"], {"insecure": True}),
        ("ServiceMonitor and PrometheusRule",
         ["--set", "monitoring.serviceMonitor.enabled=true",
          "--set", "monitoring.serviceMonitor.labels.release=kps",
          "--set", "monitoring.prometheusRule.enabled=true"], {"monitoring": True}),
        *[(f"{pool} pool only",
           [a for other in ("n150", "p150", "n300-llmbox") if other != pool
            for a in ("--set", f"agents.pools.{other}.enabled=false")], {"pools": {pool}})
          for pool in ("n150", "p150", "n300-llmbox")],
        ("cpu-only pool only",
         ["--set", "agents.pools.cpu.enabled=true", "--set", "agents.pools.n150.enabled=false",
          "--set", "agents.pools.p150.enabled=false",
          "--set", "agents.pools.n300-llmbox.enabled=false"], {"pools": {"cpu"}}),
        ("weekly CronJob", sweep_args() + token + ["--set", "tls.mutual=true"],
         {"mutual": True, "cronjob": True}),
        ("existing Secret", sweep_args() + ["--set", "secret.existingSecret=farm-secret"],
         {"secret": False, "cronjob": True}),
        ("nightly CronJob",
         sweep_args() + token + ["--set", "weeklySweep.playbooks=null",
                                 "--set", "weeklySweep.incremental=false",
                                 "--set", "weeklySweep.nightly.claimName=nightly-reports",
                                 "--set", "weeklySweep.nightly.paths={runs/a,runs/b.tar.gz}"],
         {"cronjob": True}),
        ("tcpSocket probes", ["--set", "coordinator.probes.type=tcpSocket"], {"probe": "tcpSocket"}),
        ("other ports and data dir",
         ["--set", "coordinator.ports.agent=8601", "--set", "coordinator.ports.health=8603",
          "--set", "coordinator.dataDir=/data/triage"], {"agent_port": 8601, "health_port": 8603,
                                                         "data_dir": "/data/triage"}),
    ]
    rendered = []
    for name, args, want in variants:
        docs = chart.render(args)
        if docs is None:
            continue
        what = f"matrix [{name}]"
        rendered += [{"source": what, "object": d} for d in docs]
        kinds = sorted({d["kind"] for d in docs})
        mounted = check_secret_wiring(docs, what)
        c = coordinator_container(docs)
        if not check(c is not None, f"{what}: no coordinator StatefulSet"):
            continue
        cargs = [str(a) for a in c.get("args") or []]
        one_flag(cargs, "--agent_address", f"0.0.0.0:{want.get('agent_port', 7601)}", what)
        one_flag(cargs, "--health_address", f"0.0.0.0:{want.get('health_port', 7603)}", what)
        one_flag(cargs, "--data_dir", want.get("data_dir", "/var/lib/triage"), what)
        tls, mutual = want.get("tls", True), want.get("mutual", False)
        check(("--tls_cert" in cargs) == tls, f"{what}: --tls_cert in args is {'--tls_cert' in cargs}")
        check(("--tls_client_ca" in cargs) == mutual, f"{what}: --tls_client_ca with mutual={mutual}")
        check(("--insecure" in cargs) == want.get("insecure", False), f"{what}: --insecure")
        check(("--tokens_file" in cargs) != want.get("insecure", False), f"{what}: --tokens_file")
        ports = {p["name"]: p["containerPort"] for p in c.get("ports") or []}
        check(ports.get("grpc-agent") == want.get("agent_port", 7601), f"{what}: ports {ports}")
        probe = c.get("readinessProbe") or {}
        if want.get("probe", "grpc") == "grpc":
            check(probe.get("grpc", {}).get("port") == ports.get("grpc-health"),
                  f"{what}: readinessProbe {probe}, want grpc on the health port")
        else:
            check(probe.get("tcpSocket", {}).get("port") == "grpc-agent",
                  f"{what}: readinessProbe {probe}, want tcpSocket on grpc-agent")
        check(("Secret" in kinds) == want.get("secret", True), f"{what}: kinds {kinds}")
        check(("CronJob" in kinds) == want.get("cronjob", False), f"{what}: kinds {kinds}")
        monitoring = want.get("monitoring", False)
        check(("ServiceMonitor" in kinds) == monitoring and ("PrometheusRule" in kinds) == monitoring,
              f"{what}: kinds {kinds}")
        if monitoring:
            sm = of_kind(docs, "ServiceMonitor")[0]
            check(sm["metadata"]["labels"].get("release") == "kps", f"{what}: ServiceMonitor labels")
            service_ports = {p["name"] for d in of_kind(docs, "Service") for p in d["spec"]["ports"]}
            for ep in sm["spec"]["endpoints"]:
                check(ep["port"] in service_ports, f"{what}: ServiceMonitor scrapes port "
                                                   f"{ep['port']}, no Service has it")
            rule = of_kind(docs, "PrometheusRule")[0]
            check(len(rule["spec"].get("groups") or []) > 0, f"{what}: PrometheusRule has no groups")
        pools = {d["metadata"]["labels"]["triage-farm/pool"] for d in of_kind(docs, "DaemonSet")}
        check(pools == want.get("pools", {"n150", "p150", "n300-llmbox"}),
              f"{what}: DaemonSets for pools {sorted(pools)}")
        print(f"    {name}: {len(docs)} manifests ({', '.join(kinds)}); {mounted} Secret items "
              "checked")
    print(f"[9] matrix: {len(variants)} value sets, {len(rendered)} manifests; coordinator args, probes, "
          "monitors, pools and Secret wiring follow the values")
    return rendered


def run_validator(src, tmp, name, docs):
    """validate.js over docs: (exit code, output lines)."""
    path = os.path.join(tmp, f"{name}.json")
    with open(path, "w") as f:
        json.dump(docs, f)
    r = subprocess.run(["node", os.path.join(src, VALIDATOR), path], capture_output=True,
                       text=True, timeout=300)
    return r.returncode, (r.stdout + r.stderr).splitlines()


def case_validate(src, tmp, rendered):
    """Strict validation of every manifest, and proof that it rejects mistakes."""
    modules = os.path.join(src, os.path.dirname(VALIDATOR), "node_modules")
    if not check(os.path.isdir(os.path.join(modules, "typescript")) and
                 os.path.isdir(os.path.join(modules, "kubernetes-models")),
                 f"{modules} lacks the pinned schema packages: run scripts/install-deps.sh"):
        return
    code, out = run_validator(src, tmp, "matrix", rendered)
    check(code == 0, "validation of the matrix failed:\n" + "\n".join(out))
    summary = [l for l in out if l.startswith("validate: ")]
    # Six planted mistakes, one per kind of error, each of which must be named at its path.
    bad = copy.deepcopy([d for d in rendered if d["source"] == "matrix [weekly CronJob]" or
                         d["source"] == "matrix [ServiceMonitor and PrometheusRule]"])
    planted = {}
    for d in bad:
        o, where = d["object"], f"{d['source']}: {d['object']['kind']}/"
        if o["kind"] == "StatefulSet" and "StatefulSet" not in planted:
            o["spec"]["template"]["spec"]["containers"][0]["imagePulPolicy"] = "Always"
            o["spec"]["replicas"] = "1"
            planted["StatefulSet"] = [".containers[0].imagePulPolicy: Object literal may only",
                                      "$.spec.replicas: Type 'string' is not assignable"]
        elif o["kind"] == "CronJob":
            o["spec"]["concurrencyPolicy"] = "Sometimes"
            planted["CronJob"] = ["$.spec.concurrencyPolicy: Type '\"Sometimes\"'"]
        elif o["kind"] == "ServiceMonitor":
            o["spec"]["endpoints"][0]["intervall"] = "30s"
            planted["ServiceMonitor"] = ["$.spec.endpoints[0].intervall: Object literal may only"]
        elif o["kind"] == "PrometheusRule":
            o["spec"]["groups"][0]["rules"][0]["expresion"] = "up"
            planted["PrometheusRule"] = ["$.spec.groups[0].rules[0].expresion: Object literal"]
        elif o["kind"] == "Service" and "Service" not in planted:
            del o["spec"]["ports"][0]["port"]
            planted["Service"] = ["$.spec.ports[0]: Property '\"port\"' is missing"]
    code, bad_out = run_validator(src, tmp, "planted", bad)
    check(code == 1, f"the planted mistakes: validate.js exited {code}, want 1")
    want = [m for ms in planted.values() for m in ms]
    for m in want:
        check(any(m in l for l in bad_out), f"the planted mistake {m!r} is not reported:\n" +
              "\n".join(bad_out))
    print(f"[10] strict validation: {len(rendered)} manifests valid "
          f"({summary[-1][len('validate: '):] if summary else '?'}); "
          f"{len(want)} planted mistakes in {len(bad)} manifests each named at its path")


def case_nightly(chart):
    what = "weeklySweep.nightly"
    docs = chart.render(sweep_args() + [
        "--set", "auth.insecure=true", "--set", "tls.enabled=false",
        "--set", "weeklySweep.playbooks=null", "--set", "weeklySweep.incremental=false",
        "--set", "weeklySweep.nightly.claimName=nightly-reports",
        "--set", "weeklySweep.nightly.paths={runs/2026-11-25,runs/2026-11-27.zip}",
        "--set", "weeklySweep.nightly.confirm=3",
        "--set", "weeklySweep.nightly.maxDeviceHours=12"])
    if docs is None:
        return
    cronjobs = of_kind(docs, "CronJob")
    if not check(len(cronjobs) == 1, f"{what}: {len(cronjobs)} CronJobs rendered, want 1"):
        return
    pod = job_pod(cronjobs[0])
    c = pod["containers"][0]
    args = [str(a) for a in c.get("args") or []]
    check(flag_values(args, "--nightly") == ["/nightly/runs/2026-11-25", "/nightly/runs/2026-11-27.zip"],
          f"{what}: --nightly args {flag_values(args, '--nightly')}")
    one_flag(args, "--confirm", "3", what)
    one_flag(args, "--max-device-hours", "12", what)
    check("--arch" not in args, f"{what}: --arch given though nightly.archs is empty: {args}")
    check("--playbooks" not in args, f"{what}: --playbooks in a nightly sweep's args")
    check("nightly maintenance" in args, f"{what}: the reason is not nightly maintenance: {args}")
    mounts = {m["name"]: m for m in c.get("volumeMounts") or []}
    check(mounts.get("nightly", {}).get("mountPath") == "/nightly" and
          mounts.get("nightly", {}).get("readOnly") is True,
          f"{what}: the runs' volume is not mounted read-only at /nightly: {mounts}")
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    check(volumes.get("nightly", {}).get("persistentVolumeClaim", {}).get("claimName") ==
          "nightly-reports", f"{what}: the nightly volume is not the claim: {volumes}")
    check_expansions(c, what)
    print(f"[11] {what}: --nightly per path, --confirm, --max-device-hours, the claim read-only")


def case_failures(chart, tls_args):
    cases = [
        ("nightly paths without a claim",
         sweep_args() + ["--set", "auth.insecure=true", "--set", "weeklySweep.playbooks=null",
                         "--set", "weeklySweep.incremental=false",
                         "--set", "weeklySweep.nightly.paths={runs/a}"],
         "weeklySweep.nightly.claimName is required"),
        ("nightly paths with playbooks",
         sweep_args() + ["--set", "auth.insecure=true",
                         "--set", "weeklySweep.nightly.claimName=c",
                         "--set", "weeklySweep.nightly.paths={runs/a}"],
         "weeklySweep.playbooks and weeklySweep.incremental must stay unset"),
        ("enabled without gitUrl",
         ["--set", "weeklySweep.enabled=true", "--set", "secret.existingSecret=s"],
         "weeklySweep.gitUrl is required when weeklySweep.enabled"),
        ("enabled without operatorToken",
         tls_args + sweep_args() + ["--set", f"auth.agentToken={AGENT_TOKEN}"],
         "weeklySweep.operatorToken is required"),
        ("operatorToken under 16 characters",
         sweep_args() + ["--set", "secret.existingSecret=s",
                         "--set", "weeklySweep.operatorToken=short"],
         "weeklySweep.operatorToken"),
    ]
    for name, args, message in cases:
        r = chart.run(args)
        check(r.returncode != 0, f"{name}: rendering succeeded, want a failure")
        check(message in r.stderr, f"{name}: stderr lacks {message!r}:\n{r.stderr}")
    print(f"[6] {len(cases)} invalid settings refused with their message")


def main():
    if len(sys.argv) != 3:
        print("usage: chart_render_test.py HELM_TEMPLATE SOURCE_DIR", file=sys.stderr)
        return 2
    helm, src = sys.argv[1], os.path.abspath(sys.argv[2])
    if not (os.path.isfile(helm) and os.access(helm, os.X_OK)):
        print(f"FAIL: {helm} is missing or not executable: this test renders the chart with it "
              "(the offline helm template of the shared tools, beside the checkout)")
        return 1
    chart = Chart(helm, os.path.join(src, "charts", "triage-farm"))
    with tempfile.TemporaryDirectory() as tmp:
        crt, key = make_tls(tmp)
        tls_args = ["--set-file", f"tls.cert={crt}", "--set-file", f"tls.key={key}",
                    "--set-file", f"tls.ca={crt}", "--set-file", f"tls.agentCert={crt}",
                    "--set-file", f"tls.agentKey={key}"]
        case_off(chart, tls_args)
        case_on(chart, tls_args)
        case_insecure(chart)
        case_existing_secret(chart)
        case_long_name(chart)
        case_failures(chart, tls_args)
        case_nightly(chart)
        case_pools(chart, tls_args)
        case_defaults(chart, tmp)
        rendered = case_matrix(chart)
        case_validate(src, tmp, rendered)
    if failures:
        print(f"\nchart_render: {len(failures)} failure(s)")
        return 1
    print("\nchart_render: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
