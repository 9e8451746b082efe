#include "agent/playbooks/playbooks.h"

#include <algorithm>
#include <map>
#include <set>

#include "agent/playbooks/native_tools.h"
#include "agent/playbooks/python_edit.h"
#include "common/diff/unified_diff.h"
#include "common/inventory/document.h"
#include "common/util/file.h"
#include "common/util/strings.h"

namespace triage::playbooks {
namespace {

constexpr std::string_view kForgePrefix = "third_party/tt_forge_models/";

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

bool HasBf16Signature(const std::string& text) {
  for (std::string_view sig : {"must have the same dtype", "not implemented for 'BFloat16'",
                               "dtypes match", "expected scalar type"}) {
    if (text.find(sig) != std::string::npos) return true;
  }
  return false;
}

std::string_view DtypeRowName(DtypeRow row) {
  switch (row) {
    case DtypeRow::kProceed:
      return "proceed";
    case DtypeRow::kEscalate:
      return "escalate";
    case DtypeRow::kNotReproduced:
      return "not_reproduced";
    case DtypeRow::kOtherError:
      return "gate_misfired";
    case DtypeRow::kNeedsUnpack:
      return "needs_unpack";
  }
  return "?";
}

DtypeRow ClassifyDtype(const ProbeDoc& bf16, const ProbeDoc& f32) {
  auto unpack_failed = [](const ProbeDoc& d) {
    if (d.has_unpacked && !d.unpacked_ok) return true;
    return d.error && d.error->message.find("unpack_forward_output") != std::string::npos;
  };
  if (unpack_failed(bf16) || unpack_failed(f32)) return DtypeRow::kNeedsUnpack;
  if (bf16.ok) return DtypeRow::kNotReproduced;
  // The probe runs this phase in bfloat16, so the dtype signature alone is the gate here (older
  // torch words some of these errors without "BFloat16").
  if (!bf16.error || !HasBf16Signature(bf16.error->message)) return DtypeRow::kOtherError;
  if (!f32.ok) return DtypeRow::kEscalate;
  return DtypeRow::kProceed;
}

v1::EntryEdit EditFor(const junit::Decision& d, const v1::ShardEntry& entry,
                      const std::vector<std::string>& current_markers) {
  v1::EntryEdit edit;
  edit.set_file(entry.file());
  edit.set_key(entry.key());
  auto set_string = [&](const char* name, const std::string& v) {
    auto* f = edit.add_set();
    f->set_name(name);
    f->mutable_value()->set_string_value(v);
  };
  set_string("status", d.status);
  if (d.bringup_status) {
    set_string("bringup_status", *d.bringup_status);
  } else {
    edit.add_delete_("bringup_status");
  }
  if (d.reason) {
    set_string("reason", *d.reason);
  } else {
    edit.add_delete_("reason");
  }
  if (d.assert_pcc) {
    auto* f = edit.add_set();
    f->set_name("assert_pcc");
    f->mutable_value()->set_bool_value(*d.assert_pcc);
  }
  if (!d.add_markers.empty()) {
    std::vector<std::string> markers = current_markers;
    for (const auto& m : d.add_markers) {
      if (std::find(markers.begin(), markers.end(), m) == markers.end()) markers.push_back(m);
    }
    auto* f = edit.add_set();
    f->set_name("markers");
    for (const auto& m : markers) f->mutable_value()->mutable_list_value()->add_items(m);
  }
  return edit;
}

// ---------------------------------------------------------------------------------------------
// Running a shard

namespace {

struct Work {
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

class Runner {
 public:
  explicit Runner(PlaybookContext& ctx) : ctx_(ctx), spec_(*ctx.spec) {}

  absl::StatusOr<v1::ShardResult> Run() {
    if (auto st = Init(); !st.ok()) return st;
    const bool verify_only = spec_.phase() == v1::PHASE_VERIFY;
    if (!verify_only) {
      absl::Status st;
      if (spec_.playbook() == "unpack_forward_output") {
        st = Unpack();
      } else if (spec_.playbook() == "dtype_bfloat16") {
        st = Dtype();
      } else {
        return absl::UnimplementedError(
            util::StrCat("the native executor has no playbook '", spec_.playbook(), "'"));
      }
      if (!st.ok()) return st;
    }
    if (spec_.phase() == v1::PHASE_PROBE) {
      for (auto& w : work_) {
        if (w.verify) w.out->set_verdict("ready");
      }
    } else if (auto st = Verify(); !st.ok()) {
      return st;
    }
    return Finish();
  }

