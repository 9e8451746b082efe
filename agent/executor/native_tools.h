#pragma once

#include <chrono>
#include <functional>
#include <map>

#include "agent/playbooks/tools.h"

namespace triage::agent {

// What a pytest run has finished so far, while it runs: from the agent plugin's partial JUnit
// file (agent/scripts/triage_pytest_plugin.py), which holds the finished tests' testcases as the
// final file will.
struct PytestProgress {
  std::vector<junit::TestCase> cases;  // per key asked; kMissing where no test has finished yet
  std::string junit_name;              // the finished run's evidence names ("junit/NN-label.xml",
  std::string log_name;                // "logs/NN-label.log")
  std::filesystem::path partial_xml;   // the partial JUnit file as it is now
  std::filesystem::path log;           // the run's log so far
};

struct NativeToolsOptions {
  std::filesystem::path workspace;    // the tt-xla checkout
  std::filesystem::path shard_dir;    // evidence goes to probes/, junit/, logs/ here
  std::filesystem::path scripts_dir;  // agent/scripts (triage_probe.py, the pytest plugin)
  std::string python = "/usr/bin/python3";
  std::string arch = "n150";  // passed to the runner's --arch
  std::chrono::seconds probe_timeout{600};
  int probe_nice = 10;  // ExecSettings::probe_nice
  std::chrono::seconds pytest_timeout{3600};
  std::function<bool()> cancelled;
  std::function<void(const std::string& step)> on_timeout;  // metrics
  // Called while a pytest run is going, each time its partial JUnit file has changed (a test
  // finished); never after the run has ended.
  std::function<void(const PytestProgress&)> on_progress;
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
  void SetPytestTimeout(std::chrono::seconds limit) override { limit_ = limit; }

 private:
  NativeToolsOptions options_;
  std::chrono::seconds limit_{0};   // SetPytestTimeout (0: options_.pytest_timeout)
  std::map<std::string, int> seq_;  // key + phase -> calls so far
  std::map<std::string, std::filesystem::path> evidence_;
  int runs_ = 0;
};

}  // namespace triage::agent
