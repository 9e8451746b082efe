#pragma once

#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "agent/playbooks/catalog.h"
#include "agent/playbooks/tools.h"
#include "common/junit/junit.h"
#include "triage/v1/types.pb.h"

namespace triage::playbooks {

class Playbook;

// Where a playbook runs: the shard, the prepared workspace (sweep commits + pre-applied edits)
// and the tools that answer device-side questions.
struct PlaybookContext {
  const v1::ShardSpec* spec = nullptr;
  std::filesystem::path workspace;
  PlaybookTools* tools = nullptr;
  std::function<void(const std::string& step, const std::string& entry)> progress;
  std::function<bool()> cancelled;
  // The runner of a playbook an entry's stop names (NEEDS_PLAYBOOK), which the shard runs next
  // on that entry (docs/playbooks.md, "Chaining"); null: this agent does not run it, the stop
  // stays. Unset: every registered playbook with a runner (FindPlaybook).
  std::function<const Playbook*(std::string_view name)> chain;
};

// What a phase of a shard runs (docs/playbooks.md, "Phases").
struct PhasePlan {
  bool probe_and_fix = false;  // probe, decide and fix every entry
  bool verify = false;         // pytest, then the verification decision per entry
};

class ShardRun;
struct EntryWork;

// What the verification run answered for one entry.
struct Verification {
  const junit::TestCase* testcase = nullptr;  // null: the run left none (e.g. a crash)
  std::string log;
  int signal = 0;
  bool log_shared = false;  // the log is of a session that ran other tests too
};

// A playbook: the decision code for the entries one classification rule takes
// (docs/playbooks.md, "Adding a playbook"). It runs no process: device-side questions go to
// PlaybookTools. Each lives in its own folder, agent/playbooks/<name>/, and is registered by one
// line of agent/playbooks/registrations.inc.
class Playbook {
 public:
  virtual ~Playbook() = default;

  // Name, version, planning estimate, rules and probe modes (pure data, shared with the
  // coordinator).
  virtual const CatalogEntry& Catalog() const = 0;
  std::string_view Name() const { return Catalog().name; }
  std::string_view Version() const { return Catalog().version; }
  std::span<const std::string_view> ProbeModes() const { return Catalog().probe_modes; }
  // The gate: whether an entry of this flavor is one this playbook takes, by the flavors of its
  // classification rule (docs/classify.md). Entries another playbook's stop chains to it keep
  // that playbook's flavor and are not gated (docs/playbooks.md, "Chaining").
  bool Takes(std::string_view flavor) const;

  // The plan of phases: FULL probes, fixes and verifies; PROBE probes and fixes (no device;
  // entries to verify say "ready"); VERIFY verifies with the earlier phase's edits applied.
  virtual PhasePlan Plan(v1::ShardPhase phase) const;

  // Probes, decides and fixes every entry of the shard (when the plan says so). An entry either
  // stops with its verdict, disposition and review flags (ShardRun::Stop) or goes on to
  // verification. An error status is an infrastructure failure.
  virtual absl::Status ProbeAndFix(ShardRun& run) const = 0;

  // The decision for a verified entry: its verdict, stage, reason, review flags and YAML edit.
  // By default the verification table (docs/playbooks.md, "Decisions").
  virtual void Decide(ShardRun& run, EntryWork& work, const Verification& verification) const;

  // Runs the shard in its phase and returns its result (per-entry outcomes, registry operations,
  // loader edits as diffs, evidence). An error status is an infrastructure failure (the
  // workspace is broken): the coordinator retries elsewhere.
  virtual absl::StatusOr<v1::ShardResult> Run(PlaybookContext& ctx) const;
};

}  // namespace triage::playbooks