 private:
  bool Cancelled() const { return ctx_.cancelled && ctx_.cancelled(); }
  void Progress(const std::string& step, const std::string& entry = "") {
    if (ctx_.progress) ctx_.progress(step, entry);
  }
  static void Review(Work& w, const std::string& note) { w.out->add_review(note); }

  absl::Status Init() {
    result_.set_status(v1::ShardResult::SUCCEEDED);
    loader_path_ = ctx_.workspace / spec_.loader();
    if (auto text = util::ReadFile(loader_path_, 4 << 20); text.ok()) {
      loader_original_ = *text;
      loader_text_ = *text;
    } else if (spec_.phase() != v1::PHASE_VERIFY) {
      return absl::FailedPreconditionError(
          util::StrCat("loader ", spec_.loader(), " is not in the workspace"));
    }
    registry_path_ = ctx_.workspace / registry::kTrainingUtilsPath;
    if (auto text = util::ReadFile(registry_path_, 4 << 20); text.ok()) {
      auto r = registry::RegistryFile::Parse(std::string(registry::kTrainingUtilsPath), *text);
      if (r.ok()) registry_ = std::move(*r);
    }
    // The entries' current YAML (the workspace holds the sweep's commit).
    std::map<std::string, inventory::Document> docs;
    auto doc_for = [&](const std::string& file) -> const inventory::Document* {
      auto it = docs.find(file);
      if (it == docs.end()) {
        auto text = util::ReadFile(ctx_.workspace / file, inventory::kDefaultMaxYamlBytes);
        if (!text.ok()) return nullptr;
        it = docs.emplace(file, inventory::Document::Parse(file, *text)).first;
      }
      return &it->second;
    };
    for (const auto& e : spec_.entries()) {
      Work w;
      w.entry = &e;
      w.out = result_.add_entries();
      w.out->set_key(e.key());
      w.out->set_file(e.file());
      w.out->set_arch(spec_.arch());
      w.out->set_flavor(e.flavor());
      w.status = e.status();
      w.reason = e.reason();
      if (const auto* doc = doc_for(e.file())) {
        if (const auto* entry = doc->Find(e.key())) {
          w.status = std::string(entry->Status());
          w.reason = std::string(entry->StringField("reason"));
          if (const auto* m = entry->Field("markers"); m != nullptr && m->is_list()) {
            for (const auto& item : m->list) w.markers.push_back(item.string);
          }
        }
      }
      // The informational inference entry of the same loader variant.
      std::string file = e.file();
      std::string key = e.key();
      if (auto at = file.find("_training_"); at != std::string::npos) {
        file.replace(at, 10, "_inference_");
        if (key.ends_with("-training")) key = key.substr(0, key.size() - 8) + "inference";
        if (const auto* doc = doc_for(file)) {
          if (const auto* entry = doc->Find(key)) {
            w.inference_key = key;
            w.inference_status = std::string(entry->Status());
            w.inference_reason = std::string(entry->StringField("reason"));
          }
        }
      }
      work_.push_back(std::move(w));
    }
    return absl::OkStatus();
  }

  absl::Status WriteLoader() { return util::WriteFileAtomic(loader_path_, loader_text_); }
  absl::Status WriteRegistry() {
    if (!registry_) return absl::OkStatus();
    return util::WriteFileAtomic(registry_path_, registry_->Text());
  }

