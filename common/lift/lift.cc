#include "common/lift/lift.h"
#include "common/inventory/key.h"
#include "common/inventory/key_grammar.h"

#include <algorithm>
#include <map>
#include <set>

#include "common/command/shared_scope.h"
#include "common/diff/apply_diff.h"
#include "common/inventory/document.h"
#include "common/registry/registry.h"
#include "common/util/strings.h"

namespace triage::lift {
namespace {

using inventory::kForgeModelsPrefix;

void AddReview(v1::EntryOutcome& o, const std::string& note) {
  if (std::find(o.review().begin(), o.review().end(), note) == o.review().end()) {
    o.add_review(note);
  }
}

// What a command's change of one entry means for the shard's arch: the difference between the
// fields the runner sees on that arch before and after (inventory::Entry::FieldForArch), so a
// change under arch_overrides.<arch> is lifted like a top-level one and the merge places it.
// Changes the arch does not see (another arch's overrides, a top-level field its override
// hides) are not lifted and are flagged for review on the entry's outcome.
v1::EntryEdit LiftEntryEdit(const std::string& path, const std::string& arch,
                            const inventory::Entry* before, const inventory::Entry& after,
                            v1::EntryOutcome& outcome) {
  v1::EntryEdit edit;
  edit.set_file(path);
  edit.set_key(after.key);
  for (const auto& name : after.FieldNamesForArch(arch)) {
    const inventory::Value* now = after.FieldForArch(name, arch);
    const inventory::Value* was = before != nullptr ? before->FieldForArch(name, arch) : nullptr;
    if (was != nullptr && *was == *now) continue;
    auto* f = edit.add_set();
    f->set_name(name);
    *f->mutable_value() = ToYaml(*now);
  }
  if (before == nullptr) return edit;
  for (const auto& name : before->FieldNamesForArch(arch)) {
    if (after.FieldForArch(name, arch) == nullptr) edit.add_delete_(name);
  }
  // What changed that this arch does not see.
  std::set<std::string> others;
  for (const auto* e : {before, &after}) {
    for (auto& a : e->OverrideArchs()) {
      if (a != arch) others.insert(a);
    }
  }
  for (const auto& other : others) {
    const inventory::Value* o = before->Field("arch_overrides");
    const inventory::Value* n = after.Field("arch_overrides");
    o = o != nullptr ? o->Find(other) : nullptr;
    n = n != nullptr ? n->Find(other) : nullptr;
    if ((o == nullptr) != (n == nullptr) || (o != nullptr && !(*o == *n))) {
      AddReview(outcome,
                util::StrCat("the command changed arch_overrides.", other, " in a shard for ",
                             arch.empty() ? "no arch" : arch, ": not lifted"));
    }
  }
  for (const auto& item : after.value.map) {
    if (item.key == "arch_overrides") continue;
    const inventory::Value* old = before->Field(item.key);
    if (old != nullptr && *old == item.value) continue;
    if (!(*after.FieldForArch(item.key, arch) == item.value)) {
      AddReview(outcome,
                util::StrCat("the command changed top-level ", item.key, ", which arch_overrides.",
                             arch, " hides on this arch: not lifted"));
    }
  }
  return edit;
}

class Lifter {
 public:
  Lifter(const v1::ShardSpec& spec, v1::ShardResult& result, PinnedFiles& files)
      : spec_(spec), result_(result), files_(files) {
    for (auto& o : *result_.mutable_entries()) outcomes_[o.file() + "\n" + o.key()] = &o;
    for (const auto& e : spec_.entries()) yaml_files_.insert(e.file());
    loader_dir_ = spec_.loader().substr(0, spec_.loader().rfind('/') + 1);
    if (std::string_view(loader_dir_).starts_with(kForgeModelsPrefix)) {
      loader_dir_.erase(0, kForgeModelsPrefix.size());
    }
  }

