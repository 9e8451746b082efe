#include "agent/playbooks/missing_inputs/missing_inputs.h"

#include <algorithm>
#include <map>

#include "agent/playbooks/shard_run.h"
#include "common/util/strings.h"

namespace triage::playbooks::missing_inputs {
namespace {

std::string PhaseLine(const ProbeDoc& d) {
  return d.ok ? "OK" : util::StrCat("FAILED - ", d.error ? d.error->Line() : "?");
}

// "TRAIN: ...; EVAL: ...; inputs: dict{input_ids, attention_mask}"
std::string Finding(const ProbeDoc& train, const ProbeDoc& eval) {
  std::string s = util::StrCat("TRAIN: ", PhaseLine(train), "; EVAL: ", PhaseLine(eval));
  if (!train.container.empty()) {
    std::vector<std::string> names;
    for (const auto& in : train.inputs) names.push_back(in.name);
    util::StrAppend(&s, "; load_inputs returns ", train.container, " [", util::StrJoin(names, ", "),
                    "]");
  }
  if (train.has_binding && !train.binding_ok && !train.binding_error.empty()) {
    util::StrAppend(&s, " (does not bind to forward: ", train.binding_error, ")");
  }
  return s;
}

// The requirements files next to the loader and what the runner would do with them.
std::string RequirementsNote(const ProbeDoc& train) {
  if (train.requirements.empty()) return "no requirements file next to the loader";
  std::vector<std::string> files;
  for (const auto& r : train.requirements) {
    files.push_back(util::StrCat(r.file, " (", PipFlagsFor(r.file), "; ",
                                 r.packages.empty() ? "empty" : util::StrJoin(r.packages, ", "),
                                 ")"));
  }
  return util::StrCat("requirements next to the loader: ", util::StrJoin(files, "; "));
}

bool Failing(const std::string& status) {
  return status == "KNOWN_FAILURE_XFAIL" || status == "NOT_SUPPORTED_SKIP";
}

class MissingInputs : public Playbook {
 public:
  const CatalogEntry& Catalog() const override { return kCatalog; }
  absl::Status ProbeAndFix(ShardRun& run) const override;