  // docs/playbooks.md, "unpack_forward_output".
  absl::Status Unpack() {
    // Cheap early exit: the loader already overrides unpack_forward_output.
    if (auto line = registry::FindUnpackOverride(loader_text_)) {
      for (auto& w : work_) {
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
    std::vector<std::pair<Work*, UnpackPlan>> plans;
    for (auto& w : work_) {
      if (Cancelled()) return absl::CancelledError("cancelled");
      Progress("probe", w.entry->key());
      auto docs = ctx_.tools->Probe(w.entry->key(), "structure");
      if (!docs.ok() || docs->empty()) {
        if (!docs.ok() && !absl::IsNotFound(docs.status()) &&
            !absl::IsDeadlineExceeded(docs.status())) {
          return docs.status();
        }
        Review(w, util::StrCat("no CPU probe result: ",
                               docs.ok() ? "empty" : util::MessageOf(docs.status())));
        w.out->set_verdict("no_evidence");
        w.verify = false;
        continue;
      }
      w.probe = docs->front();
      const ProbeDoc& d = *w.probe;
      w.out->set_output_class(d.output_class);
      if (!d.has_output) {
        Review(w, util::StrCat("the CPU probe failed before the forward output: ",
                               d.error ? d.error->Line() : "unknown error"));
        w.out->set_probe_finding(util::StrCat("probe failed: ", d.error ? d.error->Line() : "?"));
        w.out->set_verdict("probe_failed");
        w.verify = false;
        continue;
      }
      UnpackPlan plan = PlanUnpack(d, registry_ ? &*registry_ : nullptr);
      w.out->set_probe_finding(util::StrCat("forward output: ", plan.structure));
      for (const auto& r : plan.review) Review(w, r);
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
            Review(w, util::StrCat("variants of this loader need different overrides (",
                                   override_plan->expr, " vs ", plan.expr, "); none written"));
            w.verify = false;
            w.out->set_verdict("conflict");
            continue;
          }
          override_plan = plan;
          break;
        case UnpackPlan::Kind::kNoFix:
          w.out->set_verdict("no_fix");
          w.out->set_fix_path("none");
          w.verify = false;
          continue;
      }
      plans.emplace_back(&w, plan);
    }
    // Apply the fixes: registry lines (global), then one override for the loader.
    Progress("fix");
    bool changed_registry = false;
    for (const auto& cls : removes) {
      if (!registry_) break;
      if (registry_->Remove(cls).ok()) {
        changed_registry = true;
        auto* op = result_.add_registry_ops();
        op->set_kind(v1::RegistryOp::REMOVE);
        op->set_cls(cls);
      }
    }
    for (const auto& [cls, attr] : adds) {
      if (!registry_) break;
      absl::Status st = registry_->Add(cls, attr);
      if (!st.ok()) {
        for (auto& [w, plan] : plans) {
          if (plan.cls == cls) {
            Review(*w, util::StrCat("registry line refused: ", util::MessageOf(st)));
            w->verify = false;
          }
        }
        continue;
      }
      changed_registry = true;
      auto* op = result_.add_registry_ops();
      op->set_kind(v1::RegistryOp::ADD);
      op->set_cls(cls);
      op->set_attr(attr);
    }
    if (changed_registry) {
      if (auto st = WriteRegistry(); !st.ok()) return st;
    }
    if (override_plan) {
      std::string text = loader_text_;
      if (override_plan->needs_torch) text = EnsureImportTorch(text);
      auto added =
          AddMethodToModelLoader(text, "unpack_forward_output", RenderOverride(*override_plan));
      if (!added.ok()) {
        for (auto& [w, plan] : plans) {
          if (plan.kind != UnpackPlan::Kind::kRegistryAdd) {
            Review(*w, util::StrCat("override not written: ", util::MessageOf(added.status())));
            w->verify = false;
          }
        }
      } else {
        loader_text_ = *added;
        if (auto st = WriteLoader(); !st.ok()) return st;
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
          w->out->set_fix_path(
              plan.kind == UnpackPlan::Kind::kOverride ? "override" : "registry_remove+override");
          w->out->set_why_not_other(plan.why_not_other);
          w->out->set_probe_finding(util::StrCat(w->out->probe_finding(), "; override returns ",
                                                 plan.expr, ": ", plan.selected));
          break;
        default:
          break;
      }
      if (!w->fixed) continue;
      Progress("re-probe", w->entry->key());
      auto docs = ctx_.tools->Probe(w->entry->key(), "structure");
      if (!docs.ok() || docs->empty()) {
        if (!docs.ok() && !absl::IsNotFound(docs.status()) &&
            !absl::IsDeadlineExceeded(docs.status())) {
          return docs.status();
        }
        Review(*w, "no probe result after the fix");
        continue;
      }
      if (!docs->front().unpacked_ok) {
        Review(*w, util::StrCat("after the fix unpack_forward_output still fails: ",
                                docs->front().unpacked_error));
        w->verify = false;
        w->out->set_verdict("fix_failed");
      }
    }
    return absl::OkStatus();
  }

