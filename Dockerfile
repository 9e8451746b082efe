# triage-farm image: triage-coordinator, triage-agent, triagectl and the agent's probe scripts.
#
#   docker build -t triage-farm .
#   docker run triage-farm triage-coordinator --help
#
# Builder: the project's own install script (build packages only), a Release build with Ninja,
# and the unit tests. Runtime: Debian 12 slim with only the shared libraries the binaries link
# (tests/observability/dockerfile_test.py checks this list against ldd of the built binaries),
# git (workspaces, sweep checkouts) and python3 (the probe scripts; real agents point --python
# at tt-xla's venv). Runs as the non-root user "triage".

FROM debian:12 AS build
WORKDIR /src
COPY . /src
RUN scripts/install-deps.sh --build \
 && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
 && cmake --build build -j "$(nproc)" \
 && ctest --test-dir build -L unit --output-on-failure -j "$(nproc)"

FROM debian:12-slim AS runtime
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libabsl20220623 libc-ares2 libcivetweb1 libfmt9 libgrpc++1.51 libgrpc29 \
      libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libprotobuf32 libpugixml1v5 \
      libjemalloc2 libre2-9 libspdlog1.10 libsqlite3-0 libssl3 libyaml-cpp0.7 zlib1g \
      git ca-certificates python3 \
 && rm -rf /var/lib/apt/lists/* \
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