 private:
  // The edit for the entries of one fixable sub-pattern, re-probed; reverted when it does not
  // remove the error or breaks the eval forward.
  absl::Status Fix(ShardRun& run, SubPattern pattern, const std::vector<EntryWork*>& group) const;
};

// The next playbook for an entry whose probe shows another playbook's failure.
void StopFor(EntryWork& w, SubPattern p) {
  ShardRun::Stop(w, std::string(SubPatternName(p)), v1::EntryOutcome::NEEDS_PLAYBOOK,
                 p == SubPattern::kNeedsUnpack ? "unpack_forward_output" : "dtype_bfloat16");
}

}  // namespace

// docs/playbooks.md, "missing_inputs".
absl::Status MissingInputs::ProbeAndFix(ShardRun& run) const {
  // Fixable entries by sub-pattern, in the order first seen.
  std::vector<std::pair<SubPattern, std::vector<EntryWork*>>> groups;
  for (auto& w : run.entries()) {
    if (run.Cancelled()) return absl::CancelledError("cancelled");
    run.Progress("probe", w.entry->key());
    auto docs = run.ProbeOrStop(w, "inputs");
    if (!docs.ok()) return docs.status();
    if (!*docs) continue;
    w.probe = (**docs)[0];
    w.probe32 = (**docs)[1];  // the eval phase
    const ProbeDoc& train = *w.probe;
    const ProbeDoc& eval = *w.probe32;
    if (!train.output_class.empty()) w.out->set_output_class(train.output_class);
    w.out->set_probe_finding(Finding(train, eval));
    const SubPattern p = ClassifyInputs(train, eval);
    w.out->set_fix_path("none");
    switch (p) {
      case SubPattern::kMissingPackage: {
        const std::string module =
            !train.error->module.empty() ? train.error->module : train.error->Line();
        w.out->set_why_not_other(util::StrCat(
            "the module ", module, " is missing on this machine and an agent installs nothing"));
        run.Review(
            w, util::StrCat("missing package: ", train.error->Line(), "; ", RequirementsNote(train),
                            ". Decide on a machine with the package index (install, then "
                            "re-triage); the YAML is left as it is"));
        run.Stop(w, std::string(SubPatternName(p)));
        break;
      }
      case SubPattern::kNotReproduced:
        w.out->set_why_not_other(
            "the training forward and unpack_forward_output ran on CPU: the reason is stale; "
            "verified as is");
        break;
      case SubPattern::kNeedsUnpack:
      case SubPattern::kNeedsDtype:
        StopFor(w, p);
        break;
      case SubPattern::kTargetsNoRule:
        run.Review(w, util::StrCat("an assert in a forward that takes targets (",
                                   train.error->Line(), ", model ", train.forward->model_class,
                                   "), of no family whose targets a loader can build: nothing "
                                   "edited; verified as is"));
        break;
      case SubPattern::kMismatched:
        run.Review(w, util::StrCat("the training error matches no missing-inputs sub-pattern (",
                                   train.error ? train.error->Line() : "?",
                                   "): nothing edited; verified as is"));
        break;
      default: {
        auto it =
            std::find_if(groups.begin(), groups.end(), [p](const auto& g) { return g.first == p; });
        if (it == groups.end()) {
          groups.push_back({p, {}});
          it = groups.end() - 1;
        }
        it->second.push_back(&w);
        break;
      }
    }
  }
  if (groups.empty()) return absl::OkStatus();
  // One loader, one edit: the first sub-pattern seen is fixed; entries of another one are
  // verified as they are and flagged.
  for (std::size_t g = 1; g < groups.size(); ++g) {
    for (EntryWork* w : groups[g].second) {
      run.Review(*w,
                 util::StrCat("sub-pattern ", SubPatternName(groups[g].first),
                              " in a loader whose shard fixes ", SubPatternName(groups[0].first),
                              " first: nothing edited for it; verified as is"));
    }
  }
  return Fix(run, groups[0].first, groups[0].second);
}

absl::Status MissingInputs::Fix(ShardRun& run, SubPattern pattern,
                                const std::vector<EntryWork*>& group) const {
  EditRequest req;
  req.pattern = pattern;
  req.train = &*group.front()->probe;
  req.change_default = true;
  for (EntryWork* w : group) {
    if (!w->probe->variant_member.empty() &&
        std::find(req.variant_members.begin(), req.variant_members.end(),
                  w->probe->variant_member) == req.variant_members.end()) {
      req.variant_members.push_back(w->probe->variant_member);
    }
    // A variant whose inference passes keeps its inference input: the change is conditional.
    if (w->inference_key.empty() || !Failing(w->inference_status)) req.change_default = false;
  }
  run.Progress("fix");
  auto edit = MakeInputsEdit(run.loader_text(), req);
  if (!edit.ok()) {
    for (EntryWork* w : group) {
      w->out->set_why_not_other(util::StrCat(SubPatternName(pattern), ": no loader edit applies"));
      run.Review(*w, util::StrCat("no loader edit for ", SubPatternName(pattern), ": ",
                                  util::MessageOf(edit.status()), "; verified as is"));
    }
    return absl::OkStatus();
  }
  const std::string before = run.loader_text();
  run.loader_text() = edit->text;
  if (auto st = run.WriteLoader(); !st.ok()) return st;
  // Re-probe: the edit must remove the error and keep the eval forward running.
  struct After {
    EntryWork* w;
    SubPattern next;
  };
  std::vector<After> after;
  std::vector<std::string> revert_why;
  for (EntryWork* w : group) {
    run.Progress("re-probe", w->entry->key());
    auto docs = run.tools().Probe(w->entry->key(), "inputs");
    if (!docs.ok() || docs->size() < 2) {
      if (!docs.ok() && !absl::IsNotFound(docs.status()) &&
          !absl::IsDeadlineExceeded(docs.status())) {
        return docs.status();
      }
      revert_why.push_back(util::StrCat(w->entry->key(), ": no probe result after the edit"));
      continue;
    }
    const ProbeDoc& train = (*docs)[0];
    const ProbeDoc& eval = (*docs)[1];
    const SubPattern next = ClassifyInputs(train, eval);
    w->out->set_probe_finding(util::StrCat(w->out->probe_finding(), "; after ", edit->description,
                                           ": ", Finding(train, eval)));
    if (next == pattern) {
      revert_why.push_back(util::StrCat(w->entry->key(), ": the edit did not remove the error (",
                                        train.error ? train.error->Line() : "?", ")"));
    } else if (w->probe32->ok && !eval.ok) {
      revert_why.push_back(util::StrCat(w->entry->key(), ": the edit breaks the eval forward (",
                                        eval.error ? eval.error->Line() : "?", ")"));
    }
    if (!train.output_class.empty()) w->out->set_output_class(train.output_class);
    after.push_back({w, next});
  }
  if (!revert_why.empty()) {
    run.loader_text() = before;
    if (auto st = run.WriteLoader(); !st.ok()) return st;
    for (EntryWork* w : group) {
      w->out->set_why_not_other(
          util::StrCat(SubPatternName(pattern), ": the loader edit was reverted"));
      run.Review(*w, util::StrCat("reverted ", edit->description, ": ",
                                  util::StrJoin(revert_why, "; "), "; verified as is"));
    }
    return absl::OkStatus();
  }
  for (const After& a : after) {
    EntryWork& w = *a.w;
    w.fixed = true;
    w.out->set_fix_path("loader_inputs");
    w.out->set_why_not_other(util::StrCat(SubPatternName(pattern), ": ", edit->description));
    for (const auto& note : edit->review) run.Review(w, note);
    if (a.next == SubPattern::kNeedsUnpack || a.next == SubPattern::kNeedsDtype) {
      StopFor(w, a.next);  // the cascade: the next playbook runs on the edited loader
    }
    // load_inputs serves inference too: a failing inference entry may be stale now.
    ShardRun::FlagStaleInference(w, "the load_inputs edit");
  }
  return absl::OkStatus();
}

std::unique_ptr<Playbook> Make() { return std::make_unique<MissingInputs>(); }

}  // namespace triage::playbooks::missing_inputs
