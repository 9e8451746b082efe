#include "agent/playbooks/unpack_forward_output/unpack_forward_output.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "agent/playbooks/dtype_bfloat16/dtype_bfloat16.h"
#include "agent/playbooks/missing_inputs/missing_inputs.h"
#include "agent/playbooks/python_edit.h"
#include "agent/playbooks/shard_run.h"
#include "common/util/file.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::playbooks {
namespace {

std::string TypeOf(const nlohmann::json& n) {
  if (!n.is_object()) return "";
  auto it = n.find("type");
  return it != n.end() && it->is_string() ? it->get<std::string>() : "";
}

// "What is selected and why": the loss target's reason and what it leaves out.
std::string Selected(const LossTarget& t) {
  std::vector<std::string> names;
  for (const auto& c : t.not_chosen) names.push_back(c.name);
  return util::StrCat(
      t.reason, names.empty() ? "" : util::StrCat("; not selected: ", util::StrJoin(names, ", ")));
}

// The review flag of a loss target no family rule decided.
std::string MinimalCandidateFlag(const LossTarget& t) {
  std::vector<std::string> names;
  for (const auto& c : t.not_chosen) names.push_back(c.name);
  return util::StrCat(
      "ambiguous loss target: no family rule decided (family ", LossFamilyName(t.family),
      "); the minimal candidate `", t.chosen.empty() ? t.expr : t.chosen.front().name,
      "` was taken",
      names.empty() ? "" : util::StrCat(", alternatives: ", util::StrJoin(names, ", ")));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Decision tables

UnpackPlan PlanUnpack(const ProbeDoc& doc, const registry::RegistryFile* reg,
                      std::string_view loader_doc, const std::optional<HouseOverride>& house) {
  UnpackPlan p;
  const nlohmann::json& tree = doc.tree;
  p.structure = DescribeTree(tree);
  if (doc.unpacked_ok) {
    p.kind = UnpackPlan::Kind::kStale;
    p.selected =
        util::StrCat("already handled: unpack_forward_output returns a ", doc.unpacked_kind);
    return p;
  }
  // The loss target (loss_target.h) of the whole output.
  auto decide = [&]() -> const LossTarget& {
    LossTargetInput in;
    in.output_class = doc.output_class;
    in.output_module = doc.output_module;
    in.tree = tree;
    in.task = doc.model_info ? doc.model_info->task : "";
    in.loader_doc = std::string(loader_doc);
    if (reg != nullptr) {
      for (const auto& r : reg->registrations()) {
        if (!r.attr.empty()) in.registry.push_back({r.cls, r.attr, r.line + 1});
      }
    }
    in.house_override = house;
    p.loss_target = DecideLossTarget(in);
    const LossTarget& t = *p.loss_target;
    p.expr = t.expr;
    p.needs_torch = t.needs_torch;
    if (t.house_form && house) {
      p.house = house;
      // The house statements import torch themselves, or read the loader's import.
      p.needs_torch = std::none_of(
          house->body.begin(), house->body.end(),
          [](const std::string& l) { return util::TrimWhitespace(l) == "import torch"; });
    }
    p.selected = Selected(t);
    if (!t.expr.empty() && !t.by_rule) p.review.push_back(MinimalCandidateFlag(t));
    return t;
  };
  const std::string type = TypeOf(tree);
  const std::string no_registry_for_bare =
      "a bare list/tuple/dict has no class name to key a registry line on";
  if (type == "object") {
    auto cls = tree.find("class");
    p.cls = cls != tree.end() && cls->is_string() ? cls->get<std::string>() : doc.output_class;
    static const nlohmann::json kNoAttrs = nlohmann::json::object();
    auto attrs_it = tree.find("attrs");
    const nlohmann::json& attrs =
        attrs_it != tree.end() && attrs_it->is_object() ? *attrs_it : kNoAttrs;
    const registry::Registration* existing = reg != nullptr ? reg->Find(p.cls) : nullptr;
    if (existing != nullptr && !existing->attr.empty()) {
      p.attr = existing->attr;
      const auto it = attrs.find(existing->attr);
      const std::string attr_type = it != attrs.end() ? TypeOf(*it) : "";
      if (attr_type == "tensor") {
        p.kind = UnpackPlan::Kind::kNoFix;
        p.review.push_back(util::StrCat(
            "the registry line ", p.cls, " -> ", existing->attr,
            " yields a tensor, yet unpack_forward_output failed: ", doc.unpacked_error));
        return p;
      }
      // The registered attribute is a container, not a tensor: the registry entry is wrong.
      if (attr_type == "tuple" || attr_type == "list" || attr_type == "dict" ||
          attr_type == "object") {
        if (!decide().expr.empty()) {
          p.kind = UnpackPlan::Kind::kRemoveAndOverride;
          p.why_not_other =
              util::StrCat("the registry line ", p.cls, " -> ", existing->attr,
                           " is wrong (not a tensor): it is deleted and this loader gets an "
                           "override");
          return p;
        }
      }
      p.kind = UnpackPlan::Kind::kNoFix;
      p.review.push_back(util::StrCat("registry entry ", p.cls, " -> ", existing->attr,
                                      " does not yield a tensor and no override could be "
                                      "derived"));
      return p;
    }
    const LossTarget& t = decide();
    if (t.expr.empty()) {
      p.kind = UnpackPlan::Kind::kNoFix;
      p.review.push_back(util::StrCat("no loss-relevant tensor attribute found on ", p.cls));
      return p;
    }
    // A registry line is global for the class: only a choice a family rule made goes there. A
    // minimal candidate stays on this loader (an override) until a person confirms it.
    if (!t.attr.empty() && !t.per_loader && t.by_rule) {
      p.kind = UnpackPlan::Kind::kRegistryAdd;
      p.attr = t.attr;
      p.expr.clear();
      p.why_not_other = util::StrCat(
          "a named output class whose loss target is one attribute: a "
          "registry line (global for ",
          p.cls, ") needs no per-loader code",
          t.follows.empty() ? "" : util::StrCat("; follows ", t.follows));
      return p;
    }
    p.kind = UnpackPlan::Kind::kOverride;
    if (t.per_loader) {
      p.why_not_other =
          util::StrCat(p.cls, " is a shared base output whose other models train on ",
                       "last_hidden_state: a registry line (global) would change them, so this "
                       "loader gets an override");
    } else if (!t.by_rule) {
      p.why_not_other = util::StrCat(
          "no family rule decided the loss target: a registry line (global for ", p.cls,
          ") would carry a guess to every model returning it, so this "
          "loader gets an override until a person confirms the choice");
    } else if (t.house_form) {
      p.why_not_other = util::StrCat("the heads sit in a container member (", t.expr,
                                     "), not one tensor attribute a registry line can name; "
                                     "written in the checkout's house form: follows ",
                                     t.follows);
    } else {
      p.why_not_other = util::StrCat("the loss target (", t.expr,
                                     ") is more than one attribute lookup, which is all a "
                                     "registry line can express");
    }
    return p;
  }
  if (type == "list" || type == "tuple" || type == "dict") {
    if (decide().expr.empty()) {
      p.kind = UnpackPlan::Kind::kNoFix;
      p.review.push_back(util::StrCat(type, " output without a tensor to select"));
      return p;
    }
    p.kind = UnpackPlan::Kind::kOverride;
    p.why_not_other = no_registry_for_bare;
    if (p.loss_target->house_form) {
      util::StrAppend(&p.why_not_other, "; written in the checkout's house form: follows ",
                      p.loss_target->follows);
    }
    return p;
  }
  p.kind = UnpackPlan::Kind::kNoFix;
  p.review.push_back(util::StrCat("unexpected forward output ", p.structure));
  return p;
}

std::string RenderOverride(const UnpackPlan& plan, std::string_view loader) {
  std::optional<std::vector<std::string>> house;
  if (plan.house) house = HouseStatementsFor(*plan.house, loader, plan.expr);
  std::string out =
      "    def unpack_forward_output(self, forward_output):\n"
      "        \"\"\"Select the loss-relevant tensor of the forward output for training.\n"
      "\n"
      "        Forward output structure:\n";
  util::StrAppend(&out, "            ", plan.structure, "\n\n");
  util::StrAppend(&out, "        What is selected and why:\n");
  util::StrAppend(&out, "            ", plan.selected, ".\n");
  util::StrAppend(&out, "        \"\"\"\n");
  if (house) {
    for (const auto& l : *house) util::StrAppend(&out, "        ", l, "\n");
  } else {
    util::StrAppend(&out, "        return ", plan.expr, "\n");
  }
  return out;
}

bool OverrideRaised(const ProbeDoc& doc, std::string_view loader_path) {
  if (!doc.has_unpacked || doc.unpacked_ok || !doc.error) return false;
  const ProbeDoc::Error& e = *doc.error;
  if (e.site_function == "unpack_forward_output" && !e.site_file.empty() &&
      std::string_view(loader_path).ends_with(e.site_file)) {
    return true;
  }
  // `  File ".../m/pytorch/loader.py", line 40, in unpack_forward_output`
  for (auto line : util::SplitLines(e.traceback)) {
    line = util::TrimWhitespace(line);
    if (!line.starts_with("File \"") || !line.ends_with(", in unpack_forward_output")) continue;
    const std::size_t close = line.find('"', 6);
    if (close == std::string_view::npos) continue;
    const std::string_view file = line.substr(6, close - 6);
    if (file.ends_with(util::StrCat("/", loader_path)) || file == loader_path) return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// The playbook

namespace unpack_forward_output {
namespace {

class UnpackForwardOutput : public Playbook {
 public:
  const CatalogEntry& Catalog() const override { return kCatalog; }
  absl::Status ProbeAndFix(ShardRun& run) const override;
};

constexpr std::string_view kForgeRoot = "third_party/tt_forge_models/";

// The loader's path relative to the tt-forge-models root.
std::string ForgeRelative(std::string_view loader) {
  return std::string(loader.starts_with(kForgeRoot) ? loader.substr(kForgeRoot.size()) : loader);
}

// The house-form override of the checkout's other loaders (docs/playbooks.md, "Which attribute is
// registered") that can be moved to `own`, if any.
std::optional<HouseOverride> FindHouseOverride(const std::filesystem::path& workspace,
                                               const std::string& own) {
  namespace fs = std::filesystem;
  const fs::path root = workspace / kForgeRoot;
  std::vector<HouseOverride> found;
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path& path = it->path();
    if (it->is_directory(ec) && path.filename().string().starts_with(".")) {
      it.disable_recursion_pending();
      continue;
    }
    if (path.filename() != "loader.py") continue;
    const std::string rel = path.lexically_relative(root).generic_string();
    if (rel == own) continue;
    auto text = util::ReadFile(path, 1 << 20);
    if (!text.ok()) continue;
    auto h = ParseHouseOverride(rel, *text);
    if (h && HouseStatementsFor(*h, own, "forward_output")) found.push_back(std::move(*h));
  }
  return ChooseHouseOverride(std::move(found));
}

// The playbook a re-probe's failure belongs to (docs/playbooks.md, "Chaining"): "" when none.
std::string NextPlaybookFor(const ProbeDoc& d) {
  if (!d.error) return "";
  const std::string& m = d.error->message;
  if (HasBf16Signature(m) && m.find("BFloat16") != std::string::npos) return "dtype_bfloat16";
  if (missing_inputs::HasMissingInputsSignature(m)) return "missing_inputs";
  return "";
}

}  // namespace

// docs/playbooks.md, "unpack_forward_output".
absl::Status UnpackForwardOutput::ProbeAndFix(ShardRun& run) const {
  // The loader's own override: probed like any other output. Working, the YAML reason is stale;
  // raising in it, the override itself is what gets fixed (replaced).
  const std::optional<int> existing = registry::FindUnpackOverride(run.loader_text());
  const std::string loader_rel = ForgeRelative(run.spec().loader());
  bool replace_existing = false;
  std::vector<EntryWork*> working_override;
  std::map<std::string, std::string> adds;  // cls -> attr
  std::set<std::string> removes;
  std::optional<UnpackPlan> override_plan;
  std::vector<std::pair<EntryWork*, UnpackPlan>> plans;
  const std::string loader_doc = LoaderDocOf(run.loader_text());
  std::optional<std::optional<HouseOverride>> house;  // read once, when first needed
  for (auto& w : run.entries()) {
    if (run.Cancelled()) return absl::CancelledError("cancelled");
    run.Progress("probe", w.entry->key());
    auto docs = run.ProbeOrStop(w, "structure");
    if (!docs.ok()) return docs.status();
    if (!*docs) continue;
    w.probe = (*docs)->front();
    const ProbeDoc& d = *w.probe;
    w.out->set_output_class(d.output_class);
    if (!d.has_output) {
      run.Review(w, util::StrCat("the CPU probe failed before the forward output: ",
                                 d.error ? d.error->Line() : "unknown error"));
      w.out->set_probe_finding(util::StrCat("probe failed: ", d.error ? d.error->Line() : "?"));
      run.Stop(w, "probe_failed");
      continue;
    }
    if (existing) {
      if (d.unpacked_ok) {
        w.out->set_probe_finding(
            util::StrCat("the loader already defines unpack_forward_output (loader.py:", *existing,
                         "), which returns a ", d.unpacked_kind, ": the YAML reason is stale"));
        w.out->set_fix_path("none");
        w.out->set_why_not_other("nothing to fix");
        working_override.push_back(&w);
        continue;
      }
      // The override itself raises: replaced by the one the rules below choose.
      if (!OverrideRaised(d, run.spec().loader())) {
        run.Review(w,
                   util::StrCat("the loader defines unpack_forward_output (loader.py:", *existing,
                                "), and unpacking failed outside it: ", d.unpacked_error));
        w.out->set_probe_finding(util::StrCat("forward output: ", DescribeTree(d.tree)));
        w.out->set_fix_path("none");
        run.Stop(w, "no_fix");
        continue;
      }
      replace_existing = true;
    }
    if (!house) house = FindHouseOverride(run.workspace(), loader_rel);
    UnpackPlan plan = PlanUnpack(d, run.registry(), loader_doc, *house);
    w.out->set_probe_finding(util::StrCat("forward output: ", plan.structure));
    if (existing) {
      w.out->set_probe_finding(util::StrCat(
          w.out->probe_finding(), "; the loader's own unpack_forward_output (loader.py:", *existing,
          ") raises ", d.unpacked_error, ": it is replaced"));
    }
    if (plan.loss_target && !plan.loss_target->expr.empty()) {
      const LossTarget& t = *plan.loss_target;
      auto* lt = w.out->mutable_loss_target();
      lt->set_family(std::string(LossFamilyName(t.family)));
      lt->set_chosen(plan.kind == UnpackPlan::Kind::kRegistryAdd ? plan.attr
                     : t.house_form ? util::StrCat("every tensor of ", t.expr, " (house form)")
                                    : t.expr);
      lt->set_reason(t.reason);
      lt->set_by_rule(t.by_rule);
      for (const auto& c : t.not_chosen) {
        auto* n = lt->add_not_chosen();
        n->set_name(c.name);
        n->set_shape(c.shape);
      }
    }
    for (const auto& r : plan.review) run.Review(w, r);
    switch (plan.kind) {
      case UnpackPlan::Kind::kStale:
        w.out->set_fix_path("none");
        w.out->set_why_not_other(util::StrCat(plan.selected, "; the YAML reason is stale"));
        break;
      case UnpackPlan::Kind::kRegistryAdd:
        adds[plan.cls] = plan.attr;
        break;
      case UnpackPlan::Kind::kRemoveAndOverride:
        removes.insert(plan.cls);
        [[fallthrough]];
      case UnpackPlan::Kind::kOverride:
        if (override_plan && override_plan->expr != plan.expr) {
          run.Review(w, util::StrCat("variants of this loader need different overrides (",
                                     override_plan->expr, " vs ", plan.expr, "); none written"));
          run.Stop(w, "conflict");
          continue;
        }
        override_plan = plan;
        break;
      case UnpackPlan::Kind::kNoFix:
        w.out->set_fix_path("none");
        run.Stop(w, "no_fix");
        continue;
    }
    plans.emplace_back(&w, plan);
  }
  if (replace_existing) {
    for (EntryWork* w : working_override) {
      run.Review(*w,
                 "the loader's unpack_forward_output works for this variant and raises for "
                 "another: it is replaced for all of them; verify this one with the new one");
    }
  }
  // Apply the fixes: registry lines (global), then one override for the loader.
  run.Progress("fix");
  bool changed_registry = false;
  for (const auto& cls : removes) {
    if (run.registry() == nullptr) break;
    if (run.registry()->Remove(cls).ok()) {
      changed_registry = true;
      auto* op = run.result().add_registry_ops();
      op->set_kind(v1::RegistryOp::REMOVE);
      op->set_cls(cls);
    }
  }
  for (const auto& [cls, attr] : adds) {
    if (run.registry() == nullptr) break;
    absl::Status st = run.registry()->Add(cls, attr);
    if (!st.ok()) {
      for (auto& [w, plan] : plans) {
        if (plan.cls == cls) {
          run.Review(*w, util::StrCat("registry line refused: ", util::MessageOf(st)));
          run.Stop(*w, "");
        }
      }
      continue;
    }
    changed_registry = true;
    auto* op = run.result().add_registry_ops();
    op->set_kind(v1::RegistryOp::ADD);
    op->set_cls(cls);
    op->set_attr(attr);
  }
  if (changed_registry) {
    if (auto st = run.WriteRegistry(); !st.ok()) return st;
  }
  bool replaced = false;
  if (override_plan || replace_existing) {
    std::string text = run.loader_text();
    absl::Status failed;
    if (replace_existing) {
      auto removed = RemoveMethodFromModelLoader(text, "unpack_forward_output");
      if (removed.ok()) {
        text = *removed;
      } else {
        failed = removed.status();
      }
    }
    if (failed.ok() && override_plan) {
      if (override_plan->needs_torch) text = EnsureImportTorch(text);
      auto added = AddMethodToModelLoader(text, "unpack_forward_output",
                                          RenderOverride(*override_plan, loader_rel));
      if (added.ok()) {
        text = *added;
      } else {
        failed = added.status();
      }
    }
    if (!failed.ok()) {
      for (auto& [w, plan] : plans) {
        if (plan.kind != UnpackPlan::Kind::kRegistryAdd || replace_existing) {
          run.Review(*w, util::StrCat("override not written: ", util::MessageOf(failed)));
          run.Stop(*w, "");
        }
      }
    } else {
      replaced = replace_existing;
      run.loader_text() = text;
      if (auto st = run.WriteLoader(); !st.ok()) return st;
    }
  }
  // What each entry got, and a re-probe to confirm unpack_forward_output now works.
  for (auto& [w, plan] : plans) {
    if (!w->verify) continue;
    switch (plan.kind) {
      case UnpackPlan::Kind::kRegistryAdd:
        w->fixed = true;
        w->out->set_fix_path(replaced ? "override_remove+registry" : "registry");
        w->out->set_why_not_other(plan.why_not_other);
        w->out->set_probe_finding(util::StrCat(w->out->probe_finding(), "; registry line ",
                                               plan.cls, " -> ", plan.attr, ": ", plan.selected));
        break;
      case UnpackPlan::Kind::kRemoveAndOverride:
      case UnpackPlan::Kind::kOverride:
        w->fixed = true;
        w->out->set_fix_path(replaced ? "override_replace"
                             : plan.kind == UnpackPlan::Kind::kOverride
                                 ? "override"
                                 : "registry_remove+override");
        w->out->set_why_not_other(plan.why_not_other);
        w->out->set_probe_finding(util::StrCat(
            w->out->probe_finding(), "; override returns ",
            plan.house ? util::StrCat("every tensor of ", plan.expr, " concatenated") : plan.expr,
            ": ", plan.selected));
        break;
      default:
        break;
    }
    if (!w->fixed) continue;
    run.Progress("re-probe", w->entry->key());
    auto docs = run.tools().Probe(w->entry->key(), "structure");
    if (!docs.ok() || docs->empty()) {
      if (!docs.ok() && !absl::IsNotFound(docs.status()) &&
          !absl::IsDeadlineExceeded(docs.status())) {
        return docs.status();
      }
      run.Review(*w, "no probe result after the fix");
      continue;
    }
    const ProbeDoc& after = docs->front();
    // The fix holds and the re-probe fails on: the playbook for that failure runs next on the
    // edited loader (docs/playbooks.md, "Chaining"), rather than a verification of a known
    // problem.
    if (!after.ok && (!after.has_unpacked || after.unpacked_ok)) {
      if (const std::string next = NextPlaybookFor(after); !next.empty()) {
        w->out->set_probe_finding(util::StrCat(
            w->out->probe_finding(), "; after the fix the probe fails: ", after.error->Line()));
        run.Stop(*w, next == "dtype_bfloat16" ? "needs_dtype" : "needs_inputs",
                 v1::EntryOutcome::NEEDS_PLAYBOOK, next);
        continue;
      }
    }
    if (!after.unpacked_ok) {
      run.Review(*w, util::StrCat("after the fix unpack_forward_output still fails: ",
                                  after.unpacked_error));
      run.Stop(*w, "fix_failed");
    }
  }
  return absl::OkStatus();
}

std::unique_ptr<Playbook> Make() { return std::make_unique<UnpackForwardOutput>(); }

}  // namespace unpack_forward_output
}  // namespace triage::playbooks
