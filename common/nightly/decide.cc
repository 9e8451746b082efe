#include "common/nightly/decide.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "common/junit/reason.h"
#include "common/nightly/behaviour.h"
#include "common/util/strings.h"

namespace triage::nightly {
namespace {

void SetString(v1::EntryEdit& e, const std::string& name, const std::string& value) {
  auto* f = e.add_set();
  f->set_name(name);
  f->mutable_value()->set_string_value(value);
}
void SetFloat(v1::EntryEdit& e, const std::string& name, double value) {
  auto* f = e.add_set();
  f->set_name(name);
  f->mutable_value()->set_float_value(value);
}
void SetBool(v1::EntryEdit& e, const std::string& name, bool value) {
  auto* f = e.add_set();
  f->set_name(name);
  f->mutable_value()->set_bool_value(value);
}

std::string Pcc(double pcc) {
  if (std::isnan(pcc)) return "pcc nan";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "pcc %.4f", pcc);
  return buf;
}

// The telling nightly records that decided the candidate: the latest max(promote_runs,
// regression_runs) of them.
std::vector<const v1::NightlyRecord*> DecidingNightly(const v1::NightlyCandidate& c,
                                                      const RuleOptions& o) {
  std::vector<const v1::NightlyRecord*> telling;
  for (const auto& r : c.nightly()) {
    if (BehaviourOf(r) != Behaviour::kSkipped) telling.push_back(&r);
  }
  const std::size_t n = static_cast<std::size_t>(std::max(o.promote_runs, o.regression_runs));
  if (telling.size() > n) telling.erase(telling.begin(), telling.end() - static_cast<long>(n));
  return telling;
}

bool AllOf(const std::vector<v1::NightlyRecord>& runs, auto&& pred) {
  return !runs.empty() && std::all_of(runs.begin(), runs.end(), [&](const v1::NightlyRecord& r) {
    return pred(BehaviourOf(r));
  });
}

// The behaviours of the runs, comma-separated ("pass, pass").
std::string Seen(const std::vector<v1::NightlyRecord>& runs) {
  std::vector<std::string> names;
  for (const auto& r : runs) {
    std::string name(BehaviourName(BehaviourOf(r)));
    if (auto pcc = MeasuredPcc(r)) name += util::StrCat(" (", Pcc(*pcc), ")");
    names.push_back(std::move(name));
  }
  return util::StrJoin(names, ", ");
}

// The run whose error and stage a failure's YAML takes: the latest confirmation, else the latest
// nightly record.
const v1::NightlyRecord& Freshest(const v1::NightlyCandidate& c,
                                  const std::vector<v1::NightlyRecord>& confirmations) {
  return confirmations.empty() ? c.nightly(c.nightly_size() - 1) : confirmations.back();
}

// A decided kind's change for the arch, with the outcome's verdict, stage and reason. Returns
// false when the runs do not support the kind after all (no change: flaky).
bool Change(std::string kind, const v1::NightlyCandidate& c,
            const std::vector<v1::NightlyRecord>& confirmations, std::optional<double> worst,
            const RuleOptions& o, v1::EntryOutcome& out) {
  v1::EntryEdit& e = *out.mutable_edit();
  v1::NightlyFinding& f = *out.mutable_nightly();
  const double threshold = c.has_required_pcc() ? c.required_pcc() : kDefaultRequiredPcc;
  const bool far = !worst || std::isnan(*worst) || *worst <= o.pcc_far_below + 1e-12;
  auto pcc_comment = [&]() {
    if (worst && o.policy.pcc_comment != "none") {
      f.set_pcc_comment(util::StrCat(Pcc(*worst), " on ", c.arch()));
    }
  };
  // A passing test that stops running to its end: an `assert_pcc: false` describes runs that no
  // longer happen (a promotion measures the PCC again and rule P decides the check then), unless
  // the policy keeps it (demote_pcc_off).
  auto drop_pcc_off = [&]() {
    if (o.policy.demote_pcc_off == "drop" && c.status() == "EXPECTED_PASSING" &&
        c.has_assert_pcc() && !c.assert_pcc()) {
      e.add_delete_("assert_pcc");
    }
  };
  // A nonsense PCC under the xfail policy: KNOWN_FAILURE_XFAIL with INCORRECT_RESULT and the
  // comparison's figures in the reason.
  auto xfail_incorrect = [&]() {
    SetString(e, "status", "KNOWN_FAILURE_XFAIL");
    SetString(e, "bringup_status", "INCORRECT_RESULT");
    const std::string buf = PccFailureReason(worst, threshold, o.policy.pcc_reason);
    SetString(e, "reason", buf);
    e.add_delete_("assert_pcc");
    e.add_delete_("required_pcc");
    out.set_stage("INCORRECT_RESULT");
    out.set_reason(buf);
  };
  if (kind == "add_config" && !c.nightly().empty() &&
      !RanToEnd(BehaviourOf(Freshest(c, confirmations)))) {
    // A test without an entry that fails: its entry as a demotion would write it.
    const bool skip = KillsTheJob(BehaviourOf(Freshest(c, confirmations)));
    if (!Change(skip ? "demote_skip" : "demote_xfail", c, confirmations, worst, o, out)) {
      return false;
    }
    f.set_kind("add_config");
    out.set_verdict("add_config");
    return true;
  }
  if (kind == "promote" || kind == "add_config") {
    SetString(e, "status", "EXPECTED_PASSING");
    if (kind == "promote") {
      e.add_delete_("reason");
      e.add_delete_("bringup_status");
    }
    // Rule P: the worst PCC of every deciding run, nightly and confirmation alike.
    const bool below = worst && (std::isnan(*worst) || *worst < threshold);
    if (below && far && o.policy.nonsense == "xfail") return false;
    if (below) {
      if (!far && FloorThreshold(*worst, o) < threshold - 1e-9) {
        SetFloat(e, "required_pcc", FloorThreshold(*worst, o));
      } else {
        SetBool(e, "assert_pcc", false);
      }
      pcc_comment();
    }
    out.set_stage(below ? "INCORRECT_RESULT" : "PASSED");
  } else if (kind == "enable_pcc") {
    const bool clears = worst && !std::isnan(*worst) && *worst > threshold + o.pcc_margin;
    if (!clears && (o.policy.enable != "floor" || far)) return false;
    e.add_delete_("assert_pcc");
    if (o.policy.enable == "floor") {
      // The threshold is the floored worst PCC: the default's when that reaches 0.99.
      const double to = FloorThreshold(*worst, o);
      if (to >= kDefaultRequiredPcc) {
        if (c.has_required_pcc()) e.add_delete_("required_pcc");
      } else if (!c.has_required_pcc() || std::fabs(to - c.required_pcc()) > 1e-9) {
        SetFloat(e, "required_pcc", to);
      }
    }
    // A passing test with its check on carries no failure's reason.
    if (c.status() == "EXPECTED_PASSING") {
      if (!c.reason().empty()) e.add_delete_("reason");
      if (!c.bringup_status().empty()) e.add_delete_("bringup_status");
    }
    pcc_comment();
  } else if (kind == "raise_pcc") {
    if (!worst || std::isnan(*worst)) return false;
    const double to = FloorThreshold(*worst, o);
    if (to <= threshold + 1e-9) return false;
    if (to >= kDefaultRequiredPcc) {
      e.add_delete_("required_pcc");
    } else {
      SetFloat(e, "required_pcc", to);
    }
    // It passes above its old threshold: a failure's reason no longer describes it.
    if (!c.reason().empty()) e.add_delete_("reason");
    if (!c.bringup_status().empty()) e.add_delete_("bringup_status");
    pcc_comment();
  } else if ((kind == "lower_pcc" || kind == "disable_pcc" || kind == "demote_xfail") && far &&
             o.policy.nonsense == "xfail" && !c.nightly().empty() &&
             BehaviourOf(Freshest(c, confirmations)) == Behaviour::kIncorrect) {
    kind = "demote_xfail";
    xfail_incorrect();
  } else if (kind == "lower_pcc" || kind == "disable_pcc") {
    if (!far && FloorThreshold(*worst, o) < threshold - 1e-9) {
      kind = "lower_pcc";
      SetFloat(e, "required_pcc", FloorThreshold(*worst, o));
    } else {
      kind = "disable_pcc";
      SetBool(e, "assert_pcc", false);
    }
    pcc_comment();
    out.set_stage("INCORRECT_RESULT");
  } else if (kind == "demote_xfail" || kind == "refresh_reason" || kind == "unskip_xfail") {
    const v1::NightlyRecord& r = Freshest(c, confirmations);
    std::string stage = FailureStage(r);
    const std::string reason = ErrorReason(r);
    if (reason.empty()) return false;
    if (kind == "demote_xfail" || kind == "unskip_xfail") {
      SetString(e, "status", "KNOWN_FAILURE_XFAIL");
      drop_pcc_off();
      if (!stage.empty() || o.policy.unknown_stage != "omit") {
        SetString(e, "bringup_status", stage.empty() ? "UNKNOWN" : stage);
      }
    } else {
      if (!StaleReason(c.reason(), c.bringup_status(), r)) return false;
      if (!c.bringup_status().empty() && !stage.empty() && stage != c.bringup_status()) {
        SetString(e, "bringup_status", stage);
      }
    }
    SetString(e, "reason", reason);
    out.set_stage(stage);
    out.set_reason(reason);
  } else if (kind == "demote_skip" || kind == "refresh_skip") {
    const v1::NightlyRecord& r = Freshest(c, confirmations);
    const Behaviour b = BehaviourOf(r);
    std::string stage = FailureStage(r);
    std::string reason;
    // The policy's form, or the run's own error (the runner's, not pytest's timeout line);
    // the fixed form when it left none.
    auto form = [&](const std::string& policy) -> std::string {
      if (policy != "message") return policy;
      for (const std::string* text : {&r.real_error(), &r.error_message()}) {
        std::string own = junit::NormalizeReason(*text);
        if (!own.empty()) return own;
      }
      return b == Behaviour::kHang ? "Hang" : "Host OOM: killed by signal 9";
    };
    if (b == Behaviour::kHang) {
      reason = form(o.policy.hang_reason);
      if (stage != "FAILED_TTMLIR_COMPILATION") stage = "FAILED_RUNTIME";
    } else if (b == Behaviour::kOomKill) {
      reason = form(o.policy.oom_reason);
      stage = "FAILED_RUNTIME";
    } else {
      reason = ErrorReason(r);
      if (o.policy.crash_reason == "message") {
        for (const std::string* text : {&r.real_error(), &r.error_message()}) {
          std::string own = junit::NormalizeReason(*text);
          if (!own.empty()) {
            reason = std::move(own);
            break;
          }
        }
      }
      if (reason.empty()) reason = "crashed";
      if (stage.empty()) stage = "FAILED_RUNTIME";
    }
    SetString(e, "status", "NOT_SUPPORTED_SKIP");
    drop_pcc_off();
    if (o.policy.skip_bringup_status != "omit") SetString(e, "bringup_status", stage);
    SetString(e, "reason", reason);
    out.set_stage(stage);
    out.set_reason(reason);
  } else {
    return false;
  }
  f.set_kind(kind);
  out.set_verdict(kind);
  return true;
}

// Whether every confirmation run behaved as the candidate's nightly did.
bool Agree(const v1::NightlyCandidate& c, const std::vector<v1::NightlyRecord>& runs) {
  const std::string& kind = c.kind();
  if (kind == "promote" || kind == "enable_pcc") return AllOf(runs, RanToEnd);
  if (kind == "add_config" && c.expect() == "fail") {
    return AllOf(runs, [](Behaviour b) { return b == Behaviour::kFail; });
  }
  if (kind == "add_config" && c.expect() == "incorrect") return AllOf(runs, RanToEnd);
  if (kind == "add_config" && c.expect() != "pass") return AllOf(runs, KillsTheJob);
  if (kind == "add_config" || kind == "raise_pcc") {
    return AllOf(runs, [](Behaviour b) { return b == Behaviour::kPass; });
  }
  if (kind == "lower_pcc" || kind == "disable_pcc") {
    return AllOf(runs, [](Behaviour b) { return b == Behaviour::kIncorrect; });
  }
  if (kind == "demote_xfail" && c.expect() == "incorrect") {
    return AllOf(runs, [](Behaviour b) { return b == Behaviour::kIncorrect; });
  }
  if (kind == "demote_xfail" || kind == "refresh_reason" || kind == "unskip_xfail") {
    return AllOf(runs, [](Behaviour b) { return b == Behaviour::kFail; });
  }
  if (kind == "demote_skip" || kind == "refresh_skip") return AllOf(runs, KillsTheJob);
  return false;
}

v1::EntryOutcome Base(const v1::ShardEntry& entry) {
  v1::EntryOutcome out;
  out.set_key(entry.key());
  out.set_file(entry.file());
  out.set_arch(entry.nightly().arch());
  out.set_flavor(entry.nightly().kind());
  out.set_disposition(v1::EntryOutcome::DONE);
  out.mutable_edit()->set_file(entry.file());
  out.mutable_edit()->set_key(entry.key());
  v1::NightlyFinding& f = *out.mutable_nightly();
  f.set_kind(entry.nightly().kind());
  f.set_rule(entry.nightly().rule());
  f.set_expect(entry.nightly().expect());
  *f.mutable_nightly() = entry.nightly().nightly();
  return out;
}

}  // namespace