  // docs/playbooks.md, "dtype_bfloat16".
  absl::Status Dtype() {
    std::vector<Work*> proceeding;
    for (auto& w : work_) {
      if (Cancelled()) return absl::CancelledError("cancelled");
      Progress("probe", w.entry->key());
      auto docs = ctx_.tools->Probe(w.entry->key(), "dtype");
      if (!docs.ok() || docs->size() < 2) {
        if (!docs.ok() && !absl::IsNotFound(docs.status()) &&
            !absl::IsDeadlineExceeded(docs.status())) {
          return docs.status();
        }
        Review(w, util::StrCat("no CPU probe result: ",
                               docs.ok() ? "incomplete" : util::MessageOf(docs.status())));
        w.out->set_verdict("no_evidence");
        w.verify = false;
        continue;
      }
      w.probe = (*docs)[0];
      w.probe32 = (*docs)[1];
      w.out->set_output_class(!w.probe32->output_class.empty() ? w.probe32->output_class
                                                               : w.probe->output_class);
      const DtypeRow row = ClassifyDtype(*w.probe, *w.probe32);
      const std::string e16 = w.probe->error ? w.probe->error->Line() : "OK";
      const std::string e32 = w.probe32->error ? w.probe32->error->Line() : "OK";
      w.out->set_probe_finding(
          util::StrCat("BFLOAT16: ", w.probe->ok ? "OK" : "FAILED - " + e16,
                       "; FLOAT32: ", w.probe32->ok ? "OK" : "FAILED - " + e32));
      switch (row) {
        case DtypeRow::kProceed:
          proceeding.push_back(&w);
          break;
        case DtypeRow::kEscalate:
          Review(w, util::StrCat("escalate: float32 fails too (", e32, "); bfloat16: ", e16));
          break;
        case DtypeRow::kNotReproduced:
          Review(w,
                 "the failure did not reproduce on CPU (the bfloat16 phase passed): re-run "
                 "pytest first; nothing edited");
          break;
        case DtypeRow::kOtherError:
          Review(w, util::StrCat("the bfloat16 error has no dtype signature (", e16,
                                 "): another playbook applies"));
          break;
        case DtypeRow::kNeedsUnpack:
          Review(w,
                 "unpack_forward_output fails for this model: run the unpack_forward_output "
                 "playbook first");
          break;
      }
      if (row != DtypeRow::kProceed) {
        w.out->set_verdict(std::string(DtypeRowName(row)));
        w.out->set_fix_path("none");
        w.verify = false;
      }
    }
    if (proceeding.empty()) return absl::OkStatus();
    const bool cross = std::any_of(proceeding.begin(), proceeding.end(),
                                   [](Work* w) { return w->entry->flavor() == "cross_dtype"; });
    if (!cross) {
      for (Work* w : proceeding) {
        w->out->set_fix_path("none");
        w->out->set_why_not_other(
            "op not implemented for BFloat16: no loader edit can add a kernel; xfail with the "
            "verbatim error");
      }
      return absl::OkStatus();
    }
    // Cross-dtype: the float inputs that stayed float32 in the bfloat16 phase.
    std::vector<std::string> offending;
    for (Work* w : proceeding) {
      for (const auto& in : w->probe->inputs) {
        if (in.dtype == "torch.float32" &&
            std::find(offending.begin(), offending.end(), in.name) == offending.end()) {
          offending.push_back(in.name);
        }
      }
    }
    Progress("fix");
    auto fix = FindDtypeFix(loader_text_, offending);
    if (!fix) {
      for (Work* w : proceeding) {
        w->out->set_fix_path("none");
        w->out->set_why_not_other(
            util::StrCat("no fix site in the loader for the float32 input(s) ",
                         offending.empty() ? "(none reported)" : util::StrJoin(offending, ", "),
                         ": xfail with the verbatim error"));
      }
      return absl::OkStatus();
    }
    const std::string before = loader_text_;
    loader_text_ = fix->text;
    if (auto st = WriteLoader(); !st.ok()) return st;
    bool revert = false;
    for (Work* w : proceeding) {
      Progress("re-probe", w->entry->key());
      auto docs = ctx_.tools->Probe(w->entry->key(), "dtype");
      if (!docs.ok() || docs->size() < 2) {
        if (!docs.ok() && !absl::IsNotFound(docs.status()) &&
            !absl::IsDeadlineExceeded(docs.status())) {
          return docs.status();
        }
        Review(*w, "no probe result after the loader fix");
        continue;
      }
      const ProbeDoc& b = (*docs)[0];
      const ProbeDoc& f = (*docs)[1];
      w->out->set_fix_path("loader_dtype");
      if (b.ok && f.ok) {
        w->fixed = true;
        w->out->set_probe_finding(util::StrCat(w->out->probe_finding(), "; after ",
                                               fix->description, ": BFLOAT16 OK, FLOAT32 OK"));
        w->out->set_why_not_other(
            "a float32 tensor built without dtype_override: the one-line "
            "loader fix makes the inputs bfloat16");
      } else if (!b.ok && b.error && HasBf16Signature(b.error->message) &&
                 !(b.error->message.find("not implemented for 'BFloat16'") != std::string::npos)) {
        revert = true;
        Review(*w, util::StrCat("the loader fix did not remove the dtype mismatch (",
                                b.error->Line(), "): reverted, xfail only"));
      } else {
        w->fixed = true;
        w->out->set_probe_finding(util::StrCat(
            w->out->probe_finding(), "; after ", fix->description, ": BFLOAT16 FAILED - ",
            b.error ? b.error->Line() : "?", " (a new CPU error; the fix is kept)"));
        w->out->set_why_not_other(
            "the fix removed the dtype mismatch; the new CPU error is the "
            "reason now");
      }
    }
    if (revert) {
      loader_text_ = before;
      if (auto st = WriteLoader(); !st.ok()) return st;
      for (Work* w : proceeding) {
        w->fixed = false;
        w->out->set_fix_path("none");
      }
      return absl::OkStatus();
    }
    // A loader fix changes inference too: a KFX inference entry with a bfloat16 reason is stale.
    for (Work* w : proceeding) {
      if (!w->inference_key.empty() && w->inference_status == "KNOWN_FAILURE_XFAIL" &&
          HasBf16Signature(w->inference_reason)) {
        Review(*w, util::StrCat("inference entry ", w->inference_key,
                                " is KNOWN_FAILURE_XFAIL with a bfloat16 reason and may be stale "
                                "after the loader fix: re-triage inference (not edited)"));
      }
    }
    return absl::OkStatus();
  }

