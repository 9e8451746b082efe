# Sourced by scripts/image.sh, scripts/image-test.sh and scripts/demo.sh (docs/image.md,
# "Containers on this kind of machine"): how this project builds and runs containers here.

# The project's version, from CMakeLists.txt's project(... VERSION).
project_version() {
  sed -n 's/^project(triage_farm VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt
}

# hard OPT CAP: this shell's hard limit for ulimit option OPT, at most CAP, as "N:N". podman's
# default rlimits are higher than a sandboxed host lets a process raise, and such a host may
# refuse even its own hard nproc inside a container (which needs few processes).
hard_limit() {
  local v
  v=$(ulimit -H "$1")
  [[ $v == unlimited || $v -gt $2 ]] && v=$2
  echo "$v:$v"
}

# `podman run` as these scripts start containers: runc (crun refuses hosts whose cgroup v2
# hierarchy keeps controllers while v1 is mounted) and capped rlimits.
podman_run=(podman --runtime runc run --rm --ulimit "nofile=$(hard_limit -n 65536)"
            --ulimit "nproc=$(hard_limit -u 4096)")

# `podman build` as these scripts build: chroot isolation runs the RUN steps without an OCI
# runtime (no cgroup or rlimit setup), the host's network reaches the Debian archive, and only
# local images are used as bases.
podman_build=(podman build --isolation=chroot --network=host --pull=never --layers)
