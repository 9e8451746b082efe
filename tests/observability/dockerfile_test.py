#!/usr/bin/python3
"""Static checks of the Dockerfile (the image itself is built and run by make image-test).

    dockerfile_test.py SOURCE_DIR BUILD_DIR

- two stages on Debian 12: a builder FROM ${BASE_IMAGE} and a runtime FROM ${RUNTIME_IMAGE},
  whose ARG defaults are debian:12 and debian:12-slim (make image points them at local bases);
- the builder runs scripts/install-deps.sh --build and builds the three binaries with CMake +
  Ninja;
- every COPY --from=build source maps to a file of this build (binaries under BUILD_DIR, the
  probe scripts in the source tree), and the binaries copied are the CMake targets;
- the runtime packages are exactly the Debian packages that own the shared libraries the three
  binaries link (ldd + dpkg -S on this machine), plus git, ca-certificates and python3;
- the image ends as a non-root USER.
"""
import os
import re
import subprocess
import sys

SRC, BUILD = sys.argv[1], sys.argv[2]
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


text = open(os.path.join(SRC, "Dockerfile")).read()
# Join continuation lines into instructions.
logical = re.sub(r"\\\n", " ", text)
instrs = [l.strip() for l in logical.splitlines() if l.strip() and not l.strip().startswith("#")]

args = dict(re.match(r"ARG\s+(\w+)=(\S+)", i).groups() for i in instrs
            if re.match(r"ARG\s+\w+=\S+", i))
froms = [i for i in instrs if i.upper().startswith("FROM ")]
bases = [re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), "?"), f.split()[1]) for f in froms]
if bases != ["debian:12", "debian:12-slim"]:
    fail("base images must default to debian:12 (build) and debian:12-slim (runtime): %s" % froms)
if not froms or not re.search(r"\bAS build\b", froms[0]):
    fail("the first stage must be named build")
build_stage = " ".join(instrs[:instrs.index(froms[1])] if len(froms) > 1 else instrs)
for needle in ("scripts/install-deps.sh --build", "-G Ninja",
               "--target triage-coordinator triage-agent triagectl"):
    if needle not in build_stage:
        fail("the builder stage does not run %r" % needle)
if not os.access(os.path.join(SRC, "scripts/install-deps.sh"), os.X_OK):
    fail("scripts/install-deps.sh is not executable")

targets = {"triage-coordinator": "coordinator/triage-coordinator",
           "triage-agent": "agent/triage-agent", "triagectl": "coordinator/triagectl/triagectl"}
copied_bins = []
for i in instrs:
    m = re.match(r"COPY\s+--from=build\s+(.*)", i)
    if not m:
        continue
    parts = m.group(1).split()
    for src in parts[:-1]:
        if src.startswith("/src/build/"):
            rel = src[len("/src/build/"):]
            if not os.path.isfile(os.path.join(BUILD, rel)):
                fail("COPY source %s is not a file of the build (%s)" % (src, rel))
            copied_bins.append(rel)
        elif src.startswith("/src/"):
            if not os.path.isfile(os.path.join(SRC, src[len("/src/"):])):
                fail("COPY source %s is not in the source tree" % src)
        else:
            fail("COPY --from=build source outside /src: %s" % src)
if sorted(copied_bins) != sorted(targets.values()):
    fail("binaries copied %s != the targets %s" % (sorted(copied_bins), sorted(targets.values())))
for name, rel in targets.items():
    if not re.search(r"/usr/local/bin/%s\b" % re.escape(name), text):
        fail("%s is not installed under its target name" % name)

# Runtime packages against ldd of the built binaries.
runtime = " ".join(instrs[instrs.index(froms[1]):]) if len(froms) > 1 else ""
m = re.search(r"apt-get install -y --no-install-recommends (.*?)&&", runtime)
listed = set(m.group(1).split()) if m else set()
owners = set()
for rel in targets.values():
    out = subprocess.run(["ldd", os.path.join(BUILD, rel)], capture_output=True, text=True).stdout
    for lib in re.findall(r"=> (/\S+)", out):
        for path in (os.path.realpath(lib), lib):
            r = subprocess.run(["dpkg", "-S", path], capture_output=True, text=True)
            if r.returncode == 0:
                owners.add(r.stdout.split(":")[0])
                break
        else:
            fail("no Debian package owns %s" % lib)
owners -= {"libc6", "libgcc-s1", "libstdc++6"}  # in the base image
want = owners | {"git", "ca-certificates", "python3"}
if listed != want:
    fail("runtime packages differ from what the binaries link: missing %s, extra %s"
         % (sorted(want - listed), sorted(listed - want)))

users = [i.split()[1] for i in instrs if i.upper().startswith("USER ")]
if not users or users[-1] in ("root", "0"):
    fail("the image must end as a non-root USER (got %s)" % users)

print("dockerfile_test: %d instructions, %d binaries, %d runtime packages checked"
      % (len(instrs), len(copied_bins), len(listed)))
if failures:
    sys.exit(1)