  LiftOutput Run() {
    if (!result_.ttxla_diff().empty()) LiftTtXla(result_.ttxla_diff());
    if (!result_.forge_diff().empty()) LiftForge(result_.forge_diff());
    result_.clear_ttxla_diff();
    result_.clear_forge_diff();
    // Nothing is dropped silently: what could not be lifted is flagged on every outcome of the
    // shard (the diffs are collected once per shard, so no single entry can be named).
    for (const auto& note : out_.notes) {
      for (auto& o : *result_.mutable_entries()) AddReview(o, note);
    }
    return std::move(out_);
  }

 private:
  // A file outside the loader directory and the YAML files stays in the result as a file edit:
  // one in the shard's shared scope is a shared fix (docs/remediation.md), one that is not is
  // for the ownership check to reject.
  void KeepOutside(std::string_view repo, const diff::FileDiff& fd) {
    auto* fe = result_.add_file_edits();
    fe->set_repo(std::string(repo));
    fe->set_path(fd.path());
    fe->set_diff(fd.text);
    fe->set_against_pinned(true);
    const std::vector<std::string> shared(spec_.shared_paths().begin(), spec_.shared_paths().end());
    if (!command::InSharedScope(shared, repo, fd.path())) {
      out_.outside.push_back(util::StrCat(repo, "/", fd.path()));
    }
  }

  void LiftTtXla(const std::string& raw) {
    auto split = diff::SplitDiff(raw);
    if (!split.ok()) {
      out_.notes.push_back(util::StrCat("unreadable tt-xla diff: ", util::MessageOf(split.status()),
                                        ": not lifted"));
      return;
    }
    for (const auto& fd : *split) {
      const std::string path = fd.path();
      if (!yaml_files_.count(path)) {
        KeepOutside("tt-xla", fd);
        continue;
      }
      auto base = files_.ReadTtXla(path);
      if (!base.ok()) {
        out_.notes.push_back(util::StrCat("tt-xla/", path, " at the pinned commit: ",
                                          util::MessageOf(base.status()), ": not lifted"));
        continue;
      }
      auto after = diff::ApplyFileDiff(*base, fd);
      if (!after.ok()) {
        out_.notes.push_back(util::StrCat("the command's diff of tt-xla/", path,
                                          " does not apply: ", util::MessageOf(after.status()),
                                          ": not lifted"));
        continue;
      }
      if (!grammar_) {  // the pinned checkout's runner says how its keys are made
        grammar_ =
            inventory::GrammarOrDefault(files_.ReadTtXla(std::string(inventory::kRunnerPath)));
      }
      auto before_doc = inventory::Document::Parse(path, *base, {.grammar = &*grammar_});
      auto after_doc = inventory::Document::Parse(path, *after, {.grammar = &*grammar_});
      if (!after_doc.ok()) {
        out_.notes.push_back(util::StrCat("the command left ", path,
                                          " invalid: ", after_doc.diagnostics().front().ToString(),
                                          ": not lifted"));
        continue;
      }
      for (const auto& e : after_doc.entries()) {
        const inventory::Entry* old = before_doc.Find(e.key);
        if (old != nullptr && old->value == e.value) continue;
        auto it = outcomes_.find(path + "\n" + e.key);
        if (it == outcomes_.end()) {
          // Reported, not rejected: the file is the shard's own, and the coordinator has always
          // accepted the rest of such a result; refusing it would throw away the shard's
          // verified outcomes for a change the merge could not use anyway (docs/farm.md, "One
          // result format: the lift"). Files the shard does not own are rejected (KeepOutside).
          out_.notes.push_back(util::StrCat("change of entry '", e.key, "' in ", path,
                                            " is outside the shard: not lifted"));
          continue;
        }
        v1::EntryEdit edit = LiftEntryEdit(path, spec_.arch(), old, e, *it->second);
        it->second->set_changed(edit.set_size() > 0 || edit.delete__size() > 0);
        *it->second->mutable_edit() = edit;
      }
      for (const auto& e : before_doc.entries()) {
        if (after_doc.Find(e.key) == nullptr) {
          out_.notes.push_back(
              util::StrCat("the command removed entry '", e.key, "' from ", path, ": not lifted"));
        }
      }
    }
  }

