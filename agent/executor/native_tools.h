#pragma once

#include <chrono>
#include <functional>
#include <map>

#include "agent/playbooks/tools.h"

namespace triage::agent {

struct NativeToolsOptions {
  std::filesystem::path workspace;    // the tt-xla checkout
  std::filesystem::path shard_dir;    // evidence goes to probes/, junit/, logs/ here
  std::filesystem::path scripts_dir;  // agent/scripts (triage_probe.py, the pytest plugin)
  std::string python = "/usr/bin/python3";
  std::string arch = "n150";  // passed to the runner's --arch
  std::chrono::seconds probe_timeout{600};
  std::chrono::seconds pytest_timeout{3600};
  std::function<bool()> cancelled;
  std::function<void(const std::string& step)> on_timeout;  // metrics
  // Runs numbered before this tools' first (its first pytest run is first_run + 1): a batched
  // shard's own runs come after the batch session it records too.
  int first_run = 0;
};

// Runs the probe and pytest as subprocesses (argv, own process group, timeouts, each in its own
// working directory so the runner's ._bringup_stage.txt is never shared) and records what they
// produced: probes/<key>.<phase>.<seq>.json, junit/<label>.xml, logs/<label>.log and, for a
// pytest run that left no XML, logs/<key>.log.
class NativeTools : public playbooks::PlaybookTools {
 public:
  explicit NativeTools(NativeToolsOptions options)
      : options_(std::move(options)), runs_(options_.first_run) {}
  absl::StatusOr<std::vector<playbooks::ProbeDoc>> Probe(const std::string& key,
                                                         const std::string& mode) override;
  absl::StatusOr<playbooks::PytestRun> Pytest(const std::vector<std::string>& keys,
                                              const std::string& label) override;
  std::map<std::string, std::filesystem::path> Evidence() const override { return evidence_; }

 private:
  NativeToolsOptions options_;
  std::map<std::string, int> seq_;  // key + phase -> calls so far
  std::map<std::string, std::filesystem::path> evidence_;
  int runs_ = 0;
};

}  // namespace triage::agent