std::optional<double> WorstPcc(const v1::NightlyCandidate& c,
                               const std::vector<v1::NightlyRecord>& confirmations,
                               const RuleOptions& o) {
  std::optional<double> worst;
  auto note = [&](const v1::NightlyRecord& r) {
    auto pcc = MeasuredPcc(r);
    if (!pcc || !RanToEnd(BehaviourOf(r))) return;
    if (!worst || std::isnan(*pcc) || (!std::isnan(*worst) && *pcc < *worst)) worst = *pcc;
  };
  for (const auto* r : DecidingNightly(c, o)) note(*r);
  for (const auto& r : confirmations) note(r);
  return worst;
}

v1::EntryOutcome DecideNightly(const v1::ShardEntry& entry,
                               const std::vector<v1::NightlyRecord>& confirmations,
                               const RuleOptions& options, DecideMode mode) {
  const v1::NightlyCandidate& c = entry.nightly();
  const RuleOptions o =
      c.nightly().empty() ? options : ForRecord(options, c.nightly(c.nightly_size() - 1));
  v1::EntryOutcome out = Base(entry);
  v1::NightlyFinding& f = *out.mutable_nightly();
  *f.mutable_confirmations() = {confirmations.begin(), confirmations.end()};
  f.set_seen(Seen(confirmations));
  double seconds = 0;
  for (const auto& r : confirmations) seconds += r.duration_seconds();
  if (!confirmations.empty()) out.set_duration_seconds(seconds / confirmations.size());
  const std::optional<double> worst = WorstPcc(c, confirmations, o);
  if (worst) f.set_worst_pcc(*worst);

  if (mode == DecideMode::kUnconfirmed) {
    out.set_verdict("unconfirmed");
    f.set_decision("unconfirmed");
    out.set_changed(false);
    return out;
  }
  if (mode == DecideMode::kConfirm) {
    for (const auto& r : confirmations) {
      if (BehaviourOf(r) == Behaviour::kSkipped) {
        out.set_verdict("unconfirmed");
        f.set_decision("unconfirmed");
        out.add_review(util::StrCat("skipped on the fleet: ",
                                    r.error_message().empty() ? r.failure() : r.error_message()));
        return out;
      }
    }
    if (!Agree(c, confirmations)) {
      out.set_verdict("flaky");
      f.set_decision("flaky");
      out.add_review(util::StrCat("flaky: the nightly showed ", c.expect(), ", the fleet ",
                                  Seen(confirmations)));
      return out;
    }
  }
  out.clear_edit();
  out.mutable_edit()->set_file(entry.file());
  out.mutable_edit()->set_key(entry.key());
  if (!Change(c.kind(), c, confirmations, worst, o, out)) {
    out.clear_edit();
    out.set_verdict("flaky");
    f.set_decision("flaky");
    out.add_review(util::StrCat("flaky: the runs no longer support ", c.kind(), " (",
                                mode == DecideMode::kConfirm ? Seen(confirmations) : c.expect(),
                                ")"));
    return out;
  }
  out.set_changed(true);
  if (mode == DecideMode::kNoConfirm) {
    // The decision says it; a sweep-wide choice is not a flag on each entry.
    f.set_decision("no_confirm");
  } else {
    f.set_decision("confirmed");
  }
  return out;
}

