#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/playbooks/probe.h"
#include "common/junit/junit.h"
#include "triage/v1/types.pb.h"

namespace triage::playbooks {

// One pytest verification run: a testcase per asked key (Outcome::kMissing when the run left
// none, e.g. the process crashed), and what pytest printed.
struct PytestRun {
  std::vector<junit::TestCase> cases;
  std::string log;
  bool xml = false;        // a JUnit file was written
  bool timed_out = false;  // the whole run was killed for running too long
  int exit_code = 0;
  int signal = 0;                     // the signal that killed pytest (a crash that left no XML)
  std::vector<std::string> evidence;  // names of the files recorded for this run
  // How many tests the session that wrote `log` ran: above 1 the log is theirs together, and a
  // testcase's evidence is only its own section of it (junit::VerifyContext::log_shared).
  std::size_t session_tests = 0;
};

// What a playbook asks of the machine: the CPU probe and pytest. The executor's NativeTools
// (agent/executor) runs them for real and records the evidence in the layout of
// docs/evidence.md; its ReplayTools answers from recorded evidence and records what answered in
// the same layout. The playbooks themselves run no process.
class PlaybookTools {
 public:
  virtual ~PlaybookTools() = default;
  // Runs the probe for one entry: mode "structure" (one document), "dtype" (bfloat16 then
  // float32) or "inputs" (train then eval); ProbePhases(mode) lists them. An unknown mode is
  // InvalidArgument. The n-th call for a key and phase answers with seq n.
  virtual absl::StatusOr<std::vector<ProbeDoc>> Probe(const std::string& key,
                                                      const std::string& mode) = 0;
  // pytest --force-run --runxfail --junitxml over these keys (node ids of
  // tests/runner/test_models.py::<function>[<key>], the function the key's grammar names:
  // inventory::TestFunctionOfKey).
  virtual absl::StatusOr<PytestRun> Pytest(const std::vector<std::string>& keys,
                                           const std::string& label) = 0;
  // The longest the following Pytest calls may run, when shorter than the agent's own limit
  // (0: the agent's); a session cut short leaves its unfinished tests timed out. Tools that run
  // nothing ignore it.
  virtual void SetPytestTimeout(std::chrono::seconds) {}
  // The evidence recorded so far (name -> file), to send with the result.
  virtual std::map<std::string, std::filesystem::path> Evidence() const = 0;
};

// Why a pytest session is a failure of the attempt and not an outcome of its tests ("" when it
// is not): every asked test left no testcase and pytest says it could not run them (exit codes
// 2-5: interrupted, internal error, usage error, nothing collected), or its log shows the runner
// failing before any model (a conftest that does not import, a collection error, INTERNALERROR).
// A model that crashes or hangs leaves a signal or a timeout instead: its entry's outcome.
std::string RunnerFailure(const PytestRun& run);

// A file name for a key (keys contain '/'): '/' becomes "__" (docs/evidence.md).
std::string KeyFileName(const std::string& key);

// Adds the evidence the tools recorded to a result (logs keep their last 256 KiB), and names on
// each entry outcome the files that concern it: those named after its key, and every JUnit file.
void AttachEvidence(const PlaybookTools& tools, v1::ShardResult& result);

}  // namespace triage::playbooks