  void Decide(Work& w, const junit::TestCase* tc, const std::string& log, int signal) {
    junit::VerifyContext vc;
    vc.forced_skip = w.status == "NOT_SUPPORTED_SKIP";
    vc.old_reason = w.reason;
    vc.log_text = log;
    vc.exit_signal = signal;
    junit::Finding f = junit::Classify(tc, vc);
    junit::Decision d = junit::Decide(f);
    w.out->set_verdict(std::string(junit::VerdictName(f.verdict)));
    w.out->set_stage(f.stage);
    w.out->set_reason(f.reason);
    for (const auto& r : f.review) Review(w, r);
    if (d.change) {
      w.out->set_changed(true);
      *w.out->mutable_edit() = EditFor(d, *w.entry, w.markers);
    }
  }

  absl::Status Verify() {
    std::vector<Work*> todo;
    for (auto& w : work_) {
      if (w.verify) todo.push_back(&w);
    }
    if (todo.empty()) return absl::OkStatus();
    if (Cancelled()) return absl::CancelledError("cancelled");
    Progress("verify");
    std::vector<std::string> keys;
    for (Work* w : todo) keys.push_back(w->entry->key());
    auto run = ctx_.tools->Pytest(keys, "verify");
    if (!run.ok()) return run.status();
    struct Answer {
      junit::TestCase tc;
      std::string log;
      int signal = 0;
    };
    std::map<std::string, Answer> cases;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      cases[keys[i]] = {run->cases[i], run->log, run->signal};
    }
    // A process crash leaves no testcase for the rest of the run: run those alone.
    std::vector<std::string> missing;
    for (const auto& k : keys) {
      if (cases[k].tc.outcome == junit::Outcome::kMissing) missing.push_back(k);
    }
    if (!missing.empty() && keys.size() > 1) {
      for (const auto& k : missing) {
        if (Cancelled()) return absl::CancelledError("cancelled");
        Progress("verify-alone", k);
        auto alone = ctx_.tools->Pytest({k}, "verify-alone");
        if (!alone.ok()) return alone.status();
        cases[k] = {alone->cases[0], alone->log, alone->signal};
      }
    }
    for (Work* w : todo) {
      const Answer& a = cases[w->entry->key()];
      Decide(*w, a.tc.outcome == junit::Outcome::kMissing ? nullptr : &a.tc, a.log, a.signal);
    }
    // The inference entry of the first variant, for information only.
    for (Work* w : todo) {
      if (w->inference_key.empty()) continue;
      Progress("inference", w->inference_key);
      auto inf = ctx_.tools->Pytest({w->inference_key}, "inference");
      if (!inf.ok() || inf->cases.empty()) break;
      junit::VerifyContext vc;
      vc.forced_skip = w->inference_status == "NOT_SUPPORTED_SKIP";
      vc.old_reason = w->inference_reason;
      vc.log_text = inf->log;
      const auto& tc = inf->cases[0];
      junit::Finding f =
          junit::Classify(tc.outcome == junit::Outcome::kMissing ? nullptr : &tc, vc);
      std::string summary = util::StrCat(w->inference_key, ": ", junit::VerdictName(f.verdict),
                                         f.reason.empty() ? "" : util::StrCat(" (", f.reason, ")"));
      w->out->set_inference_outcome(summary);
      if (w->inference_status == "EXPECTED_PASSING" && f.verdict != junit::Verdict::kPass &&
          f.verdict != junit::Verdict::kNoEvidence) {
        Review(*w, util::StrCat("inference regression: ", summary));
      }
      break;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<v1::ShardResult> Finish() {
    if (loader_text_ != loader_original_) {
      std::string rel = spec_.loader();
      if (std::string_view(rel).starts_with(kForgePrefix)) rel.erase(0, kForgePrefix.size());
      auto* fe = result_.add_file_edits();
      fe->set_repo("tt_forge_models");
      fe->set_path(rel);
      fe->set_diff(diff::UnifiedDiff(rel, loader_original_, loader_text_));
    }
    // Evidence recorded by the tools, and which of it concerns each entry.
    for (const auto& [name, path] : ctx_.tools->Evidence()) {
      const bool log = std::string_view(name).starts_with("logs/");
      auto content = util::ReadFile(path, log ? (64 << 20) : (8 << 20));
      if (!content.ok()) continue;
      v1::Evidence* ev = result_.add_evidence();
      ev->set_name(name);
      ev->set_kind(log ? "log" : std::string_view(name).starts_with("junit/") ? "junit" : "probe");
      // Logs can be long: keep their end, where the error is.
      if (log && content->size() > (256u << 10)) content->erase(0, content->size() - (256u << 10));
      ev->set_content(*content);
      for (auto& w : work_) {
        const std::string k = KeyFileName(w.entry->key());
        if (name.find(k) != std::string::npos || name.find(w.entry->key()) != std::string::npos ||
            std::string_view(name).starts_with("junit/")) {
          w.out->add_evidence(name);
        }
      }
    }
    return result_;
  }

  PlaybookContext& ctx_;
  const v1::ShardSpec& spec_;
  v1::ShardResult result_;
  std::vector<Work> work_;
  std::filesystem::path loader_path_;
  std::string loader_original_;
  std::string loader_text_;
  std::filesystem::path registry_path_;
  std::optional<registry::RegistryFile> registry_;
};

}  // namespace

absl::StatusOr<v1::ShardResult> RunPlaybook(PlaybookContext& ctx) {
  Runner runner(ctx);
  return runner.Run();
}

}  // namespace triage::playbooks
