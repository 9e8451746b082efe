#include "agent/playbooks/shard_run.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>

#include "agent/playbooks/registry.h"
#include "common/diff/unified_diff.h"
#include "common/inventory/document.h"
#include "common/inventory/key.h"
#include "common/inventory/key_grammar.h"
#include "common/util/file.h"
#include "common/util/strings.h"

namespace triage::playbooks {
namespace {

using inventory::kForgeModelsPrefix;

// A chained playbook's fix path after the earlier ones' ("loader_dtype" then "registry":
// "loader_dtype+registry"); "none" only when no playbook of the chain fixed anything.
std::string ChainFixPath(const std::string& earlier, const std::string& now) {
  std::vector<std::string> parts;
  for (const std::string* p : {&earlier, &now}) {
    if (!p->empty() && *p != "none") parts.push_back(*p);
  }
  if (!parts.empty()) return util::StrJoin(parts, "+");
  return earlier.empty() && now.empty() ? "" : "none";
}

// A chained playbook's finding after the earlier ones': both, the later named.
std::string ChainText(const std::string& earlier, std::string_view playbook,
                      const std::string& now) {
  if (now.empty()) return earlier;
  if (earlier.empty()) return now;
  return util::StrCat(earlier, "; then ", playbook, ": ", now);
}

// A testcase's time as a duration: 0 (not measured) without a testcase, and for a time no run
// can take (negative, NaN or infinite in a hand-written or damaged file).
double MeasuredSeconds(const junit::TestCase* tc) {
  if (tc == nullptr || !std::isfinite(tc->time_seconds) || tc->time_seconds < 0) return 0;
  return tc->time_seconds;
}

// Where the informational inference entry of a training entry's loader variant would be: the
// YAML file and key ("..._training_..." becomes "..._inference_...", a key's "-training" suffix
// "-inference"); nullopt for an entry whose file is not a training one.
std::optional<std::pair<std::string, std::string>> InferenceVariant(std::string file,
                                                                    std::string key) {
  const auto at = file.find("_training_");
  if (at == std::string::npos) return std::nullopt;
  file.replace(at, 10, "_inference_");
  if (key.ends_with("-training")) key = key.substr(0, key.size() - 8) + "inference";
  return std::make_pair(std::move(file), std::move(key));
}

// The workspace's YAML documents, each read once.
class YamlFiles {
 public:
  explicit YamlFiles(std::filesystem::path workspace) : workspace_(std::move(workspace)) {}
  const inventory::Document* Get(const std::string& file) {
    auto it = docs_.find(file);
    if (it == docs_.end()) {
      if (!grammar_) {  // the workspace's runner says how its keys are made
        grammar_ = inventory::GrammarOrDefault(
            util::ReadFile(workspace_ / inventory::kRunnerPath, inventory::kDefaultMaxYamlBytes));
      }
      auto text = util::ReadFile(workspace_ / file, inventory::kDefaultMaxYamlBytes);
      it = docs_
               .emplace(file, text.ok() ? std::optional(inventory::Document::Parse(
                                              file, *text, {.grammar = &*grammar_}))
                                        : std::nullopt)
               .first;
    }
    return it->second ? &*it->second : nullptr;
  }

