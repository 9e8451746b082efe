# triage-farm image: triage-coordinator, triage-agent, triagectl and the agent's probe scripts.
#
#   docker build -t triage-farm .            (or podman build)
#   docker run triage-farm triage-coordinator --help
#   make image                               (this machine: a local Debian 12 base, podman build;
#                                             scripts/image.sh, docs/image.md)
#
# BASE_IMAGE and RUNTIME_IMAGE name the Debian 12 bases; `make image` points them at bases it
# makes locally with mmdebstrap, so nothing is pulled from a registry.
#
# Builder: the project's own install script (build packages only) and a Release build with Ninja
# of the three binaries (the sources' tests run in `make test`; the image's in `make image-test`).
# Runtime: Debian 12 slim with only the shared libraries the binaries link
# (tests/observability/dockerfile_test.py checks this list against ldd of the built binaries),
# git (workspaces, sweep checkouts) and python3 (the probe scripts; real agents point --python
# at tt-xla's venv). Runs as the non-root user "triage".

ARG BASE_IMAGE=debian:12
ARG RUNTIME_IMAGE=debian:12-slim

FROM ${BASE_IMAGE} AS build
WORKDIR /src
COPY . /src
RUN scripts/install-deps.sh --build \
 && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRIAGE_BUILD_TESTS=OFF \
      -DTRIAGE_BUILD_BENCH=OFF \
 && cmake --build build -j "$(nproc)" --target triage-coordinator triage-agent triagectl

FROM ${RUNTIME_IMAGE} AS runtime
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libabsl20220623 libc-ares2 libcivetweb1 libfmt9 libgrpc++1.51 libgrpc29 \
      libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libprotobuf32 libpugixml1v5 \
      libjemalloc2 libre2-9 libspdlog1.10 libsqlite3-0 libssl3 libyaml-cpp0.7 zlib1g \
      libarchive13 libexpat1 libacl1 libbz2-1.0 libicu72 liblz4-1 liblzma5 libnettle8 libxml2 \
      libzstd1 \
      git ca-certificates python3 \
 && apt-get clean && rm -rf /var/lib/apt/lists/* \
 && useradd --system --create-home --home-dir /var/lib/triage --uid 10001 triage
COPY --from=build /src/build/coordinator/triage-coordinator /usr/local/bin/triage-coordinator
COPY --from=build /src/build/agent/triage-agent /usr/local/bin/triage-agent
COPY --from=build /src/build/coordinator/triagectl/triagectl /usr/local/bin/triagectl
COPY --from=build /src/agent/scripts/triage_probe.py /src/agent/scripts/triage_pytest_plugin.py /usr/local/share/triage-farm/scripts/
USER triage
WORKDIR /var/lib/triage
EXPOSE 7601 7602 7603 9601 9602
ENTRYPOINT []
CMD ["triage-coordinator", "--help"]
