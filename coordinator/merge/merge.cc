#include "coordinator/merge/merge.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <set>

#include "common/command/shared_scope.h"
#include "common/diff/apply_diff.h"
#include "common/diff/unified_diff.h"
#include "common/inventory/document.h"
#include "common/inventory/key.h"
#include "common/inventory/key_grammar.h"
#include "common/nightly/placement.h"
#include "common/registry/registry.h"
#include "common/util/strings.h"
#include "coordinator/merge/clusters.h"
#include "coordinator/merge/command_work.h"
#include "coordinator/merge/guards_merge.h"
#include "coordinator/planning/fan_out.h"
#include "coordinator/planning/waves.h"

namespace triage::merge {
namespace {

// The archs tt-xla's CI runs single-device training tests on (docs/report.md, "Partly verified
// top-level changes").
constexpr const char* kSingleDeviceTrainingCiArchs[] = {"n150", "p150"};

using inventory::kForgeModelsPrefix;

int PhaseOrder(v1::ShardPhase p) {
  switch (p) {
    case v1::PHASE_PROBE:
      return 0;
    case v1::PHASE_FULL:
      return 1;
    case v1::PHASE_VERIFY:
      return 2;
    default:
      return 3;
  }
}

// A canonical text of an edit's intent (set fields sorted, deletes sorted).
std::string Canonical(const v1::EntryEdit& e) {
  std::vector<std::string> parts;
  for (const auto& f : e.set()) {
    parts.push_back(util::StrCat("set ", f.name(), "=", lift::FromYaml(f.value()).DebugString()));
  }
  for (const auto& d : e.delete_()) parts.push_back(util::StrCat("del ", d));
  std::sort(parts.begin(), parts.end());
  return util::StrJoin(parts, "; ");
}

inventory::EntryEdit ToEditorEdit(const v1::EntryEdit& e, const std::string& arch) {
  inventory::EntryEdit out;
  out.key = e.key();
  if (!arch.empty()) out.arch = arch;
  for (const auto& f : e.set()) out.set.emplace_back(f.name(), lift::FromYaml(f.value()));
  for (const auto& d : e.delete_()) out.del.push_back(d);
  return out;
}

// An entry's lines as report.md shows them: its span, and the comment lines right after its last
// field that are indented deeper than its key (a comment about a field the edit removed, a
// commented-out field). Without them a comment that stays in the file would read as removed
// when the field below it goes.
std::string EntryText(const inventory::Document& doc, const std::string& key) {
  const inventory::Entry* e = doc.Find(key);
  if (e == nullptr) return "";
  std::string out = doc.EntryText(*e);
  for (int i = e->last_line + 1; i < doc.line_count(); ++i) {
    const std::string_view line = doc.Line(i);
    const std::size_t indent = line.find_first_not_of(' ');
    if (indent == std::string_view::npos || line[indent] != '#' ||
        static_cast<int>(indent) <= e->pos.col) {
      break;
    }
    util::StrAppend(&out, line, "\n");
  }
  return out;
}

// One shard's accepted result (its latest attempt).
struct ShardResult {
  const coord::ShardRecord* shard;
  const coord::ResultRecord* record;
};

// What the results say of one entry, gathered over the shards in their canonical order.
struct EntryAcc {
  EntryMerge m;
  std::map<std::string, std::pair<int, std::string>> decided_at;  // arch -> (wave, canon)
  int last_wave = std::numeric_limits<int>::min();                // the latest shard wave noted
  bool stopped = false;
  std::set<std::string> conflicting_archs;
};

using EntryId = std::pair<std::string, std::string>;  // (file, key)

// The state the merge's steps share.
struct MergeState {
  explicit MergeState(const MergeInput& in)
      : input(in),
        grammar(in.files != nullptr ? inventory::GrammarOrDefault(
                                          in.files->ReadTtXla(std::string(inventory::kRunnerPath)))
                                    : inventory::DefaultKeyGrammar()) {}
  const MergeInput& input;
  // The pinned checkout's key grammar (its runner's): the YAML files are read with it.
  const inventory::KeyGrammar grammar;
  std::vector<ShardResult> results;  // one per shard, in canonical order
  std::map<EntryId, EntryAcc> entries;
  // A nightly sweep's tests: the archs the runs recorded each on (from its shards' candidates).
  std::map<EntryId, std::vector<std::string>> nightly_archs;
  // The tt_forge_models files the merge changes: path -> text at the pinned commit / after.
  std::map<std::string, std::string> forge_before;
  std::map<std::string, std::string> forge_after;
  // Command results whose file edits and registry lines do not land (DropRejectedCommandEdits).
  std::set<const coord::ResultRecord*> rejected;
  MergeOutput out;
};

// Lists a conflict and counts it by kind (yaml, registry, loader).
void AddConflict(MergeOutput& out, const std::string& kind, std::string message) {
  out.conflicts.push_back(std::move(message));
  out.conflict_counts[kind]++;
}

// One result per shard (the latest attempt: highest token, then lease id), in a canonical order:
// wave, phase, arch, shard. Results of shards the sweep does not have, or that were planned
// ahead and discarded, are dropped.
std::vector<ShardResult> LatestResultsInOrder(const MergeInput& input) {
  std::map<std::string, const coord::ShardRecord*> shards;
  for (const auto& s : input.shards) shards[s.id] = &s;
  std::vector<ShardResult> results;
  for (const auto& [id, r] : LatestResults(input.results)) {
    // A shard still flagged as planned ahead was discarded when its wave was planned.
    if (shards.count(id) && !shards.at(id)->spec.ahead()) results.push_back({shards.at(id), r});
  }
  std::sort(results.begin(), results.end(), [](const ShardResult& a, const ShardResult& b) {
    auto key = [](const ShardResult& i) {
      return std::make_tuple(i.shard->spec.wave(), PhaseOrder(i.shard->spec.phase()),
                             i.shard->spec.arch(), i.shard->id);
    };
    return key(a) < key(b);
  });
  return results;
}

// Folds one shard's outcome for an entry into what is known of it: the playbook's findings, the
// review flags, and the deciding outcome for the arch (a later wave replaces an earlier one; two
// different edits in one wave make the arch a conflict).
void NoteOutcome(EntryAcc& a, const v1::ShardSpec& spec, const v1::EntryOutcome& o) {
  EntryMerge& m = a.m;
  m.key = o.key();
  m.file = o.file();
  m.playbook = spec.playbook();
  m.loader = spec.loader();
  if (m.flavor.empty()) m.flavor = o.flavor();
  if (m.cluster.empty()) {
    for (const auto& se : spec.entries()) {
      if (se.key() == o.key() && se.file() == o.file()) m.cluster = se.cluster();
    }
  }
  if (spec.has_carried_from()) {  // carried shards come first (waves at or below 0)
    m.carried_from = spec.carried_from().sweep_id();
    m.wave = std::max(m.wave, spec.carried_from().wave());
  } else {
    if (!m.carried_from.empty()) m.wave = 0;
    m.carried_from.clear();
    m.wave = std::max(m.wave, spec.wave());
  }
  const bool latest = spec.wave() >= a.last_wave;
  a.last_wave = std::max(a.last_wave, spec.wave());
  if (spec.phase() != v1::PHASE_VERIFY && (!m.probe || latest)) m.probe = o;
  for (const auto& r : o.review()) {
    if (std::find(m.review.begin(), m.review.end(), r) == m.review.end()) m.review.push_back(r);
  }
  if (!coord::NeedsVerification(o)) {
    a.stopped = true;
    return;
  }
  if (coord::AwaitsVerification(o)) return;  // probe phase: verified later
  a.stopped = false;
  const std::string arch = o.arch().empty() ? spec.arch() : o.arch();
  const std::string canon = o.changed() ? Canonical(o.edit()) : "unchanged";
  auto prev = a.decided_at.find(arch);
  if (prev != a.decided_at.end() && prev->second.first == spec.wave() &&
      prev->second.second != canon) {
    a.conflicting_archs.insert(arch);
  }
  a.decided_at[arch] = {spec.wave(), canon};
  m.outcomes[arch] = o;
  m.deciding_shard[arch] = spec.shard_id();
}

// Every entry the results name, with its deciding outcome per target arch.
std::map<EntryId, EntryAcc> DecideEntries(const std::vector<ShardResult>& results) {
  std::map<EntryId, EntryAcc> entries;
  // A nightly sweep's tests: the archs the runs recorded each on (from its shards' candidates).
  std::map<EntryId, std::vector<std::string>> nightly_archs;
  for (const auto& r : results) {
    for (const auto& o : r.record->result.entries()) {
      NoteOutcome(entries[{o.file(), o.key()}], r.shard->spec, o);
    }
  }
  return entries;
}

// The archs an entry's outcome is decided on: a tensor-parallel entry runs on n300-llmbox, the
// others on the sweep's target archs.
std::vector<std::string> TargetArchs(const std::string& key,
                                     const std::vector<std::string>& archs) {
  return inventory::IsTensorParallelKey(key)
             ? std::vector<std::string>{std::string(inventory::kTensorParallelArch)}
             : archs;
}

// A top-level field also reaches the CI archs the sweep did not verify: the review flag that says
// which, and the --arch list that would verify them too; "" when the sweep covered them.
std::string PartlyVerifiedNote(const std::string& key, const std::vector<std::string>& targets) {
  if (inventory::IsTensorParallelKey(key) || !key.ends_with("-single_device-training")) return "";
  std::vector<std::string> unverified;
  for (const char* ci : kSingleDeviceTrainingCiArchs) {
    if (std::find(targets.begin(), targets.end(), ci) == targets.end()) unverified.push_back(ci);
  }
  if (unverified.empty()) return "";
  return util::StrCat("top-level change verified on ", util::StrJoin(targets, ", "),
                      " only; CI also runs single-device training on ",
                      util::StrJoin(unverified, ", "), " (sweep with --arch ",
                      util::StrJoin(targets, ","), ",", util::StrJoin(unverified, ","),
                      " to verify there too)");
}

// Different edits per arch: each goes under arch_overrides.<arch>; when every target arch
// decided (differently), the decided fields live only in the overrides and leave the top level.
void PlacePerArch(EntryMerge& m, const std::map<std::string, const v1::EntryOutcome*>& changed,
                  std::size_t target_count) {
  m.placement = EntryMerge::Placement::kPerArch;
  std::set<std::string> decided_fields;
  for (const auto& [t, o] : changed) {
    m.edits.push_back(ToEditorEdit(o->edit(), t));
    for (const auto& f : o->edit().set()) decided_fields.insert(f.name());
  }
  if (changed.size() == target_count) {
    inventory::EntryEdit top;
    top.key = m.key;
    top.del.assign(decided_fields.begin(), decided_fields.end());
    m.edits.push_back(top);
  }
}

// Decides where an entry's YAML edits go: nowhere (unchanged or a conflict), the top-level fields
// (the same edit on every target arch) or arch_overrides (PlacePerArch). Fills the entry's edits.
void PlaceEntry(EntryAcc& a, const std::vector<std::string>& archs, MergeOutput& out) {
  EntryMerge& m = a.m;
  if (!a.conflicting_archs.empty()) {
    m.placement = EntryMerge::Placement::kConflict;
    m.conflict = util::StrCat("results of one wave want different edits on ",
                              util::StrJoin(a.conflicting_archs, ", "));
    AddConflict(out, "yaml", util::StrCat(m.file, ": ", m.key, ": ", m.conflict));
    return;
  }
  const std::vector<std::string> targets = TargetArchs(m.key, archs);
  std::map<std::string, const v1::EntryOutcome*> changed;
  for (const auto& t : targets) {
    auto o = m.outcomes.find(t);
    if (o != m.outcomes.end() && o->second.changed()) changed[t] = &o->second;
  }
  if (changed.empty()) return;
  std::set<std::string> kinds;
  for (const auto& [t, o] : changed) kinds.insert(Canonical(o->edit()));
  if (changed.size() != targets.size() || kinds.size() != 1) {
    PlacePerArch(m, changed, targets.size());
    return;
  }
  m.placement = EntryMerge::Placement::kTopLevel;
  m.edits.push_back(ToEditorEdit(changed.begin()->second->edit(), ""));
  if (std::string note = PartlyVerifiedNote(m.key, targets); !note.empty()) {
    m.review.push_back(std::move(note));
  }
}

// Applies a YAML file's edits. The whole batch first: one pass over the file. Only when the
// editor refuses it are the entries tried one by one (each try re-parses the whole file): an
// entry whose edits the editor refuses (all of them tried together) is a conflict and kept as it
// was; the other entries still change.
absl::StatusOr<std::string> ApplyEntryEdits(MergeState& st, const std::string& file,
                                            const inventory::Document& doc,
                                            const std::vector<inventory::EntryEdit>& edits,
                                            inventory::EditDetail* detail) {
  auto edited = inventory::ApplyEdits(doc, edits, detail);
  if (edited.ok()) return edited;
  std::map<std::string, std::vector<inventory::EntryEdit>> by_entry;
  for (const auto& e : edits) by_entry[e.key].push_back(e);
  std::set<std::string> refused;
  for (const auto& [key, group] : by_entry) {
    auto single = inventory::ApplyEdits(doc, group);
    if (single.ok()) continue;
    refused.insert(key);
    AddConflict(
        st.out, "yaml",
        util::StrCat(file, ": ", key, ": edit refused: ", util::MessageOf(single.status())));
    auto it = st.entries.find({file, key});
    if (it != st.entries.end()) {
      it->second.m.placement = EntryMerge::Placement::kConflict;
      it->second.m.conflict = util::MessageOf(single.status());
    }
  }
  std::vector<inventory::EntryEdit> accepted;
  for (const auto& e : edits) {
    if (!refused.count(e.key)) accepted.push_back(e);
  }
  return inventory::ApplyEdits(doc, accepted, detail);
}

// A reason with its tracking issue: the entry's key, else its failure cluster's id, in the
// issue links (" - <url>" appended once).
std::string WithIssueLink(const std::map<std::string, std::string>& links, EntryMerge& m,
                          const std::string& reason) {
  auto it = links.find(m.key);
  if (it == links.end()) it = links.find(ClusterIdOfReason(reason));
  if (it == links.end() || reason.find(it->second) != std::string::npos) return reason;
  m.issue_link = it->second;
  return util::StrCat(reason, " - ", it->second);
}

// A nightly sweep's entry (docs/nightly.md, section 4): its archs' confirmed targets placed
// together against the entry as the file holds it, or a new entry when every arch the runs
// recorded the test on confirmed one.
void PlaceNightly(MergeState& st, EntryAcc& a, const inventory::Document& doc,
                  std::vector<inventory::EntryEdit>& edits) {
  EntryMerge& m = a.m;
  auto archs = st.nightly_archs.find({m.file, m.key});
  if (archs != st.nightly_archs.end()) m.nightly_archs = archs->second;
  std::vector<nightly::ArchTarget> targets;
  for (auto& [arch, o] : m.outcomes) {
    if (!o.changed()) continue;
    nightly::ArchTarget t;
    t.arch = arch;
    t.edit = o.edit();
    for (auto& f : *t.edit.mutable_set()) {
      if (f.name() == "reason" && f.value().has_string_value()) {
        f.mutable_value()->set_string_value(
            WithIssueLink(st.input.issue_links, m, f.value().string_value()));
      }
    }
    t.pcc_comment = o.nightly().pcc_comment();
    targets.push_back(std::move(t));
  }
  if (targets.empty()) return;
  const inventory::Entry* entry = doc.Find(m.key);
  if (entry == nullptr) {
    std::vector<std::string> missing;
    for (const auto& arch : m.nightly_archs) {
      if (!m.outcomes.count(arch) || !m.outcomes.at(arch).changed()) missing.push_back(arch);
    }
    if (!missing.empty()) {
      m.review.push_back(
          util::StrCat("new entry not added: not confirmed on ", util::StrJoin(missing, ", ")));
      return;
    }
    auto placed = nightly::PlaceNew(m.key, m.nightly_archs, targets);
    if (!placed) {
      m.review.push_back("new entry not added: its archs leave no top level to write");
      return;
    }
    m.new_entry = true;
    m.placement =
        placed->size() > 1 ? EntryMerge::Placement::kPerArch : EntryMerge::Placement::kTopLevel;
    m.edits = std::move(*placed);
  } else {
    nightly::Placement p = nightly::Place(*entry, m.nightly_archs, targets);
    m.placement = p.per_arch ? EntryMerge::Placement::kPerArch : EntryMerge::Placement::kTopLevel;
    m.edits = std::move(p.edits);
    for (auto& r : p.review) m.review.push_back(std::move(r));
  }
  for (const auto& e : m.edits) edits.push_back(e);
}

// Edits one YAML file at the pinned commit: its part of tt-xla.patch and, for each entry with
// edits, the entry's text before and after.
absl::Status EditYamlFile(MergeState& st, const std::string& file,
                          std::vector<inventory::EntryEdit> edits,
                          const std::vector<EntryAcc*>& nightly) {
  auto base = st.input.files->ReadTtXla(file);
  if (!base.ok()) {
    return absl::FailedPreconditionError(util::StrCat(
        "cannot read ", file, " at the pinned commit: ", util::MessageOf(base.status())));
  }
  inventory::Document doc = inventory::Document::Parse(file, *base, {.grammar = &st.grammar});
  for (EntryAcc* a : nightly) PlaceNightly(st, *a, doc, edits);
  if (edits.empty()) return absl::OkStatus();
  inventory::EditDetail detail;
  auto edited = ApplyEntryEdits(st, file, doc, edits, &detail);
  if (!edited.ok()) return edited.status();
  if (*edited == *base) return absl::OkStatus();
  // The editor re-parsed its output and knows which line ranges it replaced: reuse both.
  inventory::Document after =
      detail.after ? std::move(*detail.after)
                   : inventory::Document::Parse(file, *edited, {.grammar = &st.grammar});
  for (auto& [id, a] : st.entries) {
    if (id.first != file || a.m.edits.empty()) continue;
    a.m.yaml_before = EntryText(doc, a.m.key);
    a.m.yaml_after = EntryText(after, a.m.key);
  }
  std::vector<diff::Region> regions;
  regions.reserve(detail.blocks.size());
  for (const auto& b : detail.blocks) {
    regions.push_back({b.old_first, b.old_end, b.new_first, b.new_end});
  }
  // One hunk per entry, anchored in the entry's own lines, with index lines (docs/report.md,
  // "The patches"): an upstream edit of one entry breaks only its hunk.
  st.out.ttxla_patch += diff::UnifiedDiffOfRegions(file, *base, *edited, regions,
                                                   {.index_line = true, .hunk_per_region = true});
  st.out.changed_files.push_back(util::StrCat("tt-xla/", file));
  return absl::OkStatus();
}

// The YAML: places every entry's edits, then edits the files (in path order). A nightly
// sweep's entries are placed with their file in hand (PlaceNightly).
absl::Status MergeYaml(MergeState& st) {
  std::map<std::string, std::vector<inventory::EntryEdit>> per_file;
  std::map<std::string, std::vector<EntryAcc*>> nightly;
  for (auto& [id, a] : st.entries) {
    if (st.nightly_archs.count(id)) {
      nightly[a.m.file].push_back(&a);
      per_file[a.m.file];
      continue;
    }
    PlaceEntry(a, st.input.archs, st.out);
    for (const auto& e : a.m.edits) per_file[a.m.file].push_back(e);
  }
  for (auto& [file, edits] : per_file) {
    if (absl::Status s = EditYamlFile(st, file, std::move(edits), nightly[file]); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// The registry lines of training_utils.py: the operations the results propose, merged
// (coord::MergeRegistry), each written at its sorted position; one the file refuses is a conflict.
absl::Status MergeRegistryLines(MergeState& st) {
  std::vector<coord::ResultRecord> records;
  for (const auto& r : st.results) {
    records.push_back(*r.record);
    if (st.rejected.count(r.record)) records.back().result.clear_registry_ops();
  }
  coord::WavePlan registry = coord::MergeRegistry(records);
  for (const auto& c : registry.conflicts) AddConflict(st.out, "registry", c);
  if (registry.merged.empty()) return absl::OkStatus();
  const std::string path(registry::kTrainingUtilsPath.substr(kForgeModelsPrefix.size()));
  auto base = st.input.files->ReadForge(path);
  if (!base.ok()) return base.status();
  auto reg = registry::RegistryFile::Parse(path, *base);
  if (!reg.ok()) return reg.status();
  for (const auto& op : registry.merged) {
    absl::Status s =
        op.kind() == v1::RegistryOp::REMOVE ? reg->Remove(op.cls()) : reg->Add(op.cls(), op.attr());
    if (!s.ok()) {
      AddConflict(st.out, "registry", util::StrCat("registry: ", util::MessageOf(s)));
      continue;
    }
    st.out.registry.push_back(op);
  }
  if (reg->Text() != *base) {
    st.forge_before[path] = *base;
    st.forge_after[path] = reg->Text();
  }
  return absl::OkStatus();
}

// One loader file as its edits are chained wave by wave.
struct LoaderState {
  std::string base;
  std::string text;
  std::string wave_start;  // the text before the current wave's edits
  bool started = false;
  int wave = 0;
  std::string wave_result;  // what this wave made of it (to spot two different edits)
  bool conflict = false;
};

// Chains one edit of a wave onto a loader file. Edits of one wave were made independently, on
// the state the earlier waves left (an edit lifted from a command's diff: on the pinned file).
// One that does not apply there, or a second one of the wave with a different result, is a
// conflict, and the file is left as it was.
//
// A shard that started from another's edit of the file (a cluster's follower, with its lead's
// shared fix pre-applied: `started_from`, the file as pre-applied) builds on it: its edit
// replaces the file's state when that state is still the one it started from.
void ChainLoaderEdit(LoaderState& s, const std::string& name, const diff::FileDiff& fd,
                     bool against_pinned, int wave, const std::optional<std::string>& started_from,
                     const std::string& kind, MergeOutput& out) {
  if (s.conflict) return;
  if (!s.started || s.wave != wave) s.wave_start = s.text;
  auto applied = diff::ApplyFileDiff(against_pinned ? s.base : s.wave_start, fd);
  if (!applied.ok()) {
    // Not based on this file's state: two shards edited it independently.
    s.conflict = true;
    AddConflict(out, kind, util::StrCat(kind, ": ", name, ": ", util::MessageOf(applied.status())));
    return;
  }
  const bool on_top = started_from && s.started && s.text == *started_from;
  if (s.started && s.wave == wave && s.wave_result != *applied && !on_top) {
    s.conflict = true;
    AddConflict(
        out, kind,
        util::StrCat(kind, ": ", name, ": two results of wave ", wave, " edit it differently"));
    return;
  }
  s.started = true;
  s.wave = wave;
  s.wave_result = *applied;
  s.text = *applied;
}

// The file as `spec` started from it: the pinned text with the shard's pre-applied edit of it
// (a cluster follower's lead's shared fix); none when the shard pre-applied no edit of it.
std::optional<std::string> StartedFrom(const v1::ShardSpec& spec, const std::string& repo,
                                       const std::string& path, const std::string& base) {
  for (const auto& pre : spec.pre_apply()) {
    if (pre.repo() != repo) continue;
    auto split = diff::SplitDiff(pre.diff());
    if (!split.ok()) continue;
    for (const auto& fd : *split) {
      if (fd.path() != path) continue;
      auto applied = diff::ApplyFileDiff(base, fd);
      if (applied.ok()) return *applied;
    }
  }
  return std::nullopt;
}

// The loader files and the shared-scope files (docs/remediation.md, "Shared fixes beyond the
// loader"): every file edit of the results, chained wave by wave; tt_forge_models files go to
// tt-forge-models.patch, tt-xla files (shared scope only) to tt-xla.patch.
void MergeFileEdits(MergeState& st) {
  std::map<std::pair<std::string, std::string>, LoaderState> files;  // (repo, path)
  for (const auto& r : st.results) {
    if (st.rejected.count(r.record)) continue;
    for (const auto& fe : r.record->result.file_edits()) {
      if (fe.repo() != "tt_forge_models" && fe.repo() != "tt-xla") continue;
      const bool forge = fe.repo() == "tt_forge_models";
      auto split = diff::SplitDiff(fe.diff());
      if (!split.ok()) continue;
      for (const auto& fd : *split) {
        const std::string path = fe.path().empty() || split->size() > 1 ? fd.path() : fe.path();
        auto it = files.find({fe.repo(), path});
        if (it == files.end()) {
          auto base = forge ? st.input.files->ReadForge(path) : st.input.files->ReadTtXla(path);
          LoaderState s;
          s.base = base.ok() ? *base : "";
          s.text = s.base;
          it = files.emplace(std::make_pair(fe.repo(), path), s).first;
        }
        const bool shared = command::OutsideLoader(r.shard->spec.loader(), fe.repo(), path);
        ChainLoaderEdit(it->second, util::StrCat(fe.repo(), "/", path), fd, fe.against_pinned(),
                        r.shard->spec.wave(),
                        StartedFrom(r.shard->spec, fe.repo(), path, it->second.base),
                        shared ? "shared" : "loader", st.out);
      }
    }
  }
  for (const auto& [id, s] : files) {
    if (s.conflict || s.text == s.base) continue;
    if (id.first == "tt_forge_models") {
      st.forge_before[id.second] = s.base;
      st.forge_after[id.second] = s.text;
      continue;
    }
    st.out.ttxla_patch += diff::UnifiedDiff(id.second, s.base, s.text, {.index_line = true});
    st.out.changed_files.push_back(util::StrCat("tt-xla/", id.second));
  }
}

// Rejected means rejected (docs/remediation.md, "What lands of a command's work"): a command
// result in which the farm overruled an entry's decision lands its loader edits and registry
// lines only with an entry change the farm accepted (verified, or left standing where the run gave
// no evidence); without one it lands none of them, and its entries say so. One accepted entry
// keeps the result's edits whole: the farm verified it with all of them. A result the farm did
// not overrule (verify off, or every decision verified) keeps its edits.
void DropRejectedCommandEdits(MergeState& st) {
  for (const ShardResult& r : st.results) {
    if (r.shard->spec.executor() != "command") continue;
    const v1::ShardResult& res = r.record->result;
    std::vector<std::string> files;
    for (const auto& fe : res.file_edits()) {
      files.push_back(fe.repo() == "tt_forge_models" ? fe.path() : fe.repo() + "/" + fe.path());
    }
    if (!res.registry_ops().empty()) files.emplace_back("the registry lines of training_utils.py");
    if (files.empty()) continue;
    if (coord::CommandEditsLand(res)) continue;
    st.rejected.insert(r.record);
    const std::string note = util::StrCat(
        "not landed: the command's edits of ", util::StrJoin(files, ", "), " on ",
        r.shard->spec.arch().empty() ? "cpu" : r.shard->spec.arch(), " (shard ", r.shard->id,
        "): the farm overruled the command's decision and accepted none of its entry changes");
    for (const auto& o : res.entries()) {
      auto it = st.entries.find({o.file(), o.key()});
      if (it != st.entries.end()) it->second.m.review.push_back(note);
    }
  }
}

}  // namespace

namespace {

// An entry's required_pcc at the pinned commit, read once per test-config file.
PccBefore PccBeforeOf(MergeState& st) {
  auto docs = std::make_shared<std::map<std::string, std::optional<inventory::Document>>>();
  return [&st, docs](const std::string& file, const std::string& key,
                     const std::string& arch) -> std::optional<double> {
    auto it = docs->find(file);
    if (it == docs->end()) {
      std::optional<inventory::Document> doc;
      if (st.input.files != nullptr) {
        if (auto text = st.input.files->ReadTtXla(file); text.ok()) {
          doc = inventory::Document::Parse(file, *text, {.grammar = &st.grammar});
        }
      }
      it = docs->emplace(file, std::move(doc)).first;
    }
    if (!it->second) return std::nullopt;
    const inventory::Entry* entry = it->second->Find(key);
    if (entry == nullptr) return std::nullopt;
    const inventory::Value* v =
        arch.empty() ? entry->Field("required_pcc") : entry->FieldForArch("required_pcc", arch);
    if (v == nullptr || !v->is_number()) return std::nullopt;
    return v->kind == inventory::Value::Kind::kInt ? static_cast<double>(v->integer) : v->number;
  };
}

}  // namespace

std::map<std::string, const coord::ResultRecord*> LatestResults(
    const std::vector<coord::ResultRecord>& results) {
  std::map<std::string, const coord::ResultRecord*> latest;
  for (const auto& r : results) {
    auto& cur = latest[r.shard_id];
    if (cur == nullptr || r.token > cur->token ||
        (r.token == cur->token && r.lease_id > cur->lease_id)) {
      cur = &r;
    }
  }
  return latest;
}

absl::StatusOr<MergeOutput> Merge(const MergeInput& input) {
  MergeState st(input);
  for (const auto& shard : input.shards) {
    for (const auto& e : shard.spec.entries()) {
      if (!e.has_nightly()) continue;
      auto& archs = st.nightly_archs[{e.file(), e.key()}];
      if (archs.empty()) archs.assign(e.nightly().archs().begin(), e.nightly().archs().end());
    }
  }
  st.results = LatestResultsInOrder(input);
  st.entries = DecideEntries(st.results);
  for (const auto& r : st.results) {
    for (const auto& ev : r.record->result.evidence()) {
      if (ev.kind() == "provenance") st.out.provenance[r.shard->id] = ev.content();
    }
  }
  {
    std::vector<CommandWork> work;
    for (const auto& r : st.results) work.push_back({r.shard, r.record, true});
    std::map<EntryId, EntryMerge*> merged;
    for (auto& [id, a] : st.entries) merged[id] = &a.m;
    HoldBackBrokenSharedFixes(input.shards, work, merged, st.rejected, st.out);
    HoldWorkaroundsForReview(work, PccBeforeOf(st), merged, st.rejected, st.out);
  }
  DropRejectedCommandEdits(st);
  if (absl::Status s = MergeYaml(st); !s.ok()) return s;
  if (absl::Status s = MergeRegistryLines(st); !s.ok()) return s;
  MergeFileEdits(st);
  // tt-forge-models.patch: the registry file and the loaders, in path order.
  for (const auto& [path, text] : st.forge_after) {
    st.out.forge_patch +=
        diff::UnifiedDiff(path, st.forge_before[path], text, {.index_line = true});
    st.out.changed_files.push_back(util::StrCat("tt_forge_models/", path));
  }
  {
    std::vector<CommandWork> work;
    for (const auto& r : st.results)
      work.push_back({r.shard, r.record, !st.rejected.count(r.record)});
    SummariseCommandWork(work, st.out);
  }
  // Entries in file order (then key): the report's order.
  for (auto& [id, a] : st.entries) st.out.entries.push_back(std::move(a.m));
  return std::move(st.out);
}

}  // namespace triage::merge