std::string RecheckKind(const std::vector<v1::NightlyRecord>& runs) {
  if (AllOf(runs, RanToEnd)) return "promote";
  if (AllOf(runs, [](Behaviour b) { return b == Behaviour::kFail; })) return "unskip_xfail";
  if (AllOf(runs, KillsTheJob)) return "refresh_skip";
  return "";
}

v1::EntryOutcome DecideRecheck(const v1::ShardEntry& entry,
                               const std::vector<v1::NightlyRecord>& runs,
                               const RuleOptions& options) {
  v1::ShardEntry decided = entry;
  v1::NightlyCandidate& c = *decided.mutable_nightly();
  const std::string kind = RecheckKind(runs);
  if (kind.empty() || runs.size() < 2) {
    // Runs that disagree (or a single run): the skip stays; what they showed is reported.
    v1::EntryOutcome out = DecideNightly(entry, runs, options, DecideMode::kConfirm);
    out.clear_review();
    out.set_verdict("flaky");
    out.mutable_nightly()->set_decision("flaky");
    out.set_changed(false);
    out.clear_edit();
    out.add_review(util::StrCat(
        "recheck: ", runs.size() < 2 ? "one run is not a confirmation" : "the runs disagreed", " (",
        Seen(runs), "); the skip stays"));
    return out;
  }
  c.set_kind(kind);
  c.set_expect(std::string(BehaviourName(BehaviourOf(runs.front()))));
  c.set_rule(kind == "promote"        ? "NOT_SUPPORTED_SKIP, ran to its end in every recheck run"
             : kind == "unskip_xfail" ? "NOT_SUPPORTED_SKIP, a clean failure in every recheck run: "
                                        "KNOWN_FAILURE_XFAIL with its reason"
                                      : "NOT_SUPPORTED_SKIP, still hangs or crashes in every "
                                        "recheck run: the skip stays, its reason refreshed");
  v1::EntryOutcome out = DecideNightly(decided, runs, options, DecideMode::kConfirm);
  out.set_flavor("recheck");
  const std::string& bringup = entry.nightly().bringup_status();
  if (kind == "refresh_skip" && out.changed() &&
      SameFailure(entry.nightly().reason(), out.reason()) &&
      (bringup.empty() || bringup == out.stage())) {
    // The skip's reason names what the runs show already (in its own words: a skip a person
    // wrote without a bringup_status is not rewritten for the lack of one).
    out.set_changed(false);
    out.clear_edit();
    out.set_verdict("already");
    out.mutable_nightly()->set_decision("already");
  }
  return out;
}