 private:
  std::filesystem::path workspace_;
  std::optional<inventory::KeyGrammar> grammar_;
  std::map<std::string, std::optional<inventory::Document>> docs_;
};

bool Ran(const v1::EntryOutcome& o, std::string_view playbook) {
  return std::find(o.playbooks().begin(), o.playbooks().end(), playbook) != o.playbooks().end();
}

}  // namespace

ShardRun::ShardRun(PlaybookContext& ctx, const Playbook& playbook)
    : ctx_(ctx), spec_(*ctx.spec), playbook_(playbook) {}

absl::StatusOr<v1::ShardResult> ShardRun::Run() {
  if (auto st = Init(); !st.ok()) return st;
  const PhasePlan plan = playbook_.Plan(spec_.phase());
  if (plan.probe_and_fix) {
    if (auto st = ProbeAndFix(); !st.ok()) return st;
  }
  if (!plan.verify) {
    // Verified by a later phase (docs/playbooks.md, "Phases").
    for (auto& w : work_) {
      if (!w.verify) continue;
      w.out->set_verdict("ready");
      w.out->set_disposition(v1::EntryOutcome::VERIFY);
      w.out->set_old_reason_stale(OldReasonStale(w));  // for the VERIFY phase's decision
    }
  } else if (auto st = Verify(); !st.ok()) {
    return st;
  }
  return Finish();
}

bool ShardRun::Cancelled() const { return ctx_.cancelled && ctx_.cancelled(); }

void ShardRun::Progress(const std::string& step, const std::string& entry) {
  if (ctx_.progress) ctx_.progress(step, entry);
}

void ShardRun::Review(EntryWork& w, const std::string& note) { w.out->add_review(note); }

void ShardRun::FlagStaleInference(EntryWork& w, std::string_view fix, std::string_view why) {
  if (w.inference_key.empty() ||
      (w.inference_status != "KNOWN_FAILURE_XFAIL" && w.inference_status != "NOT_SUPPORTED_SKIP")) {
    return;
  }
  Review(w, util::StrCat("inference entry ", w.inference_key, " is ", w.inference_status,
                         why.empty() ? "" : " ", why,
                         w.inference_reason.empty() ? "" : " (" + w.inference_reason + ")",
                         " and may be stale after ", fix, ": re-triage inference (not edited)"));
}

void ShardRun::Stop(EntryWork& w, const std::string& verdict,
                    v1::EntryOutcome::Disposition disposition, const std::string& needs_playbook) {
  if (!verdict.empty()) w.out->set_verdict(verdict);
  w.out->set_disposition(disposition);
  if (!needs_playbook.empty()) w.out->set_needs_playbook(needs_playbook);
  w.verify = false;
}

absl::StatusOr<std::optional<std::vector<ProbeDoc>>> ShardRun::ProbeOrStop(
    EntryWork& w, const std::string& mode) {
  auto docs = ctx_.tools->Probe(w.entry->key(), mode);
  if (docs.ok() && docs->size() >= ProbePhases(mode).size()) return std::move(*docs);
  if (!docs.ok() && !absl::IsNotFound(docs.status()) && !absl::IsDeadlineExceeded(docs.status())) {
    return docs.status();
  }
  Review(w, util::StrCat("no CPU probe result: ",
                         docs.ok() ? "incomplete" : util::MessageOf(docs.status())));
  Stop(w, "no_evidence");
  return std::nullopt;
}

absl::Status ShardRun::WriteLoader() { return util::WriteFileAtomic(loader_path_, loader_text_); }

absl::Status ShardRun::Init() {
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
  YamlFiles yaml(ctx_.workspace);
  for (const auto& e : spec_.entries()) {
    EntryWork w;
    w.entry = &e;
    w.out = result_.add_entries();
    w.out->set_key(e.key());
    w.out->set_file(e.file());
    w.out->set_arch(spec_.arch());
    w.out->set_flavor(e.flavor());
    w.status = e.status();
    w.reason = e.reason();
    if (const auto* doc = yaml.Get(e.file())) {
      if (const auto* entry = doc->Find(e.key())) {
        w.status = std::string(entry->Status());
        w.reason = std::string(entry->StringField("reason"));
        if (const auto* m = entry->Field("markers"); m != nullptr && m->is_list()) {
          for (const auto& item : m->list) w.markers.push_back(item.string);
        }
      }
    }
    // The informational inference entry of the same loader variant.
    if (auto variant = InferenceVariant(e.file(), e.key())) {
      const auto& [file, key] = *variant;
      if (const auto* doc = yaml.Get(file)) {
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

absl::Status ShardRun::ProbeAndFix() {
  for (auto& w : work_) w.out->add_playbooks(std::string(playbook_.Name()));
  if (auto st = playbook_.ProbeAndFix(*this); !st.ok()) return st;
  // Chaining (docs/playbooks.md, "Chaining"): an entry stopped for another playbook that this
  // agent runs goes on with it, on the same loader and workspace, until no stop names one that
  // can run. A playbook already run on an entry is not run on it again (no cycles).
  std::vector<std::size_t> pending(work_.size());
  std::iota(pending.begin(), pending.end(), 0);
  for (;;) {
    const Playbook* next = nullptr;
    std::vector<std::size_t> now, later;
    for (std::size_t i : pending) {
      EntryWork& w = work_[i];
      const std::string& name = w.out->needs_playbook();
      if (w.out->disposition() != v1::EntryOutcome::NEEDS_PLAYBOOK || name.empty()) continue;
      const Playbook* p = ChainTarget(name);
      if (p == nullptr) {
        Review(w,
               util::StrCat("needs the ", name, " playbook first, which this agent does not run"));
        continue;
      }
      if (Ran(*w.out, p->Name())) {
        Review(w, util::StrCat("needs the ", name,
                               " playbook, which already ran on it in this shard: not run again"));
        continue;
      }
      if (next == nullptr) next = p;
      (p->Name() == next->Name() ? now : later).push_back(i);
    }
    if (next == nullptr) return absl::OkStatus();
    if (Cancelled()) return absl::CancelledError("cancelled");
    if (auto st = RunChained(*next, now); !st.ok()) return st;
    pending = std::move(later);
    pending.insert(pending.end(), now.begin(), now.end());
    std::sort(pending.begin(), pending.end());
  }
}

const Playbook* ShardRun::ChainTarget(std::string_view name) const {
  return ctx_.chain ? ctx_.chain(name) : FindPlaybook(name);
}

absl::Status ShardRun::RunChained(const Playbook& playbook, const std::vector<std::size_t>& at) {
  // What the earlier playbooks found and fixed; the chained one starts from a lifted stop.
  struct Earlier {
    std::string fix_path, probe_finding, why_not_other, output_class;
    bool fixed = false;
  };
  std::vector<Earlier> earlier;
  chained_.clear();
  for (std::size_t i : at) {
    EntryWork w = work_[i];
    v1::EntryOutcome& o = *w.out;
    earlier.push_back(
        {o.fix_path(), o.probe_finding(), o.why_not_other(), o.output_class(), w.fixed});
    o.clear_verdict();
    o.clear_disposition();
    o.clear_needs_playbook();
    o.clear_fix_path();
    o.clear_probe_finding();
    o.clear_why_not_other();
    o.clear_output_class();
    o.add_playbooks(std::string(playbook.Name()));
    w.verify = true;
    w.fixed = false;
    w.probe.reset();
    w.probe32.reset();
    chained_.push_back(std::move(w));
  }
  Progress(util::StrCat("chain ", playbook.Name()));
  entries_ = &chained_;
  absl::Status st = playbook.ProbeAndFix(*this);
  entries_ = &work_;
  for (std::size_t k = 0; k < at.size(); ++k) {
    EntryWork& w = work_[at[k]];
    w = std::move(chained_[k]);
    const Earlier& e = earlier[k];
    v1::EntryOutcome& o = *w.out;
    w.fixed = w.fixed || e.fixed;
    o.set_fix_path(ChainFixPath(e.fix_path, o.fix_path()));
    o.set_probe_finding(ChainText(e.probe_finding, playbook.Name(), o.probe_finding()));
    o.set_why_not_other(ChainText(e.why_not_other, playbook.Name(), o.why_not_other()));
    // A later playbook that did not see the output (its probe failed before it) leaves the
    // class an earlier one saw: registry-global waves key on it.
    if (o.output_class().empty()) o.set_output_class(e.output_class);
  }
  chained_.clear();
  return st;
}

absl::Status ShardRun::WriteRegistry() {
  if (!registry_) return absl::OkStatus();
  return util::WriteFileAtomic(registry_path_, registry_->Text());
}

absl::Status ShardRun::Verify() {
  std::vector<EntryWork*> todo;
  for (auto& w : work_) {
    if (w.verify) todo.push_back(&w);
  }
  if (todo.empty()) return absl::OkStatus();
  if (Cancelled()) return absl::CancelledError("cancelled");
  Progress("verify");
  std::vector<std::string> keys;
  for (EntryWork* w : todo) keys.push_back(w->entry->key());
  // The inference entry of the first variant that has one, for information only, runs last in
  // the same session: one device session per shard, not two. Its outcome never decides an entry.
  EntryWork* inference = nullptr;
  for (EntryWork* w : todo) {
    if (!w->inference_key.empty()) {
      inference = w;
      break;
    }
  }
  std::vector<std::string> session = keys;
  if (inference != nullptr &&
      std::find(keys.begin(), keys.end(), inference->inference_key) == keys.end()) {
    session.push_back(inference->inference_key);
  }
  auto run = ctx_.tools->Pytest(session, "verify");
  if (!run.ok()) return run.status();
  // The runner itself did not run (docs/farm.md, "The failure budget"): the attempt fails, and
  // no entry is decided from a session that never reached its model.
  if (std::string why = RunnerFailure(*run); !why.empty()) return absl::UnavailableError(why);
  struct Answer {
    junit::TestCase tc;
    std::string log;
    int signal = 0;
    bool shared = false;
  };
  auto shared = [](const PytestRun& r, std::size_t asked) {
    return std::max(r.session_tests, asked) > 1;
  };
  std::map<std::string, Answer> cases;
  for (std::size_t i = 0; i < session.size() && i < run->cases.size(); ++i) {
    cases[session[i]] = {run->cases[i], run->log, run->signal, shared(*run, session.size())};
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
      if (std::string why = RunnerFailure(*alone); !why.empty()) {
        return absl::UnavailableError(why);
      }
      cases[k] = {alone->cases[0], alone->log, alone->signal, shared(*alone, 1)};
    }
  }
  for (EntryWork* w : todo) {
    const Answer& a = cases[w->entry->key()];
    Verification v;
    v.testcase = a.tc.outcome == junit::Outcome::kMissing ? nullptr : &a.tc;
    v.log = a.log;
    v.signal = a.signal;
    v.log_shared = a.shared;
    playbook_.Decide(*this, *w, v);
    // The time of the run whose testcase decided (the alone run after a crash), for the next
    // sweep's planning (.test_durations); set here so that no playbook's Decide can drop it.
    w->out->set_duration_seconds(MeasuredSeconds(v.testcase));
  }
  if (inference == nullptr) return absl::OkStatus();
  EntryWork* w = inference;
  // No testcase from the session (it crashed, hung, or ended before the inference test): the
  // inference entry runs alone, so that its outcome is its own and not the session's.
  auto found = cases.find(w->inference_key);
  std::optional<Answer> inf;
  if (found != cases.end() && found->second.tc.outcome != junit::Outcome::kMissing) {
    inf = found->second;
  } else {
    if (Cancelled()) return absl::CancelledError("cancelled");
    Progress("inference", w->inference_key);
    auto alone = ctx_.tools->Pytest({w->inference_key}, "inference");
    if (!alone.ok() || alone->cases.empty()) return absl::OkStatus();
    inf = Answer{alone->cases[0], alone->log, alone->signal, shared(*alone, 1)};
  }
  junit::VerifyContext vc;
  vc.forced_skip = w->inference_status == "NOT_SUPPORTED_SKIP";
  vc.old_reason = w->inference_reason;
  vc.log_text = inf->log;
  vc.log_shared = inf->shared;
  const junit::TestCase& tc = inf->tc;
  junit::Finding f = junit::Classify(tc.outcome == junit::Outcome::kMissing ? nullptr : &tc, vc);
  std::string summary = util::StrCat(w->inference_key, ": ", junit::VerdictName(f.verdict),
                                     f.reason.empty() ? "" : util::StrCat(" (", f.reason, ")"));
  w->out->set_inference_outcome(summary);
  if (w->inference_status == "EXPECTED_PASSING" && f.verdict != junit::Verdict::kPass &&
      f.verdict != junit::Verdict::kNoEvidence) {
    Review(*w, util::StrCat("inference regression: ", summary));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::ShardResult> ShardRun::Finish() {
  if (loader_text_ != loader_original_) {
    std::string rel = spec_.loader();
    if (std::string_view(rel).starts_with(kForgeModelsPrefix))
      rel.erase(0, kForgeModelsPrefix.size());
    auto* fe = result_.add_file_edits();
    fe->set_repo("tt_forge_models");
    fe->set_path(rel);
    fe->set_diff(diff::UnifiedDiff(rel, loader_original_, loader_text_));
  }
  // Evidence recorded by the tools, and which of it concerns each entry.
  AttachEvidence(*ctx_.tools, result_);
  return result_;
}

bool OldReasonStale(const EntryWork& w) {
  // The playbooks take entries whose reason is a CPU-side error: a probe that ran clean, or a
  // fix of this shard, shows that reason to be false; a VERIFY phase has its PROBE phase's word.
  return w.fixed || (w.probe && w.probe->ok) || (w.entry != nullptr && w.entry->old_reason_stale());
}

void DecideFromVerification(EntryWork& w, const Verification& v) {
  junit::VerifyContext vc;
  vc.forced_skip = w.status == "NOT_SUPPORTED_SKIP";
  vc.old_reason = w.reason;
  vc.old_reason_stale = OldReasonStale(w);
  vc.log_text = v.log;
  vc.log_shared = v.log_shared;
  vc.exit_signal = v.signal;
  junit::Finding f = junit::Classify(v.testcase, vc);
  junit::Decision d = junit::Decide(f);
  w.out->set_verdict(std::string(junit::VerdictName(f.verdict)));
  w.out->set_disposition(v1::EntryOutcome::DONE);
  w.out->set_stage(f.stage);
  w.out->set_reason(f.reason);
  for (const auto& r : f.review) ShardRun::Review(w, r);
  if (d.change) {
    w.out->set_changed(true);
    *w.out->mutable_edit() = EditFor(d, *w.entry, w.markers);
  }
}

std::string InferenceKeyOf(const std::filesystem::path& workspace, const v1::ShardSpec& spec) {
  YamlFiles yaml(workspace);
  for (const auto& e : spec.entries()) {
    auto variant = InferenceVariant(e.file(), e.key());
    if (!variant) continue;
    const auto* doc = yaml.Get(variant->first);
    if (doc != nullptr && doc->Find(variant->second) != nullptr) return variant->second;
  }
  return "";
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

}  // namespace triage::playbooks
