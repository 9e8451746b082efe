#pragma once

#include "agent/playbooks/tools.h"

namespace triage::playbooks {

// Answers the playbook's device-side questions from recorded evidence (REPLAY.md):
//   DIR/probes/*.json   probe documents (one per file or a JSON array), matched by key, phase
//                       and seq (the n-th probe of a key and phase in this run answers seq n)
//   DIR/junit/*.xml     a key's n-th verification is its n-th testcase in file-name order; with
//                       fewer testcases the last one answers
//   DIR/logs/<key>.log  what pytest printed, for crashes that left no XML
// Missing evidence is NotFound: the playbook flags the entry for review; it never guesses.
class ReplayTools : public PlaybookTools {
 public:
  static absl::StatusOr<std::unique_ptr<ReplayTools>> Load(const std::filesystem::path& dir);
  absl::StatusOr<std::vector<ProbeDoc>> Probe(const std::string& key,
                                              const std::string& mode) override;
  absl::StatusOr<PytestRun> Pytest(const std::vector<std::string>& keys,
                                   const std::string& label) override;
  std::map<std::string, std::filesystem::path> Evidence() const override { return {}; }

 private:
  std::filesystem::path dir_;
  std::vector<ProbeDoc> probes_;
  std::map<std::string, std::vector<junit::TestCase>> cases_;  // key -> testcases in file order
  std::map<std::string, int> probe_calls_;                     // key + phase -> calls so far
  std::map<std::string, int> pytest_calls_;                    // key -> calls so far
};

}  // namespace triage::playbooks
