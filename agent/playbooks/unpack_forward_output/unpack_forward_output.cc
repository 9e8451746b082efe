#include "agent/playbooks/unpack_forward_output/unpack_forward_output.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "agent/playbooks/python_edit.h"
#include "agent/playbooks/shard_run.h"
#include "common/util/strings.h"

namespace triage::playbooks {
namespace {

// The loss-relevant attribute of a named output, in the order of docs/playbooks.md
// ("Which attribute is registered"): LMs and classifiers -> logits; depth -> predicted_depth;
// segmentation masks; encoders -> last_hidden_state (or pooler_output).
constexpr std::string_view kAttrPreference[] = {
    "logits", "predicted_depth", "pred_masks",      "reconstruction",    "spectrogram",
    "sample", "start_logits",    "logits_per_text", "last_hidden_state", "pooler_output"};

bool IsTensor(const nlohmann::json& n) { return n.is_object() && n.value("type", "") == "tensor"; }

std::string Shape(const nlohmann::json& n) {
  std::string s = "(";
  bool first = true;
  for (const auto& d : n.value("shape", nlohmann::json::array())) {
    if (!first) s += ", ";
    s += d.dump();
    first = false;
  }
  return s + ")";
}

bool AllTensors(const nlohmann::json& items) {
  if (!items.is_array() || items.empty()) return false;
  return std::all_of(items.begin(), items.end(), [](const auto& i) { return IsTensor(i); });
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Decision tables

UnpackPlan PlanUnpack(const ProbeDoc& doc, const registry::RegistryFile* reg) {
  UnpackPlan p;
  const nlohmann::json& tree = doc.tree;
  p.structure = DescribeTree(tree);
  if (doc.unpacked_ok) {
    p.kind = UnpackPlan::Kind::kStale;
    p.selected =
        util::StrCat("already handled: unpack_forward_output returns a ", doc.unpacked_kind);
    return p;
  }
  const std::string type = tree.value("type", "");
  const std::string no_registry_for_bare =
      "a bare list/tuple/dict has no class name to key a registry line on";
  if (type == "object") {
    p.cls = tree.value("class", doc.output_class);
    const nlohmann::json& attrs = tree.value("attrs", nlohmann::json::object());
    const registry::Registration* existing = reg != nullptr ? reg->Find(p.cls) : nullptr;
    if (existing != nullptr && !existing->attr.empty()) {
      // The registered attribute is not a tensor: the registry entry is wrong.
      const auto it = attrs.find(existing->attr);
      p.kind = UnpackPlan::Kind::kRemoveAndOverride;
      p.attr = existing->attr;
      if (it != attrs.end() &&
          (it->value("type", "") == "tuple" || it->value("type", "") == "list") &&
          AllTensors((*it)["items"])) {
        p.expr = util::StrCat("forward_output.", existing->attr, "[0]");
        p.selected = util::StrCat("`", existing->attr, "` is a ", (*it)["items"].size(),
                                  "-element ", it->value("type", ""),
                                  " of tensors; its first element is returned as the loss "
                                  "target, the others are dropped");
        if ((*it)["items"].size() > 1) {
          p.review.push_back(util::StrCat("ambiguous loss target: ", p.cls, ".", existing->attr,
                                          " holds ", (*it)["items"].size(),
                                          " tensors; the first was chosen"));
        }
      } else {
        p.kind = UnpackPlan::Kind::kNoFix;
        p.review.push_back(util::StrCat("registry entry ", p.cls, " -> ", existing->attr,
                                        " does not yield a tensor and no override could be "
                                        "derived"));
        return p;
      }
      p.why_not_other = util::StrCat("the registry line ", p.cls, " -> ", existing->attr,
                                     " is wrong (not a tensor): it is deleted and this loader "
                                     "gets an override");
      return p;
    }
    std::string chosen;
    for (auto pref : kAttrPreference) {
      auto it = attrs.find(std::string(pref));
      if (it != attrs.end() && IsTensor(*it)) {
        chosen = std::string(pref);
        break;
      }
    }
    if (chosen.empty()) {
      std::vector<std::string> tensors;
      for (auto it = attrs.begin(); it != attrs.end(); ++it) {
        if (IsTensor(it.value())) tensors.push_back(it.key());
      }
      if (tensors.size() == 1) chosen = tensors[0];
      if (tensors.size() > 1) {
        p.review.push_back(util::StrCat("ambiguous loss target: ", p.cls, " has tensors ",
                                        util::StrJoin(tensors, ", "),
                                        "; none is a known loss "
                                        "target"));
      }
    }
    if (chosen.empty()) {
      p.kind = UnpackPlan::Kind::kNoFix;
      p.review.push_back(util::StrCat("no loss-relevant tensor attribute found on ", p.cls));
      return p;
    }
    p.kind = UnpackPlan::Kind::kRegistryAdd;
    p.attr = chosen;
    p.selected = util::StrCat("`", chosen, "` ", Shape(attrs[chosen]),
                              ": the loss-relevant tensor for this model family");
    p.why_not_other = util::StrCat(
        "a named output class whose loss target is one attribute: a "
        "registry line (global for ",
        p.cls, ") needs no per-loader code");
    return p;
  }
  if (type == "list" || type == "tuple") {
    const nlohmann::json& items = tree["items"];
    p.kind = UnpackPlan::Kind::kOverride;
    p.why_not_other = no_registry_for_bare;
    bool heads = AllTensors(items) && items.size() >= 2;
    if (heads) {
      const auto& f = items[0]["shape"];
      for (const auto& i : items) {
        const auto& s = i["shape"];
        heads &= s.size() == 4 && f.size() == 4 && s[1] == f[1];
      }
    }
    if (heads) {
      p.expr = "torch.cat([t.flatten(1) for t in forward_output], dim=1)";
      p.needs_torch = true;
      p.selected = util::StrCat("the ", items.size(),
                                " detection-head tensors, flattened and concatenated: the "
                                "per-scale class and box outputs the detection loss consumes");
    } else if (AllTensors(items)) {
      p.expr = "forward_output[0]";
      p.selected = util::StrCat("the first element ", Shape(items[0]),
                                ", the model's primary output; the other ", items.size() - 1,
                                " element(s) are auxiliary and dropped");
      if (items.size() > 1) {
        p.review.push_back(util::StrCat("ambiguous loss target: a ", type, " of ", items.size(),
                                        " tensors; the first was chosen"));
      }
    } else {
      p.expr = "torch.cat([t.flatten() for t in extract_tensors_recursive(forward_output)])";
      p.needs_torch = true;
      p.selected = "every tensor of the nested structure, flattened and concatenated";
      p.review.push_back("nested output: all tensors are returned; check the loss target");
    }
    return p;
  }
  if (type == "dict") {
    const nlohmann::json& items = tree.value("items", nlohmann::json::object());
    p.kind = UnpackPlan::Kind::kOverride;
    p.why_not_other = no_registry_for_bare;
    std::string key;
    for (std::string_view pref : {"logits", "out", "output", "pred", "predictions"}) {
      auto it = items.find(std::string(pref));
      if (it != items.end() && IsTensor(*it)) {
        key = std::string(pref);
        break;
      }
    }
    if (key.empty()) {
      for (auto it = items.begin(); it != items.end(); ++it) {
        if (IsTensor(it.value()) && it.key().find("aux") == std::string::npos) {
          key = it.key();
          break;
        }
      }
    }
    if (key.empty()) {
      p.kind = UnpackPlan::Kind::kNoFix;
      p.review.push_back("dict output without a tensor to select");
      return p;
    }
    p.expr = util::StrCat("forward_output[\"", key, "\"]");
    std::vector<std::string> dropped;
    for (auto it = items.begin(); it != items.end(); ++it) {
      if (it.key() != key) dropped.push_back(it.key());
    }
    p.selected = util::StrCat(
        "`", key, "` ", Shape(items[key]), ", the per-pixel prediction",
        dropped.empty()
            ? ""
            : util::StrCat("; auxiliary outputs (", util::StrJoin(dropped, ", "), ") are dropped"));
    return p;
  }
  p.kind = UnpackPlan::Kind::kNoFix;
  p.review.push_back(util::StrCat("unexpected forward output ", p.structure));
  return p;
}

std::string RenderOverride(const UnpackPlan& plan) {
  std::string out =
      "    def unpack_forward_output(self, forward_output):\n"
      "        \"\"\"Select the loss-relevant tensor of the forward output for training.\n"
      "\n"
      "        Forward output structure:\n";
  util::StrAppend(&out, "            ", plan.structure, "\n\n");
  util::StrAppend(&out, "        What is selected and why:\n");
  util::StrAppend(&out, "            ", plan.selected, ".\n");
  util::StrAppend(&out, "        \"\"\"\n");
  if (plan.expr.find("extract_tensors_recursive") != std::string::npos) {
    util::StrAppend(&out,
                    "        from third_party.tt_forge_models.tools.utils import "
                    "extract_tensors_recursive\n\n");
  }
  util::StrAppend(&out, "        return ", plan.expr, "\n");
  return out;
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

}  // namespace

// docs/playbooks.md, "unpack_forward_output".
absl::Status UnpackForwardOutput::ProbeAndFix(ShardRun& run) const {
  // Cheap early exit: the loader already overrides unpack_forward_output.
  if (auto line = registry::FindUnpackOverride(run.loader_text())) {
    for (auto& w : run.entries()) {
      w.out->set_probe_finding(
          util::StrCat("the loader already defines unpack_forward_output (loader.py:", *line,
                       "): the YAML reason is stale"));
      w.out->set_fix_path("none");
      w.out->set_why_not_other("nothing to fix");
    }
    return absl::OkStatus();
  }
  std::map<std::string, std::string> adds;  // cls -> attr
  std::set<std::string> removes;
  std::optional<UnpackPlan> override_plan;
  std::vector<std::pair<EntryWork*, UnpackPlan>> plans;
  for (auto& w : run.entries()) {
    if (run.Cancelled()) return absl::CancelledError("cancelled");
    run.Progress("probe", w.entry->key());
    auto docs = run.tools().Probe(w.entry->key(), "structure");
    if (!docs.ok() || docs->empty()) {
      if (!docs.ok() && !absl::IsNotFound(docs.status()) &&
          !absl::IsDeadlineExceeded(docs.status())) {
        return docs.status();
      }
      run.Review(w, util::StrCat("no CPU probe result: ",
                                 docs.ok() ? "empty" : util::MessageOf(docs.status())));
      run.Stop(w, "no_evidence");
      continue;
    }
    w.probe = docs->front();
    const ProbeDoc& d = *w.probe;
    w.out->set_output_class(d.output_class);
    if (!d.has_output) {
      run.Review(w, util::StrCat("the CPU probe failed before the forward output: ",
                                 d.error ? d.error->Line() : "unknown error"));
      w.out->set_probe_finding(util::StrCat("probe failed: ", d.error ? d.error->Line() : "?"));
      run.Stop(w, "probe_failed");
      continue;
    }
    UnpackPlan plan = PlanUnpack(d, run.registry());
    w.out->set_probe_finding(util::StrCat("forward output: ", plan.structure));
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
  if (override_plan) {
    std::string text = run.loader_text();
    if (override_plan->needs_torch) text = EnsureImportTorch(text);
    auto added =
        AddMethodToModelLoader(text, "unpack_forward_output", RenderOverride(*override_plan));
    if (!added.ok()) {
      for (auto& [w, plan] : plans) {
        if (plan.kind != UnpackPlan::Kind::kRegistryAdd) {
          run.Review(*w, util::StrCat("override not written: ", util::MessageOf(added.status())));
          run.Stop(*w, "");
        }
      }
    } else {
      run.loader_text() = *added;
      if (auto st = run.WriteLoader(); !st.ok()) return st;
    }
  }
  // What each entry got, and a re-probe to confirm unpack_forward_output now works.
  for (auto& [w, plan] : plans) {
    if (!w->verify) continue;
    switch (plan.kind) {
      case UnpackPlan::Kind::kRegistryAdd:
        w->fixed = true;
        w->out->set_fix_path("registry");
        w->out->set_why_not_other(plan.why_not_other);
        w->out->set_probe_finding(util::StrCat(w->out->probe_finding(), "; registry line ",
                                               plan.cls, " -> ", plan.attr, ": ", plan.selected));
        break;
      case UnpackPlan::Kind::kRemoveAndOverride:
      case UnpackPlan::Kind::kOverride:
        w->fixed = true;
        w->out->set_fix_path(plan.kind == UnpackPlan::Kind::kOverride ? "override"
                                                                      : "registry_remove+override");
        w->out->set_why_not_other(plan.why_not_other);
        w->out->set_probe_finding(util::StrCat(w->out->probe_finding(), "; override returns ",
                                               plan.expr, ": ", plan.selected));
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
    if (!docs->front().unpacked_ok) {
      run.Review(*w, util::StrCat("after the fix unpack_forward_output still fails: ",
                                  docs->front().unpacked_error));
      run.Stop(*w, "fix_failed");
    }
  }
  return absl::OkStatus();
}

std::unique_ptr<Playbook> Make() { return std::make_unique<UnpackForwardOutput>(); }

}  // namespace unpack_forward_output
}  // namespace triage::playbooks