  void LiftForge(const std::string& raw) {
    auto split = diff::SplitDiff(raw);
    if (!split.ok()) {
      out_.notes.push_back(util::StrCat(
          "unreadable tt_forge_models diff: ", util::MessageOf(split.status()), ": not lifted"));
      return;
    }
    const std::string registry_path(registry::kTrainingUtilsPath.substr(kForgeModelsPrefix.size()));
    for (const auto& fd : *split) {
      const std::string path = fd.path();
      if (path == registry_path) {
        LiftRegistry(fd);
      } else if (std::string_view(path).starts_with(loader_dir_)) {
        auto* fe = result_.add_file_edits();
        fe->set_repo("tt_forge_models");
        fe->set_path(path);
        fe->set_diff(fd.text);
        fe->set_against_pinned(true);
      } else {
        KeepOutside("tt_forge_models", fd);
      }
    }
  }

  void LiftRegistry(const diff::FileDiff& fd) {
    const std::string path = fd.path();
    auto base = files_.ReadForge(path);
    if (!base.ok()) {
      out_.notes.push_back(util::StrCat("tt_forge_models/", path, " at the pinned commit: ",
                                        util::MessageOf(base.status()), ": not lifted"));
      return;
    }
    auto after = diff::ApplyFileDiff(*base, fd);
    if (!after.ok()) {
      out_.notes.push_back(util::StrCat("the command's diff of tt_forge_models/", path,
                                        " does not apply: ", util::MessageOf(after.status()),
                                        ": not lifted"));
      return;
    }
    auto b = registry::RegistryFile::Parse(path, *base);
    auto a = registry::RegistryFile::Parse(path, *after);
    if (!b.ok() || !a.ok()) {
      out_.notes.push_back(util::StrCat("training_utils.py unreadable after the command: ",
                                        util::MessageOf(b.ok() ? a.status() : b.status()),
                                        ": not lifted"));
      return;
    }
    for (const auto& reg : b->registrations()) {
      const auto* now = a->Find(reg.cls);
      if (now == nullptr || now->attr != reg.attr) {
        auto* op = result_.add_registry_ops();
        op->set_kind(v1::RegistryOp::REMOVE);
        op->set_cls(reg.cls);
      }
    }
    for (const auto& reg : a->registrations()) {
      const auto* was = b->Find(reg.cls);
      if (reg.attr.empty()) {
        // A custom handler function: no registry operation expresses it.
        if (was == nullptr || !was->attr.empty()) {
          out_.notes.push_back(util::StrCat("the command registered a handler function for ",
                                            reg.cls, " in training_utils.py: not lifted"));
        }
        continue;
      }
      if (was == nullptr || was->attr != reg.attr) {
        auto* op = result_.add_registry_ops();
        op->set_kind(v1::RegistryOp::ADD);
        op->set_cls(reg.cls);
        op->set_attr(reg.attr);
      }
    }
  }

  const v1::ShardSpec& spec_;
  v1::ShardResult& result_;
  PinnedFiles& files_;
  std::optional<inventory::KeyGrammar> grammar_;
  std::map<std::string, v1::EntryOutcome*> outcomes_;  // file + "\n" + key
  std::set<std::string> yaml_files_;
  std::string loader_dir_;  // relative to the tt_forge_models root, with its trailing '/'
  LiftOutput out_;
};

}  // namespace

v1::YamlValue ToYaml(const inventory::Value& v) {
  v1::YamlValue out;
  switch (v.kind) {
    case inventory::Value::Kind::kBool:
      out.set_bool_value(v.boolean);
      break;
    case inventory::Value::Kind::kInt:
      out.set_int_value(v.integer);
      break;
    case inventory::Value::Kind::kFloat:
      out.set_float_value(v.number);
      break;
    case inventory::Value::Kind::kList:
      for (const auto& i : v.list) out.mutable_list_value()->add_items(i.string);
      break;
    default:
      out.set_string_value(v.string);
  }
  return out;
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

LiftOutput Lift(const v1::ShardSpec& spec, v1::ShardResult& result, PinnedFiles& files) {
  return Lifter(spec, result, files).Run();
}

}  // namespace triage::lift
