#!/usr/bin/env bash
# Installs, with apt-get, exactly the Debian 12 packages triage-farm needs to build, test and demo.
# Idempotent: when every package is already installed it prints one line and changes nothing.
#
#   scripts/install-deps.sh            everything (build + python fixture + prometheus/linters +
#                                      clang for the fuzz targets + podman and mmdebstrap for the
#                                      image), then the pinned npm packages of the chart's
#                                      validator (tests/observability/k8s-validate, `npm ci`)
#   scripts/install-deps.sh --build    only what the C++ build needs (the image's builder stage)
set -euo pipefail
cd "$(dirname "$0")/.."

build_pkgs=(
  cmake ninja-build pkg-config g++ git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libre2-dev
  libyaml-cpp-dev libpugixml-dev libspdlog-dev prometheus-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev libsqlite3-dev libcli11-dev nlohmann-json3-dev
  libjemalloc-dev libssl-dev libexpat1-dev libarchive-dev
  clang-format
)
# The probe script, the fixture's pytest runner and the e2e tests use Debian's torch and pytest,
# which belong to /usr/bin/python3; pytest-forked gives the runner --forked (the fixture's
# nightly result set, tests/fixtures/make-nightly.sh).
python_pkgs=(python3 python3-torch python3-pytest python3-pytest-forked)
# A real Prometheus for the dashboard/alert tests, and linters for the chart.
tool_pkgs=(prometheus yamllint sqlite3 git python3-jsonschema)
# The libFuzzer targets (scripts/fuzz.sh, run by `make test`): clang with its sanitizer and
# fuzzer runtimes (libFuzzer, FuzzedDataProvider.h), and llvm-symbolizer for the reports.
fuzz_pkgs=(clang-14 libclang-rt-14-dev llvm-14)
# `make image` / `make image-test` (scripts/image.sh, docs/image.md): Debian 12 bases made with
# mmdebstrap, built and run with podman; runc runs the containers (crun refuses this kind of
# machine's hybrid cgroup layout).
image_pkgs=(podman buildah mmdebstrap runc uidmap)

full=1
[[ "${1:-}" == "--build" ]] && full=0
want=("${build_pkgs[@]}")
if [[ $full == 1 ]]; then
  want+=("${python_pkgs[@]}" "${tool_pkgs[@]}" "${fuzz_pkgs[@]}" "${image_pkgs[@]}")
  # Node.js runs the chart's validator; a machine that has node and npm already keeps its own.
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    want+=(nodejs npm)
  fi
fi

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#want[@]} packages present"
elif [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run as root (or install them with sudo apt-get install)" >&2
  exit 1
else
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The chart validator's npm packages, exactly as package-lock.json pins them. Installed again
# only when the lock file changed since the last install (npm ci writes node_modules afresh).
if [[ $full == 1 ]]; then
  v=tests/observability/k8s-validate
  stamp=$v/node_modules/.package-lock.json
  if [[ ! -f $stamp || $v/package-lock.json -nt $stamp ]]; then
    echo "install-deps: npm ci in $v"
    npm ci --prefix "$v" --no-audit --no-fund --loglevel=error
  else
    echo "install-deps: $v/node_modules is current"
  fi
fi