v1::EntryOutcome ReportOnly(const v1::ShardEntry& entry) {
  v1::EntryOutcome out = Base(entry);
  const std::string& kind = entry.nightly().kind();
  out.set_verdict(kind);
  out.mutable_nightly()->set_decision(kind);
  if (kind == "capacity") out.add_review(util::StrCat("capacity: ", entry.nightly().rule()));
  return out;
}

std::string PccFailureReason(std::optional<double> worst, double required, std::string_view form) {
  const bool measured = worst && !std::isnan(*worst);
  if (form == "short") {
    char buf[96];
    if (measured) {
      std::snprintf(buf, sizeof(buf), "PCC comparison failed (calc ~%.2f, required %.2f)", *worst,
                    required);
    } else {
      std::snprintf(buf, sizeof(buf), "PCC comparison failed (calc nan, required %.2f)", required);
    }
    return buf;
  }
  // Python's repr of a float: the shortest text that reads back as the same number.
  auto repr = [](double v) {
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
    std::string s(buf, ec == std::errc() ? end : buf);
    if (s.find_first_of(".en") == std::string::npos) s += ".0";
    return s;
  };
  return util::StrCat("PCC comparison failed. Calculated: pcc=", measured ? repr(*worst) : "nan",
                      ". Required: pcc=", repr(required), ".");
}

}  // namespace triage::nightly
