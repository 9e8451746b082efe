#include "coordinator/merge/merge.h"

#include <algorithm>
#include <set>

#include "common/diff/apply_diff.h"
#include "common/diff/unified_diff.h"
#include "common/inventory/document.h"
#include "common/registry/registry.h"
#include "common/util/strings.h"
#include "coordinator/planning/waves.h"

namespace triage::merge {
namespace {

// The archs tt-xla's CI runs single-device training tests on (docs/report.md, "Partly verified
// top-level changes").
constexpr const char* kSingleDeviceTrainingCiArchs[] = {"n150", "p150"};

constexpr std::string_view kForgePrefix = "third_party/tt_forge_models/";

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

inventory::Value FromYaml(const v1::YamlValue& v) {
  switch (v.kind_case()) {
    case v1::YamlValue::kStringValue:
      return inventory::Value::String(v.string_value());
    case v1::YamlValue::kBoolValue:
      return inventory::Value::Bool(v.bool_value());
    case v1::YamlValue::kIntValue:
      return inventory::Value::Int(v.int_value());
    case v1::YamlValue::kFloatValue:
      return inventory::Value::Float(v.float_value());
    case v1::YamlValue::kListValue: {
      std::vector<inventory::Value> items;
      for (const auto& s : v.list_value().items()) items.push_back(inventory::Value::String(s));
      return inventory::Value::List(std::move(items));
    }
    default:
      return inventory::Value::Null();
  }
}

// A canonical text of an edit's intent (set fields sorted, deletes sorted).
std::string Canonical(const v1::EntryEdit& e) {
  std::vector<std::string> parts;
  for (const auto& f : e.set()) {
    parts.push_back(util::StrCat("set ", f.name(), "=", FromYaml(f.value()).DebugString()));
  }
  for (const auto& d : e.delete_()) parts.push_back(util::StrCat("del ", d));
  std::sort(parts.begin(), parts.end());
  return util::StrJoin(parts, "; ");
}

inventory::EntryEdit ToEditorEdit(const v1::EntryEdit& e, const std::string& arch) {
  inventory::EntryEdit out;
  out.key = e.key();
  if (!arch.empty()) out.arch = arch;
  for (const auto& f : e.set()) out.set.emplace_back(f.name(), FromYaml(f.value()));
  for (const auto& d : e.delete_()) out.del.push_back(d);
  return out;
}

std::string EntryText(const inventory::Document& doc, const std::string& key) {
  const inventory::Entry* e = doc.Find(key);
  if (e == nullptr) return "";
  std::string out;
  for (int i = e->first_line; i <= e->last_line; ++i) util::StrAppend(&out, doc.Line(i), "\n");
  return out;
}

}  // namespace

absl::StatusOr<MergeOutput> Merge(const MergeInput& input) {
  MergeOutput out;
  std::map<std::string, const coord::ShardRecord*> shards;
  for (const auto& s : input.shards) shards[s.id] = &s;

  // One result per shard (the latest attempt), in a canonical order: wave, phase, arch, shard.
  std::map<std::string, const coord::ResultRecord*> latest;
  for (const auto& r : input.results) {
    if (!shards.count(r.shard_id)) continue;
    auto& cur = latest[r.shard_id];
    if (cur == nullptr || r.token > cur->token ||
        (r.token == cur->token && r.lease_id > cur->lease_id)) {
      cur = &r;
    }
  }
  struct Item {
    const coord::ShardRecord* shard;
    const coord::ResultRecord* record;
  };
  std::vector<Item> items;
  for (const auto& [id, r] : latest) items.push_back({shards.at(id), r});
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    auto key = [](const Item& i) {
      return std::make_tuple(i.shard->spec.wave(), PhaseOrder(i.shard->spec.phase()),
                             i.shard->spec.arch(), i.shard->id);
    };
    return key(a) < key(b);
  });

  // ---- entries: the deciding outcome per target arch
  struct Acc {
    EntryMerge m;
    std::map<std::string, std::pair<int, std::string>> decided_at;  // arch -> (wave, canon)
    bool stopped = false;
    std::set<std::string> conflicting_archs;
  };
  std::map<std::pair<std::string, std::string>, Acc> acc;  // (file, key)
  for (const auto& it : items) {
    const auto& spec = it.shard->spec;
    for (const auto& o : it.record->result.entries()) {
      Acc& a = acc[{o.file(), o.key()}];
      EntryMerge& m = a.m;
      m.key = o.key();
      m.file = o.file();
      m.playbook = spec.playbook();
      m.loader = spec.loader();
      if (m.flavor.empty()) m.flavor = o.flavor();
      m.wave = std::max(m.wave, spec.wave());
      if (spec.phase() != v1::PHASE_VERIFY && (!m.probe || spec.wave() >= m.wave)) m.probe = o;
      for (const auto& r : o.review()) {
        if (std::find(m.review.begin(), m.review.end(), r) == m.review.end()) m.review.push_back(r);
      }
      if (!coord::NeedsVerification(o)) {
        a.stopped = true;
        continue;
      }
      if (coord::AwaitsVerification(o)) continue;  // probe phase: verified later
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
    }
  }

  // ---- YAML edits per file
  std::map<std::string, std::vector<inventory::EntryEdit>> per_file;
  for (auto& [id, a] : acc) {
    EntryMerge& m = a.m;
    if (!a.conflicting_archs.empty()) {
      m.placement = EntryMerge::Placement::kConflict;
      m.conflict = util::StrCat("results of one wave want different edits on ",
                                util::StrJoin(a.conflicting_archs, ", "));
      out.conflicts.push_back(util::StrCat(m.file, ": ", m.key, ": ", m.conflict));
      out.conflict_counts["yaml"]++;
      continue;
    }
    const bool tp = m.key.find("-tensor_parallel-") != std::string::npos;
    const std::vector<std::string> targets =
        tp ? std::vector<std::string>{"n300-llmbox"} : input.archs;
    std::map<std::string, const v1::EntryOutcome*> changed;
    for (const auto& t : targets) {
      auto o = m.outcomes.find(t);
      if (o != m.outcomes.end() && o->second.changed()) changed[t] = &o->second;
    }
    if (changed.empty()) continue;
    std::set<std::string> kinds;
    for (const auto& [t, o] : changed) kinds.insert(Canonical(o->edit()));
    if (changed.size() == targets.size() && kinds.size() == 1) {
      m.placement = EntryMerge::Placement::kTopLevel;
      m.edits.push_back(ToEditorEdit(changed.begin()->second->edit(), ""));
      // A top-level field also reaches the CI archs the sweep did not verify.
      if (!tp && m.key.ends_with("-single_device-training")) {
        std::vector<std::string> unverified;
        for (const char* ci : kSingleDeviceTrainingCiArchs) {
          if (std::find(targets.begin(), targets.end(), ci) == targets.end()) {
            unverified.push_back(ci);
          }
        }
        if (!unverified.empty()) {
          m.review.push_back(util::StrCat(
              "top-level change verified on ", util::StrJoin(targets, ", "), " only; CI also runs ",
              "single-device training on ", util::StrJoin(unverified, ", "), " (sweep with --arch ",
              util::StrJoin(targets, ","), ",", util::StrJoin(unverified, ","),
              " to verify there too)"));
        }
      }
    } else {
      m.placement = EntryMerge::Placement::kPerArch;
      std::set<std::string> decided_fields;
      for (const auto& [t, o] : changed) {
        m.edits.push_back(ToEditorEdit(o->edit(), t));
        for (const auto& f : o->edit().set()) decided_fields.insert(f.name());
      }
      // Every arch decided differently: the decided fields live only in the overrides.
      if (changed.size() == targets.size()) {
        inventory::EntryEdit top;
        top.key = m.key;
        top.del.assign(decided_fields.begin(), decided_fields.end());
        m.edits.push_back(top);
      }
    }
    for (const auto& e : m.edits) per_file[m.file].push_back(e);
  }
  for (auto& [file, edits] : per_file) {
    auto base = input.files->ReadTtXla(file);
    if (!base.ok()) {
      return absl::FailedPreconditionError(util::StrCat(
          "cannot read ", file, " at the pinned commit: ", util::MessageOf(base.status())));
    }
    inventory::Document doc = inventory::Document::Parse(file, *base);
    // An entry whose edits the editor refuses (all of them tried together) is reported and kept
    // as it was; the other entries still change.
    // The whole batch first: one pass over the file. Only when the editor refuses it are the
    // entries tried one by one (each try re-parses the whole file).
    inventory::EditDetail detail;
    auto edited = inventory::ApplyEdits(doc, edits, &detail);
    std::map<std::string, std::vector<inventory::EntryEdit>> by_entry;
    if (!edited.ok()) {
      for (const auto& e : edits) by_entry[e.key].push_back(e);
    }
    std::set<std::string> refused;
    for (const auto& [key, group] : by_entry) {
      auto single = inventory::ApplyEdits(doc, group);
      if (single.ok()) continue;
      refused.insert(key);
      out.conflicts.push_back(
          util::StrCat(file, ": ", key, ": edit refused: ", util::MessageOf(single.status())));
      out.conflict_counts["yaml"]++;
      auto it = acc.find({file, key});
      if (it != acc.end()) {
        it->second.m.placement = EntryMerge::Placement::kConflict;
        it->second.m.conflict = util::MessageOf(single.status());
      }
    }
    if (!edited.ok()) {
      std::vector<inventory::EntryEdit> accepted;
      for (const auto& e : edits) {
        if (!refused.count(e.key)) accepted.push_back(e);
      }
      edited = inventory::ApplyEdits(doc, accepted, &detail);
      if (!edited.ok()) return edited.status();
    }
    if (*edited == *base) continue;
    // The editor re-parsed its output and knows which line ranges it replaced: reuse both.
    inventory::Document after =
        detail.after ? std::move(*detail.after) : inventory::Document::Parse(file, *edited);
    for (auto& [id, a] : acc) {
      if (id.first != file || a.m.edits.empty()) continue;
      a.m.yaml_before = EntryText(doc, a.m.key);
      a.m.yaml_after = EntryText(after, a.m.key);
    }
    std::vector<diff::Region> regions;
    regions.reserve(detail.blocks.size());
    for (const auto& b : detail.blocks) {
      regions.push_back({b.old_first, b.old_end, b.new_first, b.new_end});
    }
    out.ttxla_patch += diff::UnifiedDiffOfRegions(file, *base, *edited, regions);
    out.changed_files.push_back(util::StrCat("tt-xla/", file));
  }

  // ---- registry
  std::vector<coord::ResultRecord> records;
  for (const auto& it : items) records.push_back(*it.record);
  coord::WavePlan registry = coord::MergeRegistry(records);
  for (const auto& c : registry.conflicts) {
    out.conflicts.push_back(c);
    out.conflict_counts["registry"]++;
  }
  std::map<std::string, std::string> forge_after;  // path -> new text
  std::map<std::string, std::string> forge_before;
  if (!registry.merged.empty()) {
    const std::string path(registry::kTrainingUtilsPath.substr(kForgePrefix.size()));
    auto base = input.files->ReadForge(path);
    if (!base.ok()) return base.status();
    auto reg = registry::RegistryFile::Parse(path, *base);
    if (!reg.ok()) return reg.status();
    for (const auto& op : registry.merged) {
      absl::Status st = op.kind() == v1::RegistryOp::REMOVE ? reg->Remove(op.cls())
                                                            : reg->Add(op.cls(), op.attr());
      if (!st.ok()) {
        out.conflicts.push_back(util::StrCat("registry: ", util::MessageOf(st)));
        out.conflict_counts["registry"]++;
        continue;
      }
      out.registry.push_back(op);
    }
    if (reg->Text() != *base) {
      forge_before[path] = *base;
      forge_after[path] = reg->Text();
    }
  }

  // ---- loader files: chained wave by wave
  struct FileState {
    std::string base;
    std::string text;
    std::string wave_start;  // the text before the current wave's edits
    bool started = false;
    int wave = 0;
    std::string wave_result;  // what this wave made of it (to spot two different edits)
    bool conflict = false;
  };
  std::map<std::string, FileState> loaders;
  for (const auto& it : items) {
    for (const auto& fe : it.record->result.file_edits()) {
      if (fe.repo() != "tt_forge_models") continue;
      auto split = diff::SplitDiff(fe.diff());
      if (!split.ok()) continue;
      for (const auto& fd : *split) {
        const std::string path = fe.path().empty() || split->size() > 1 ? fd.path() : fe.path();
        auto st_it = loaders.find(path);
        if (st_it == loaders.end()) {
          auto base = input.files->ReadForge(path);
          FileState s;
          s.base = base.ok() ? *base : "";
          s.text = s.base;
          st_it = loaders.emplace(path, s).first;
        }
        FileState& s = st_it->second;
        if (s.conflict) continue;
        const int wave = it.shard->spec.wave();
        if (!s.started || s.wave != wave) s.wave_start = s.text;
        // Edits of one wave were made independently, on the state the earlier waves left.
        auto applied = diff::ApplyFileDiff(fe.against_pinned() ? s.base : s.wave_start, fd);
        if (!applied.ok()) {
          // Not based on this file's state: two shards edited it independently.
          s.conflict = true;
          out.conflicts.push_back(util::StrCat("loader: tt_forge_models/", path, ": ",
                                               util::MessageOf(applied.status())));
          out.conflict_counts["loader"]++;
          continue;
        }
        if (s.started && s.wave == wave && s.wave_result != *applied) {
          s.conflict = true;
          out.conflicts.push_back(util::StrCat("loader: tt_forge_models/", path,
                                               ": two results of wave ", wave,
                                               " edit it differently"));
          out.conflict_counts["loader"]++;
          continue;
        }
        s.started = true;
        s.wave = wave;
        s.wave_result = *applied;
        s.text = *applied;
      }
    }
  }
  for (const auto& [path, s] : loaders) {
    if (s.conflict || s.text == s.base) continue;
    forge_before[path] = s.base;
    forge_after[path] = s.text;
  }
  for (const auto& [path, text] : forge_after) {
    out.forge_patch += diff::UnifiedDiff(path, forge_before[path], text);
    out.changed_files.push_back(util::StrCat("tt_forge_models/", path));
  }
  // Entries in file order (then key): the report's order.
  for (auto& [id, a] : acc) out.entries.push_back(std::move(a.m));
  return out;
}

}  // namespace triage::merge
