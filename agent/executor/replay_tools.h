#pragma once

#include "agent/playbooks/tools.h"

namespace triage::agent {

// Answers the playbook's device-side questions from recorded evidence (docs/evidence.md):
//   DIR/probes/*.json   probe documents (one per file or a JSON array), matched by key, phase
//                       and seq (the n-th probe of a key and phase in this run answers seq n)
//   DIR/junit/*.xml     a key's n-th verification is its n-th testcase in file-name order; with
//                       fewer testcases the last one answers
//   DIR/logs/<key>.log  what pytest printed, for crashes that left no XML
// Missing evidence is NotFound: the playbook flags the entry for review; it never guesses.
//
// What answered is recorded under record_dir in the same layout, as a native run records what
// it ran, so the replayed result carries its evidence and that evidence replays again:
//   probes/<key>.<phase>.<seq>.json  each document that answered a probe (with its seq)
//   junit/<name>.xml                 each JUnit file a testcase answered from, as it was, with
//   logs/<name>.log                  the log of the pytest run that wrote it, when recorded
//   logs/<key>.log                   the log that answered for a key without a testcase
// Files outside the recorded set are not answers: replaying the recorded set asks the same
// questions and gets the same answers.
class ReplayTools : public playbooks::PlaybookTools {
 public:
  // record_dir empty: nothing is recorded and Evidence() is empty.
  static absl::StatusOr<std::unique_ptr<ReplayTools>> Load(const std::filesystem::path& dir,
                                                           std::filesystem::path record_dir = {});
  absl::StatusOr<std::vector<playbooks::ProbeDoc>> Probe(const std::string& key,
                                                         const std::string& mode) override;
  absl::StatusOr<playbooks::PytestRun> Pytest(const std::vector<std::string>& keys,
                                              const std::string& label) override;
  std::map<std::string, std::filesystem::path> Evidence() const override { return evidence_; }

 private:
  struct Case {
    junit::TestCase tc;
    std::filesystem::path file;  // the JUnit file it came from
  };
  // Copies DIR/<name> to record_dir/<name> (once) and lists it as evidence of the run.
  void Record(const std::string& name, playbooks::PytestRun* run);
  void RecordText(const std::string& name, const std::string& text);

  std::filesystem::path dir_;
  std::filesystem::path record_dir_;
  std::vector<playbooks::ProbeDoc> probes_;
  std::map<std::string, std::vector<Case>> cases_;  // key -> testcases in file order
  std::map<std::string, int> probe_calls_;          // key + phase -> calls so far
  std::map<std::string, int> pytest_calls_;         // key -> calls so far
  std::map<std::string, std::filesystem::path> evidence_;
};

}  // namespace triage::agent
