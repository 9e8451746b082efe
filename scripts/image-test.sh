#!/usr/bin/env bash
# `make image-test`: runs the image that `make image` built (docs/image.md).
#
#   1. the container runs as a non-root user;
#   2. triage-coordinator, triage-agent and triagectl answer --version with the project's version,
#      and ldd finds every library they link;
#   3. the image's size, printed (and at most IMAGE_MAX_MIB, default 300: a guard against a
#      runtime that grows by accident);
#   4. the fixture sweep of `make demo` twice: once with this build's binaries on the host, once
#      with the coordinator and the three agents in containers of the image (the agents from a
#      layer that adds Debian's torch and pytest for the fixture's runner,
#      tests/image/Containerfile.fixture); both patches must be byte-identical and the report's
#      totals equal.
#
# Usage: scripts/image-test.sh [BUILD_DIR]   (IMAGE=... tests another tag)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
image=${IMAGE:-localhost/triage-farm:latest}
fixture_image=localhost/triage-farm-fixture:latest
max_mib=${IMAGE_MAX_MIB:-300}
source scripts/podman-lib.sh
version=$(project_version)

fail() { echo "image-test: FAIL: $*" >&2; exit 1; }
command -v podman >/dev/null || fail "podman is missing: run scripts/install-deps.sh"
podman image exists "$image" || fail "no image $image: run make image"

run=("${podman_run[@]}" --network none "$image")

uid=$("${run[@]}" id -u)
[[ $uid =~ ^[0-9]+$ && $uid != 0 ]] || fail "the container runs as uid '$uid', want a non-root user"
echo "image-test: runs as $(podman image inspect --format '{{.Config.User}}' "$image") (uid $uid)"

for b in triage-coordinator triage-agent triagectl; do
  got=$("${run[@]}" "$b" --version)
  [[ $got == "$b $version" ]] || fail "$b --version printed '$got', want '$b $version'"
  missing=$("${run[@]}" ldd "/usr/local/bin/$b" | grep "not found" || true)
  [[ -z $missing ]] || fail "$b lacks libraries in the image: $missing"
done
"${run[@]}" test -f /usr/local/share/triage-farm/scripts/triage_probe.py ||
  fail "the probe script is not in the image"
echo "image-test: --version of the three binaries is $version; ldd finds every library"

size=$(podman image inspect --format '{{.Size}}' "$image")
mib=$(( (size + 1048575) / 1048576 ))
echo "image-test: $image is $size bytes ($mib MiB)"
(( mib <= max_mib )) || fail "the image is $mib MiB, over IMAGE_MAX_MIB=$max_mib"

echo "image-test: the fixture layer (torch, pytest) -> $fixture_image"
start=$(date +%s)
"${podman_build[@]}" --quiet --build-arg "IMAGE=$image" -t "$fixture_image" -f tests/image/Containerfile.fixture . >/dev/null
echo "image-test: fixture layer in $(( $(date +%s) - start )) s"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for mode in host image; do
  start=$(date +%s)
  env=(DEMO_OUT="$tmp/$mode")
  [[ $mode == image ]] && env+=(TRIAGE_IMAGE="$image" TRIAGE_AGENT_IMAGE="$fixture_image")
  if ! env "${env[@]}" scripts/demo.sh "$build" >"$tmp/$mode.log" 2>&1; then
    tail -40 "$tmp/$mode.log" >&2
    for l in "$tmp/$mode"/run/*.log; do echo "--- $l" >&2; tail -20 "$l" >&2; done
    fail "the $mode sweep failed"
  fi
  echo "image-test: $mode sweep in $(( $(date +%s) - start )) s"
done
grep -q "containers: coordinator from $image" "$tmp/image.log" ||
  fail "the image sweep did not run in containers"
for f in tt-xla.patch tt-forge-models.patch nightly/tt-xla.patch; do
  [[ -s $tmp/host/$f ]] || fail "the host sweep wrote no $f"
  cmp -s "$tmp/host/$f" "$tmp/image/$f" || {
    diff "$tmp/host/$f" "$tmp/image/$f" | head -40 >&2
    fail "$f differs between the host and the image sweeps"
  }
  echo "image-test: $f identical ($(wc -l <"$tmp/host/$f") lines)"
done
/usr/bin/python3 - "$tmp/host/report.json" "$tmp/image/report.json" <<'PY'
import json, sys
a, b = (json.load(open(p))["totals"] for p in sys.argv[1:])
if a != b:
    sys.exit(f"image-test: FAIL: report totals differ: host {a}, image {b}")
print(f"image-test: report totals equal: {a['decided']} of {a['entries']} entries decided")
PY
echo "image-test: all checks passed"
