#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/command/guards.h"
#include "common/inventory/editor.h"
#include "common/lift/lift.h"
#include "coordinator/model/model.h"

namespace triage::merge {

// The files of a sweep's pinned commits (the interface the agent's lift reads them through).
using PinnedFiles = lift::PinnedFiles;

struct MergeInput {
  std::string sweep_id;
  std::vector<std::string> archs;  // the sweep's target archs (single-device entries)
  std::vector<coord::ShardRecord> shards;
  std::vector<coord::ResultRecord> results;  // any order, duplicates and retries allowed
  PinnedFiles* files = nullptr;
  // Tracking issues (docs/nightly.md, section 4): a failure cluster's id or an entry's key ->
  // URL; a reason the merge writes for a matching entry gets " - <url>".
  std::map<std::string, std::string> issue_links;
};

// What happened to one entry.
struct EntryMerge {
  std::string key;
  std::string file;
  std::string playbook;
  std::string flavor;
  std::string loader;
  std::string cluster;  // the failure cluster of the reason it was selected with ("": none)
  int wave = 0;         // the latest wave that decided it (a carried entry's in its own sweep)
  // The sweep whose result decides the entry when an incremental sweep carried it ("" = this
  // sweep ran it).
  std::string carried_from;
  // The deciding outcome per target arch (absent: no verified outcome for that arch).
  std::map<std::string, v1::EntryOutcome> outcomes;
  std::map<std::string, std::string> deciding_shard;  // arch -> the shard of its outcome
  std::optional<v1::EntryOutcome> probe;              // the playbook's findings (first phase)
  enum class Placement { kUnchanged, kTopLevel, kPerArch, kConflict };
  Placement placement = Placement::kUnchanged;
  std::vector<inventory::EntryEdit> edits;  // what was applied to the YAML
  std::vector<std::string> review;
  std::string conflict;
  // The entry's text in the YAML before and after (for "the YAML lines that changed").
  std::string yaml_before;
  std::string yaml_after;
  // A nightly sweep's entry: the archs the runs recorded it on, and the tracking URL its new
  // reason got from the issue links ("" = none).
  std::vector<std::string> nightly_archs;
  std::string issue_link;
  bool new_entry = false;  // the merge added it to its file (add_config)
};

// A shared-scope change of a command sweep (docs/remediation.md, "Shared fixes beyond the
// loader"): a file outside the loader directory that a cluster's lead changed.
struct SharedFix {
  std::string file;         // "tt_forge_models/<path>" or "tt-xla/<path>"
  std::string shard;        // the lead shard whose result made it
  std::string fingerprint;  // what its command reported ("" = no summary)
  std::string cluster;      // the cluster it led ("" = none)
  // The entries it fixed: the lead's that pass with it, then the followers' verified with it
  // pre-applied and no command run (fixed_by "shard <lead>"), by key.
  std::vector<std::string> fixed;
  bool landed = false;  // in the patch (false: a conflict or its result did not land)
  // Its wave (docs/remediation.md, "The shared fix's wave"): the entries checked with it, by
  // key ("selected" ones of the sweep, "passing" ones of the sample), those of the passing ones
  // that failed with it ("key (verdict: reason)": the fix was held back), the candidates whose
  // loaders import none of its files. wave_shard "" = no wave ran (none was planned, or it has
  // no result).
  std::string wave_shard;
  std::vector<std::string> wave_selected, wave_passing, wave_broke;
  std::vector<std::string> wave_selected_pass;  // of wave_selected: those that passed with it
  int wave_not_affected = 0;
};

// A command result whose change holds workarounds (docs/remediation.md, "Guards"): held back
// for a reviewer, with what was found and the entries it would have changed.
struct WorkaroundsFound {
  std::string shard;
  std::vector<command::Workaround> found;
  std::vector<std::string> entries;  // keys
};

// Agent runs against entries of a command sweep (docs/remediation.md, "Fix once, verify many").
struct CommandRuns {
  int runs = 0;         // command runs of the merged results
  int entries = 0;      // entries the command shards held
  int without_run = 0;  // of them, fixed by an earlier change with no run (fixed_by)
};

struct MergeOutput {
  std::string ttxla_patch;  // git apply in the tt-xla checkout
  std::string forge_patch;  // git apply in third_party/tt_forge_models
  std::vector<std::string> conflicts;
  std::map<std::string, int> conflict_counts;  // yaml, registry, loader
  std::vector<v1::RegistryOp> registry;        // merged registry operations
  std::vector<EntryMerge> entries;             // in file order
  std::vector<std::string> changed_files;      // "tt-xla/<path>", "tt_forge_models/<path>"
  std::vector<SharedFix> shared_fixes;         // a command sweep's, in shard order
  CommandRuns command_runs;                    // a command sweep's
  std::vector<WorkaroundsFound> workarounds;   // a command sweep's results held for review
  // A command result's provenance.json (docs/remediation.md, "Provenance"), by shard.
  std::map<std::string, std::string> provenance;
};

// The result the merge takes for each shard, by shard id: its latest attempt's (the highest
// fencing token, then the highest lease id). The report's figures take the same one.
std::map<std::string, const coord::ResultRecord*> LatestResults(
    const std::vector<coord::ResultRecord>& results);

// Merges the accepted results of a sweep into one conflict-free patch per repository. A pure
// function of the results: their order, duplicates and retried attempts do not change a byte.
//  - YAML: per-entry field edits, the latest wave per entry and arch; equal outcomes on every
//    target arch -> top-level fields, different -> arch_overrides per arch.
//  - Registry: add/remove operations at their sorted position; identical proposals collapse;
//    two attributes for one class are a conflict (no line).
//  - Loader files: edits chained wave by wave (a later edit was made on top of the earlier).
//  - A conflict is listed and the thing is left as it was; never last-writer-wins.
// Results are structured (entry edits, registry ops, file edits): a command executor's raw diffs
// were lifted on its agent (common/lift/lift.h) and the coordinator refuses results that still
// carry them (docs/farm.md, "Executors").
absl::StatusOr<MergeOutput> Merge(const MergeInput& input);

}  // namespace triage::merge
