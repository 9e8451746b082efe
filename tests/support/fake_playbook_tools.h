#pragma once

// PlaybookTools answering from tables: probe documents per key in order, a testcase per key,
// and keys whose pytest run crashes (leaves no XML). For playbook tests without torch.

#include <chrono>
#include <deque>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agent/playbooks/tools.h"

namespace triage::playbooks {

// A probe document's error and input, the members tests do not care about left empty.
inline ProbeDoc::Error ProbeError(std::string type, std::string message) {
  ProbeDoc::Error e;
  e.type = std::move(type);
  e.message = std::move(message);
  return e;
}
inline ProbeDoc::Input ProbeInput(std::string name, std::string dtype, std::string kind) {
  ProbeDoc::Input in;
  in.name = std::move(name);
  in.dtype = std::move(dtype);
  in.kind = std::move(kind);
  return in;
}

class FakeTools : public PlaybookTools {
 public:
  std::map<std::string, std::deque<std::vector<ProbeDoc>>> probes;  // key -> answers in order
  std::map<std::string, junit::TestCase> cases;                     // key -> testcase
  std::vector<std::vector<std::string>> pytest_calls;
  std::vector<std::chrono::seconds> pytest_limits;  // SetPytestTimeout's limit at each call
  std::set<std::string> crash;                      // keys whose run leaves no XML
  // Non-empty: the runner itself cannot run: every session leaves no testcase, pytest exits 3
  // (an internal error) and this is its log.
  std::string runner_broken;

  void SetPytestTimeout(std::chrono::seconds limit) override { limit_ = limit; }

  absl::StatusOr<std::vector<ProbeDoc>> Probe(const std::string& key,
                                              const std::string& /*mode*/) override {
    auto& q = probes[key];
    if (q.empty()) return absl::NotFoundError("no probe for " + key);
    auto d = q.front();
    if (q.size() > 1) q.pop_front();
    return d;
  }
  absl::StatusOr<PytestRun> Pytest(const std::vector<std::string>& keys,
                                   const std::string&) override {
    pytest_calls.push_back(keys);
    pytest_limits.push_back(limit_);
    PytestRun run;
    if (!runner_broken.empty()) {
      for (const auto& k : keys) {
        junit::TestCase tc;
        tc.key = k;
        tc.outcome = junit::Outcome::kMissing;
        run.cases.push_back(tc);
      }
      run.exit_code = 3;
      run.log = runner_broken;
      return run;
    }
    bool crashed = false;
    for (const auto& k : keys) crashed |= crash.count(k) > 0;
    for (const auto& k : keys) {
      junit::TestCase tc;
      if (crashed) {
        tc.key = k;
        tc.outcome = junit::Outcome::kMissing;
        run.log = crash.count(k) && keys.size() == 1 ? "Fatal Python error: Aborted\n" : "";
      } else {
        tc = cases.count(k) ? cases[k] : junit::TestCase{};
        tc.key = k;
      }
      run.cases.push_back(tc);
    }
    run.xml = !crashed;
    return run;
  }
  std::map<std::string, std::filesystem::path> Evidence() const override { return {}; }

 private:
  std::chrono::seconds limit_{0};
};

}  // namespace triage::playbooks
