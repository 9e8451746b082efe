// nightly: the confirmation runner of nightly sweeps (docs/nightly.md, section 3). It runs the
// shard's tests `confirm` times as tt-xla's runner would on the shard's arch, reads every run
// into a record and decides each candidate with nightly::DecideNightly. It probes nothing and
// edits no file: its only output is per-arch YAML targets.

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "agent/playbooks/playbook.h"
#include "common/junit/verdict.h"
#include "common/nightly/decide.h"
#include "common/nightly/record.h"
#include "common/util/strings.h"

namespace triage::playbooks::nightly {

extern const CatalogEntry kCatalog;

namespace {

using triage::nightly::DecideMode;

// A confirmation run's record of one test. A testcase is read as the intake reads nightly ones,
// with the agent plugin's real error and stage; a test that left none (its process died, or
// the session outran its timeout) is read from the log as verification reads it.
absl::StatusOr<v1::NightlyRecord> RecordOfRun(const std::string& key, const junit::TestCase& tc,
                                              const PytestRun& run, const std::string& label) {
  v1::NightlyRecord r;
  if (tc.outcome != junit::Outcome::kMissing) {
    auto rec = triage::nightly::RecordOf(tc, label);
    if (!rec.ok()) return rec.status();
    if (*rec) r = **rec;
    if (const std::string* e = tc.Property("triage_error")) r.set_real_error(*e);
    if (const std::string* s = tc.Property("triage_stage")) r.set_stage(*s);
  } else if (run.log.find(util::StrCat("not found: ")) != std::string::npos &&
             run.log.find(util::StrCat("[", key, "]")) != std::string::npos) {
    // pytest did not collect the test at the sweep's commits: nothing to confirm it with.
    r.set_outcome(v1::NightlyRecord::SKIPPED);
    r.set_error_message("not collected by the runner at the sweep's commits");
  } else {
    junit::VerifyContext vc;
    vc.log_text = run.log;
    vc.exit_signal = run.signal;
    const junit::Finding f = junit::Classify(nullptr, vc);
    r.set_outcome(v1::NightlyRecord::FAILED);
    r.set_bringup_status("UNKNOWN");
    r.set_real_error(f.reason);
    if (f.verdict == junit::Verdict::kCrash) {
      r.set_crash_signal(f.signal > 0 ? f.signal : 6);
      // The fatal message alone: the record's reason is then the nightly form a CI record of the
      // same crash gives (rule R), whether or not the fleet confirmed it.
      r.set_real_error(f.crash_message);
    }
    if (f.verdict == junit::Verdict::kTimeout || run.timed_out) r.set_timed_out(true);
    if (f.verdict != junit::Verdict::kCrash && !r.timed_out()) {
      return absl::UnavailableError(util::StrCat("the confirmation run of ", key,
                                                 " left no testcase and no crash in its log"));
    }
  }
  r.set_key(key);
  r.set_source(label);
  return r;
}

// A recheck run's time limit from a test's recorded duration (docs/nightly.md, "Rechecking
// skipped entries"): kRecheckMultiple times it, at least kRecheckFloor; none (the agent's own
// limit) when nothing was recorded. A run cut short is a hang.
constexpr double kRecheckMultiple = 5;
constexpr std::chrono::seconds kRecheckFloor{300};

std::chrono::seconds RecheckLimit(const std::vector<const v1::ShardEntry*>& entries) {
  std::chrono::seconds total{0};
  for (const v1::ShardEntry* e : entries) {
    const double one = e->nightly().expected_seconds();
    if (e->nightly().kind() != "recheck" || one <= 0) return std::chrono::seconds{0};
    total += std::max(kRecheckFloor,
                      std::chrono::seconds(static_cast<std::int64_t>(kRecheckMultiple * one)));
  }
  return total;
}

class NightlyPlaybook : public Playbook {
 public:
  const CatalogEntry& Catalog() const override { return kCatalog; }

  PhasePlan Plan(v1::ShardPhase) const override { return {}; }
  absl::Status ProbeAndFix(ShardRun&) const override { return absl::OkStatus(); }

  absl::StatusOr<v1::ShardResult> Run(PlaybookContext& ctx) const override {
    const v1::ShardSpec& spec = *ctx.spec;
    const triage::nightly::RuleOptions options =
        triage::nightly::RuleOptionsFrom(spec.nightly_options());
    std::vector<std::string> keys;
    std::map<std::string, const v1::ShardEntry*> by_key;
    for (const auto& e : spec.entries()) {
      by_key[e.key()] = &e;
      if (!e.has_nightly()) {
        return absl::InvalidArgumentError(util::StrCat(
            "nightly shard ", spec.shard_id(), ": entry ", e.key(), " carries no candidate"));
      }
      keys.push_back(e.key());
    }
    std::map<std::string, std::vector<v1::NightlyRecord>> runs;
    for (int i = 1; i <= options.confirm; ++i) {
      if (ctx.cancelled && ctx.cancelled()) return absl::CancelledError("cancelled");
      const std::string label = util::StrCat("confirm-", i);
      if (ctx.progress) ctx.progress(label, "");
      std::vector<const v1::ShardEntry*> all;
      for (const auto& e : spec.entries()) all.push_back(&e);
      ctx.tools->SetPytestTimeout(RecheckLimit(all));
      auto session = ctx.tools->Pytest(keys, label);
      if (!session.ok()) return session.status();
      if (std::string why = RunnerFailure(*session); !why.empty()) {
        return absl::UnavailableError(why);
      }
      std::map<std::string, std::pair<junit::TestCase, const PytestRun*>> answers;
      for (std::size_t k = 0; k < keys.size() && k < session->cases.size(); ++k) {
        answers[keys[k]] = {session->cases[k], &*session};
      }
      // A process that died takes the rest of the session with it: those run alone, so that
      // each crash is its own test's.
      std::vector<PytestRun> alone_runs;
      alone_runs.reserve(keys.size());
      for (const auto& k : keys) {
        if (answers[k].first.outcome != junit::Outcome::kMissing || keys.size() == 1) continue;
        if (ctx.progress) ctx.progress(label + "-alone", k);
        ctx.tools->SetPytestTimeout(RecheckLimit({by_key[k]}));
        auto alone = ctx.tools->Pytest({k}, label + "-alone");
        if (!alone.ok()) return alone.status();
        if (std::string why = RunnerFailure(*alone); !why.empty()) {
          return absl::UnavailableError(why);
        }
        alone_runs.push_back(std::move(*alone));
        answers[k] = {alone_runs.back().cases.at(0), &alone_runs.back()};
      }
      for (const auto& k : keys) {
        const auto& [tc, run] = answers[k];
        auto record = RecordOfRun(k, tc, *run, label);
        if (!record.ok()) return record.status();
        runs[k].push_back(std::move(*record));
      }
    }
    v1::ShardResult result;
    result.set_status(v1::ShardResult::SUCCEEDED);
    ctx.tools->SetPytestTimeout(std::chrono::seconds{0});
    for (const auto& e : spec.entries()) {
      *result.add_entries() =
          e.nightly().kind() == "recheck"
              ? triage::nightly::DecideRecheck(e, runs[e.key()], options)
              : triage::nightly::DecideNightly(e, runs[e.key()], options, DecideMode::kConfirm);
    }
    AttachEvidence(*ctx.tools, result);
    return result;
  }
};

}  // namespace

std::unique_ptr<Playbook> Make() { return std::make_unique<NightlyPlaybook>(); }

}  // namespace triage::playbooks::nightly
