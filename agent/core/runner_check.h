#pragma once

// The agent's self-check (docs/farm.md, "Only a working agent is a witness"): before it offers
// the native executor's work, an agent makes sure it can run tt-xla's runner at all, so that a
// machine without the runner's dependencies or its device never turns its own failures into
// verdicts on models.

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace triage::agent {

struct RunnerCheckOptions {
  std::string python = "/usr/bin/python3";  // the workspace's interpreter (--python)
  std::filesystem::path workspace;          // the agent's tt-xla checkout
  bool cpu_only = false;                    // a cpu_only agent has no device to check
  // Where the devices are (--device_path); "" skips the device check (emulated devices).
  std::filesystem::path device_path = "/dev/tenstorrent";
  int device_count = 1;
  // Each subprocess of the check is killed after this long.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // Polled while a subprocess runs: true kills it (the agent is stopping).
  std::function<bool()> cancelled;
};

// "" when the agent can run the runner, else one sentence naming what failed:
//  - the interpreter does not run, or cannot import pytest and torch;
//  - pytest cannot collect one test of the workspace's runner
//    (`python -m pytest --collect-only -q <workspace>/tests/runner/test_models.py::<fn>[<key>]`,
//    the key of a test-config entry whose status is not EXCLUDE_MODEL): the first error line,
//    e.g. "ImportError while loading conftest ...";
//  - a device agent's device_path is missing or holds fewer than device_count entries.
// The subprocesses run as argv, at the agent's own niceness, in the workspace.
std::string CheckRunner(const RunnerCheckOptions& options);

// The parts, for tests.

// "" when device_path holds at least device_count entries (a path that is not a directory
// counts as one device node), else why not. "" as well when device_path is empty.
std::string CheckDevices(const std::filesystem::path& device_path, int device_count);

// The pytest node id of one test the workspace's runner should collect:
// "<workspace>/tests/runner/test_models.py::<function>[<key>]", for the first test-config entry
// (files in path order) whose status is not EXCLUDE_MODEL and whose loader is checked out.
// An error names what the workspace lacks.
absl::StatusOr<std::string> CollectableTest(const std::filesystem::path& workspace);

// The line of a failed `pytest --collect-only` output that says what went wrong: the conftest
// that failed to load or the module that failed to collect, with pytest's first "E" line (the
// exception), else its first ERROR line, else its last line.
std::string FirstCollectionError(std::string_view output);

}  // namespace triage::agent
