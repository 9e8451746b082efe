#!/usr/bin/env bash
# `make image`: builds the Dockerfile's image on this machine with podman, pulling nothing from a
# registry (docs/image.md).
#
#   1. Debian 12 bases made locally with mmdebstrap from the Debian archive and imported into
#      podman: localhost/triage-farm-base/debian:12 (minbase, for the builder stage) and
#      localhost/triage-farm-base/debian:12-slim (minbase without docs, man pages and locales, as
#      debian:12-slim, for the runtime stage). Made once; REBUILD_BASE=1 makes them again.
#   2. `podman build` of the real Dockerfile with BASE_IMAGE / RUNTIME_IMAGE pointing at them,
#      --pull=never, tagged localhost/triage-farm:VERSION and localhost/triage-farm:latest.
#   3. Prints the build's minutes and the image's size.
#
# Usage: scripts/image.sh [TAG]        (TAG defaults to localhost/triage-farm:latest)
# Environment: DEBIAN_MIRROR (default http://deb.debian.org/debian), REBUILD_BASE=1.
set -euo pipefail
cd "$(dirname "$0")/.."

tag=${1:-localhost/triage-farm:latest}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
base=localhost/triage-farm-base/debian:12
slim=localhost/triage-farm-base/debian:12-slim
source scripts/podman-lib.sh
version=$(project_version)

for tool in podman mmdebstrap; do
  command -v "$tool" >/dev/null || {
    echo "image: $tool is missing; run scripts/install-deps.sh (as root)" >&2
    exit 1
  }
done
[[ $(id -u) -eq 0 ]] || { echo "image: run as root (mmdebstrap and podman's storage)" >&2; exit 1; }

# A base image from the Debian archive: mmdebstrap writes a tarball, podman imports it.
make_base() {
  local name=$1
  shift
  if [[ ${REBUILD_BASE:-0} != 1 ]] && podman image exists "$name"; then
    echo "image: base $name exists (REBUILD_BASE=1 makes it again)"
    return
  fi
  local tmp
  tmp=$(mktemp -d)
  echo "image: making $name with mmdebstrap from $mirror"
  # merged-usr: the /usr symlinks made directly, as Debian's own images have them, instead of
  # the usrmerge package (which would bring perl into the base).
  mmdebstrap --variant=minbase --format=tar --quiet \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr "$@" bookworm "$tmp/rootfs.tar" \
    "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
    "deb $security bookworm-security main"
  podman import --quiet --change 'CMD ["bash"]' "$tmp/rootfs.tar" "$name" >/dev/null
  rm -rf "$tmp"
}

start=$(date +%s)
make_base "$base"
# As debian:12-slim: no documentation (but the copyright files), man pages, info or locales.
make_base "$slim" \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*'

echo "image: podman build of Dockerfile -> $tag"
"${podman_build[@]}" --build-arg "BASE_IMAGE=$base" --build-arg "RUNTIME_IMAGE=$slim" \
  --label "org.opencontainers.image.version=$version" \
  -t "$tag" -t "localhost/triage-farm:$version" -f Dockerfile .
secs=$(( $(date +%s) - start ))
size=$(podman image inspect --format '{{.Size}}' "$tag")
printf 'image: %s built in %dm%02ds; size %d bytes (%d MiB)\n' "$tag" $((secs / 60)) \
  $((secs % 60)) "$size" $(( (size + 1048575) / 1048576 ))
