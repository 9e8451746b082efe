#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/playbooks/playbook.h"
#include "agent/playbooks/probe.h"
#include "common/junit/verdict.h"
#include "common/registry/registry.h"
#include "triage/v1/types.pb.h"

namespace triage::playbooks {

// One entry of a running shard.
struct EntryWork {
  const v1::ShardEntry* entry = nullptr;
  v1::EntryOutcome* out = nullptr;
  bool verify = true;
  bool fixed = false;  // a fix of this shard applies to it
  std::string status;  // current YAML status (NAME)
  std::string reason;  // current YAML reason
  std::vector<std::string> markers;
  std::string inference_key;
  std::string inference_status;
  std::string inference_reason;
  std::optional<ProbeDoc> probe;    // structure (unpack) or bfloat16 (dtype)
  std::optional<ProbeDoc> probe32;  // float32 (dtype)
};

// The common layer every playbook runs on: reads the shard's loader, registry and current YAML,
// runs the playbook's phases, chains the playbooks its stops name (docs/playbooks.md,
// "Chaining"), verifies and finishes the result (diffs and evidence).
class ShardRun {
 public:
  ShardRun(PlaybookContext& ctx, const Playbook& playbook);
  ShardRun(const ShardRun&) = delete;
  ShardRun& operator=(const ShardRun&) = delete;

  absl::StatusOr<v1::ShardResult> Run();

  // --- for the playbooks' ProbeAndFix and Decide
  const v1::ShardSpec& spec() const { return spec_; }
  // The prepared workspace (the tt-xla checkout the shard runs in).
  const std::filesystem::path& workspace() const { return ctx_.workspace; }
  PlaybookTools& tools() { return *ctx_.tools; }
  // The entries the running playbook works on: every entry of the shard, or, while a chained
  // playbook runs, the entries whose stop named it.
  std::vector<EntryWork>& entries() { return *entries_; }
  v1::ShardResult& result() { return result_; }
  // The loader as the playbook has edited it so far; WriteLoader() writes it to the workspace.
  std::string& loader_text() { return loader_text_; }
  absl::Status WriteLoader();
  // training_utils.py's registry (none when the workspace has no readable one).
  registry::RegistryFile* registry() { return registry_ ? &*registry_ : nullptr; }
  absl::Status WriteRegistry();

  // Probes an entry in a mode (one document per phase of ProbePhases(mode)). nullopt: no complete
  // answer, and the entry stopped with verdict no_evidence and a review note saying why; an
  // error status is an infrastructure failure.
  absl::StatusOr<std::optional<std::vector<ProbeDoc>>> ProbeOrStop(EntryWork& w,
                                                                   const std::string& mode);

  bool Cancelled() const;
  void Progress(const std::string& step, const std::string& entry = "");
  static void Review(EntryWork& w, const std::string& note);
  // A loader fix reaches the entry's inference test too: its failing inference entry
  // (KNOWN_FAILURE_XFAIL or NOT_SUPPORTED_SKIP) is named for review as maybe stale, never edited.
  // why: what about it makes it stale ("with a bfloat16 reason"; "" for any failing one).
  static void FlagStaleInference(EntryWork& w, std::string_view fix, std::string_view why = "");
  // The entry stops here (no verification): its verdict and why it stopped. disposition is
  // NEEDS_REVIEW or NEEDS_PLAYBOOK (then needs_playbook names the playbook to run first; the
  // shard runs it next when this agent has it, docs/playbooks.md "Chaining").
  static void Stop(EntryWork& w, const std::string& verdict,
                   v1::EntryOutcome::Disposition disposition = v1::EntryOutcome::NEEDS_REVIEW,
                   const std::string& needs_playbook = "");

 private:
  absl::Status Init();
  // The shard's playbook on every entry, then the chain.
  absl::Status ProbeAndFix();
  // A chained playbook on the entries of work_ at these places.
  absl::Status RunChained(const Playbook& playbook, const std::vector<std::size_t>& at);
  const Playbook* ChainTarget(std::string_view name) const;
  absl::Status Verify();
  absl::StatusOr<v1::ShardResult> Finish();

  PlaybookContext& ctx_;
  const v1::ShardSpec& spec_;
  const Playbook& playbook_;
  v1::ShardResult result_;
  std::vector<EntryWork> work_;
  std::vector<EntryWork> chained_;  // a chained playbook's entries while it runs
  std::vector<EntryWork>* entries_ = &work_;
  std::filesystem::path loader_path_;
  std::string loader_original_;
  std::string loader_text_;
  std::filesystem::path registry_path_;
  std::optional<registry::RegistryFile> registry_;
};

// Whether the probe showed the entry's YAML reason to be false (EntryOutcome.old_reason_stale).
bool OldReasonStale(const EntryWork& w);

// The verification table's decision for one entry (docs/playbooks.md, "Decisions"): verdict,
// stage, reason, review flags and, when the entry changes, its YAML edit. Disposition DONE.
void DecideFromVerification(EntryWork& w, const Verification& verification);

// The informational inference entry a verification of spec runs (ShardRun::Verify): that of its
// first entry whose loader variant has one in the workspace's YAML; "" when none has.
std::string InferenceKeyOf(const std::filesystem::path& workspace, const v1::ShardSpec& spec);

// The YAML edit for a decision (markers merged with the entry's current ones).
v1::EntryEdit EditFor(const junit::Decision& d, const v1::ShardEntry& entry,
                      const std::vector<std::string>& current_markers);

}  // namespace triage::playbooks
