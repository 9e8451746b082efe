#include "common/nightly/rules.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "common/inventory/schema.h"
#include "common/junit/reason.h"
#include "common/nightly/behaviour.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::nightly {
namespace {

using Pred = std::function<bool(Behaviour)>;

// The records that say something (skipped ones do not), oldest first.
std::vector<const v1::NightlyRecord*> Telling(const History& h) {
  std::vector<const v1::NightlyRecord*> out;
  for (const auto& r : h.records) {
    if (BehaviourOf(r) != Behaviour::kSkipped) out.push_back(&r);
  }
  return out;
}

// The latest n telling records (n capped at those there are).
std::vector<const v1::NightlyRecord*> Latest(const std::vector<const v1::NightlyRecord*>& all,
                                             int n) {
  const std::size_t take = std::min<std::size_t>(all.size(), static_cast<std::size_t>(n));
  return {all.end() - static_cast<std::ptrdiff_t>(take), all.end()};
}

bool All(const std::vector<const v1::NightlyRecord*>& rs, const Pred& pred) {
  if (rs.empty()) return false;
  for (const auto* r : rs) {
    if (!pred(BehaviourOf(*r))) return false;
  }
  return true;
}

// The lowest PCC of these records (NaN counts as lowest); nullopt when none measured one.
std::optional<double> Worst(const std::vector<const v1::NightlyRecord*>& rs) {
  std::optional<double> worst;
  for (const auto* r : rs) {
    auto pcc = MeasuredPcc(*r);
    if (!pcc) continue;
    if (std::isnan(*pcc)) return *pcc;
    if (!worst || *pcc < *worst) worst = *pcc;
  }
  return worst;
}

bool FarBelow(std::optional<double> pcc, const RuleOptions& o) {
  return !pcc || std::isnan(*pcc) || *pcc <= o.pcc_far_below + 1e-12;
}

std::string Pcc(std::optional<double> pcc) {
  if (!pcc) return "no PCC";
  if (std::isnan(*pcc)) return "pcc nan";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "pcc %.4f", *pcc);
  return buf;
}

std::string Fixed2(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", v);
  return buf;
}

bool HasGuidance(const v1::NightlyRecord& r, std::string_view tag) {
  return std::find(r.guidance().begin(), r.guidance().end(), tag) != r.guidance().end();
}

// The status the run's YAML had, as a NAME ("" when the tags did not say).
std::string RunStatus(const v1::NightlyRecord& r) {
  std::string_view s = r.model_test_status();
  if (auto dot = s.rfind('.'); dot != std::string_view::npos) s.remove_prefix(dot + 1);
  auto canonical = inventory::CanonicalStatus(s);
  return canonical ? std::string(*canonical) : "";
}

// Fills the parts of a candidate every judgement shares.
v1::NightlyCandidate Base(const History& h, const OnArch& yaml,
                          const std::vector<const v1::NightlyRecord*>& telling) {
  v1::NightlyCandidate c;
  c.set_arch(h.arch);
  c.set_test_function(h.test_function);
  for (const auto& r : h.records) *c.add_nightly() = r;
  c.set_runs(static_cast<int>(h.records.size()));
  int failed = 0;
  for (const auto* r : telling) failed += BehaviourOf(*r) != Behaviour::kPass ? 1 : 0;
  c.set_failed_runs(failed);
  c.set_status(yaml.status);
  if (yaml.required_pcc) c.set_required_pcc(*yaml.required_pcc);
  c.set_assert_pcc(yaml.assert_pcc);
  c.set_reason(yaml.reason);
  c.set_bringup_status(yaml.bringup_status);
  c.set_new_entry(!yaml.exists);
  if (!h.records.empty()) {
    c.set_min_devices(MinDevices(h.records.back().parallelism(), h.arch));
  }
  return c;
}

Judgement Candidate(v1::NightlyCandidate c, std::string kind, std::string expect,
                    std::string rule) {
  Judgement j;
  j.kind = Judgement::Kind::kCandidate;
  c.set_kind(std::move(kind));
  c.set_expect(std::move(expect));
  c.set_rule(std::move(rule));
  j.candidate = std::move(c);
  return j;
}

std::string RunsWord(std::size_t n) {
  return n == 1 ? "the latest run" : util::StrCat("the latest ", n, " runs");
}

// Rows 1-3 (docs/nightly.md): a KNOWN_FAILURE_XFAIL test that ran to its end.
Judgement Promote(v1::NightlyCandidate c, const std::vector<const v1::NightlyRecord*>& runs,
                  const RuleOptions& o) {
  const std::string where = RunsWord(runs.size());
  if (All(runs, [](Behaviour b) { return b == Behaviour::kPass; })) {
    return Candidate(std::move(c), "promote", "pass",
                     util::StrCat("KNOWN_FAILURE_XFAIL passed in ", where, " (RM_XFAIL)"));
  }
  const std::optional<double> worst = Worst(runs);
  if (!FarBelow(worst, o)) {
    return Candidate(std::move(c), "promote", "incorrect",
                     util::StrCat("KNOWN_FAILURE_XFAIL ran end to end in ", where, ", worst ",
                                  Pcc(worst), " above ", Fixed2(o.pcc_far_below),
                                  ": promoted with a lowered required_pcc (RM_XFAIL)"));
  }
  return Candidate(std::move(c), "promote", "incorrect",
                   util::StrCat("KNOWN_FAILURE_XFAIL ran end to end in ", where, ", worst ",
                                Pcc(worst), " at or below ", Fixed2(o.pcc_far_below),
                                ": promoted with assert_pcc false (RM_XFAIL)"));
}

}  // namespace

RuleOptions RuleOptionsFrom(const v1::NightlyOptions& p) {
  RuleOptions o;
  if (p.confirm() > 0) o.confirm = p.confirm();
  o.no_confirm = p.no_confirm();
  o.max_device_hours = p.max_device_hours();
  if (p.pcc_margin() > 0) o.pcc_margin = p.pcc_margin();
  if (p.pcc_step() > 0) o.pcc_step = p.pcc_step();
  if (p.pcc_far_below() > 0) o.pcc_far_below = p.pcc_far_below();
  if (p.regression_runs() > 0) o.regression_runs = p.regression_runs();
  if (p.promote_runs() > 0) o.promote_runs = p.promote_runs();
  if (!p.policy_yaml().empty()) {
    // Resolved when the sweep started (ResolvePolicy), and so already checked.
    if (auto policy = ReadPolicy(p.policy_yaml(), "nightly_options.policy_yaml"); policy.ok()) {
      policy->sources = {p.policy_sources().begin(), p.policy_sources().end()};
      return WithPolicy(std::move(o), *policy);
    }
  }
  o.policy.grid = o.pcc_step;
  o.policy.margin = o.pcc_margin;
  o.policy.lowest["default"] = o.pcc_far_below;
  return o;
}

RuleOptions WithPolicy(RuleOptions o, const Policy& policy) {
  o.policy = policy;
  o.pcc_step = policy.grid;
  o.pcc_margin = policy.margin;
  o.pcc_far_below = policy.Lowest("", "");
  return o;
}

RuleOptions ForRecord(const RuleOptions& options, const v1::NightlyRecord& record) {
  RuleOptions o = options;
  if (o.policy.lowest.size() > 1) {
    o.pcc_far_below = o.policy.Lowest(record.parallelism(), record.run_mode());
  }
  return o;
}

v1::NightlyOptions ToProto(const RuleOptions& o) {
  v1::NightlyOptions p;
  p.set_confirm(o.confirm);
  p.set_no_confirm(o.no_confirm);
  p.set_max_device_hours(o.max_device_hours);
  p.set_pcc_margin(o.pcc_margin);
  p.set_pcc_step(o.pcc_step);
  p.set_pcc_far_below(o.pcc_far_below);
  p.set_regression_runs(o.regression_runs);
  p.set_promote_runs(o.promote_runs);
  p.set_policy_yaml(PolicyYaml(o.policy));
  p.mutable_policy_sources()->insert(o.policy.sources.begin(), o.policy.sources.end());
  return p;
}

int KindRank(std::string_view kind) {
  for (std::size_t i = 0; i < std::size(kKinds); ++i) {
    if (kKinds[i] == kind) return static_cast<int>(i);
  }
  return static_cast<int>(std::size(kKinds));
}

OnArch Resolve(const inventory::Entry* entry, std::string_view arch) {
  OnArch y;
  if (entry == nullptr) return y;
  y.exists = true;
  y.status = std::string(entry->StatusForArch(arch));
  if (const auto* v = entry->FieldForArch("required_pcc", arch); v != nullptr && v->is_number()) {
    y.required_pcc =
        v->kind == inventory::Value::Kind::kInt ? static_cast<double>(v->integer) : v->number;
  }
  if (const auto* v = entry->FieldForArch("assert_pcc", arch);
      v != nullptr && v->kind == inventory::Value::Kind::kBool) {
    y.assert_pcc = v->boolean;
  }
  if (const auto* v = entry->FieldForArch("reason", arch); v != nullptr && v->is_string()) {
    y.reason = v->string;
  }
  if (const auto* v = entry->FieldForArch("bringup_status", arch); v != nullptr && v->is_string()) {
    auto canonical = inventory::CanonicalBringupStatus(v->string);
    y.bringup_status = canonical ? std::string(*canonical) : v->string;
  }
  return y;
}

double FloorThreshold(double worst, const RuleOptions& o) {
  double t = std::floor(worst / o.pcc_step + 1e-7) * o.pcc_step;
  if (worst - t < o.pcc_margin - 1e-12 && t - o.pcc_step >= o.pcc_far_below - 1e-9) {
    t -= o.pcc_step;
  }
  return std::round(t * 1e6) / 1e6;
}

std::string_view WithoutUrl(std::string_view reason) {
  for (std::string_view sep : {" - http://", " - https://"}) {
    if (auto at = reason.rfind(sep); at != std::string_view::npos) reason = reason.substr(0, at);
  }
  return util::TrimWhitespace(reason);
}

bool StaleReason(std::string_view reason, std::string_view bringup_status,
                 const v1::NightlyRecord& latest) {
  const std::string stage = FailureStage(latest);
  if (!stage.empty() && !bringup_status.empty() && stage != bringup_status) return true;
  const std::string fresh = ErrorReason(latest);
  if (fresh.empty()) return false;
  return !SameFailure(reason, fresh);
}

bool SameFailure(std::string_view old_reason, std::string_view new_reason) {
  const std::string old_sig = junit::ReasonSignature(WithoutUrl(old_reason));
  const std::string new_sig = junit::ReasonSignature(WithoutUrl(new_reason));
  if (old_sig.empty() || new_sig.empty()) return false;
  return old_sig.find(new_sig) != std::string::npos || new_sig.find(old_sig) != std::string::npos;
}

int MinDevices(std::string_view parallelism, std::string_view arch) {
  if (parallelism != "data_parallel" && parallelism != "tensor_parallel") return 1;
  struct Size {
    std::string_view arch;
    int devices;
  };
  constexpr Size kSizes[] = {{"n300", 2},         {"n300-llmbox", 8},   {"qb2-blackhole", 4},
                             {"lb-blackhole", 8}, {"galaxy-wh-6u", 32}, {"galaxy-bh", 32}};
  for (const auto& s : kSizes) {
    if (s.arch == arch) return s.devices;
  }
  return 1;
}

Judgement Judge(const History& h, const OnArch& yaml, const RuleOptions& options) {
  Judgement none;
  const std::vector<const v1::NightlyRecord*> telling = Telling(h);
  if (h.records.empty() || BehaviourOf(h.records.back()) == Behaviour::kSkipped) return none;
  const v1::NightlyRecord& latest = h.records.back();
  const RuleOptions o = ForRecord(options, latest);
  const Behaviour now = BehaviourOf(latest);
  v1::NightlyCandidate c = Base(h, yaml, telling);
  const auto promote_runs = Latest(telling, o.promote_runs);
  const auto regression = Latest(telling, o.regression_runs);
  auto is = [](Behaviour want) { return [want](Behaviour b) { return b == want; }; };

  if (!yaml.exists) {  // row 13: an entry with the status the runs show
    if (All(promote_runs, is(Behaviour::kPass))) {
      return Candidate(std::move(c), "add_config", "pass",
                       util::StrCat("no entry; passed in ", RunsWord(promote_runs.size()),
                                    HasGuidance(latest, "ADD_CONFIG") ? " (ADD_CONFIG)" : ""));
    }
    if (All(promote_runs, RanToEnd)) {
      return Candidate(std::move(c), "add_config", "incorrect",
                       util::StrCat("no entry; ran end to end in ", RunsWord(promote_runs.size()),
                                    ", worst ", Pcc(Worst(promote_runs))));
    }
    if (now == Behaviour::kFail && All(regression, is(Behaviour::kFail))) {
      return Candidate(std::move(c), "add_config", "fail",
                       util::StrCat("no entry; failed in ", RunsWord(regression.size()), " (",
                                    FailureStage(latest), "): KNOWN_FAILURE_XFAIL"));
    }
    if (KillsTheJob(now) && All(regression, KillsTheJob)) {
      return Candidate(std::move(c), "add_config", std::string(BehaviourName(now)),
                       util::StrCat("no entry; ", BehaviourName(now), " in ",
                                    RunsWord(regression.size()), ": NOT_SUPPORTED_SKIP"));
    }
    return none;
  }
  const bool xfail = yaml.status == "KNOWN_FAILURE_XFAIL";
  const bool passing = yaml.status == "EXPECTED_PASSING";
  if (!xfail && !passing) return none;  // skips do not run at night; others are not ours

  Judgement j;
  if (KillsTheJob(now) && All(regression, KillsTheJob)) {  // rows 9-11
    const std::string what(BehaviourName(now));
    if (now == Behaviour::kOomKill && !h.completed_elsewhere.empty()) {
      j.kind = Judgement::Kind::kCapacity;
      c.set_kind("capacity");
      c.set_expect(what);
      c.set_rule(util::StrCat("killed for host memory on ", h.arch, " while ",
                              util::StrJoin(h.completed_elsewhere, ", "),
                              " ran it to its end: markers or supported_archs, not the status"));
      j.candidate = std::move(c);
      return j;
    }
    const std::string_view how = now == Behaviour::kOomKill ? "was killed for host memory"
                                 : now == Behaviour::kHang  ? "hung"
                                                            : "crashed";
    return Candidate(std::move(c), "demote_skip", what,
                     util::StrCat(yaml.status, " ", how, " in ", RunsWord(regression.size()),
                                  ": it would take the CI job down, so NOT_SUPPORTED_SKIP"));
  }
  if (xfail) {
    if (All(promote_runs, RanToEnd)) {  // rows 1-3
      // A nonsense PCC under the xfail policy: the test stays what it is.
      if (o.policy.nonsense == "xfail" &&
          !All(promote_runs, [](Behaviour b) { return b == Behaviour::kPass; }) &&
          FarBelow(Worst(promote_runs), o)) {
        return none;
      }
      return Promote(std::move(c), promote_runs, o);
    }
    if (now == Behaviour::kFail && StaleReason(yaml.reason, yaml.bringup_status, latest)) {
      return Candidate(
          std::move(c), "refresh_reason", "fail",
          util::StrCat("still failing, but not as its reason says (",
                       FailureStage(latest).empty() ? "" : FailureStage(latest),
                       FailureStage(latest).empty() ? "" : ": ", ErrorReason(latest), ")"));
    }
  } else {
    const double threshold = yaml.required_pcc.value_or(kDefaultRequiredPcc);
    if (now == Behaviour::kFail && All(regression, is(Behaviour::kFail))) {  // row 8
      return Candidate(std::move(c), "demote_xfail", "fail",
                       util::StrCat("EXPECTED_PASSING failed in ", RunsWord(regression.size()),
                                    " (", FailureStage(latest), ")"));
    }
    if (yaml.assert_pcc && now == Behaviour::kIncorrect &&
        All(regression, is(Behaviour::kIncorrect))) {  // rows 6-7
      const std::optional<double> worst = Worst(regression);
      if (!FarBelow(worst, o)) {
        return Candidate(std::move(c), "lower_pcc", "incorrect",
                         util::StrCat("near miss: worst ", Pcc(worst), " below required ",
                                      Fixed2(threshold), ", above ", Fixed2(o.pcc_far_below)));
      }
      if (o.policy.nonsense == "xfail") {
        return Candidate(std::move(c), "demote_xfail", "incorrect",
                         util::StrCat("far below: worst ", Pcc(worst), " at or below ",
                                      Fixed2(o.pcc_far_below), " (required ", Fixed2(threshold),
                                      "): KNOWN_FAILURE_XFAIL, INCORRECT_RESULT"));
      }
      return Candidate(std::move(c), "disable_pcc", "incorrect",
                       util::StrCat("far below: worst ", Pcc(worst), " at or below ",
                                    Fixed2(o.pcc_far_below), " (required ", Fixed2(threshold),
                                    "): EXPECTED_PASSING with assert_pcc false"));
    }
    if (All(promote_runs, RanToEnd)) {
      const std::optional<double> worst = Worst(promote_runs);
      // Row 4: the check back on, at the threshold (policy enable: above) or at the floored
      // worst PCC when it is not nonsense (enable: floor).
      const bool clears = worst && !std::isnan(*worst) && *worst > threshold + o.pcc_margin;
      const bool floors = o.policy.enable == "floor" && !FarBelow(worst, o);
      if (!yaml.assert_pcc && (clears || floors)) {
        return Candidate(std::move(c), "enable_pcc", "pass",
                         clears
                             ? util::StrCat("PCC check off, worst ", Pcc(worst), " above ",
                                            Fixed2(threshold), " + ", o.pcc_margin,
                                            threshold >= kDefaultRequiredPcc ? " (ENABLE_PCC_099)"
                                                                             : " (ENABLE_PCC)")
                             : util::StrCat("PCC check off, worst ", Pcc(worst), " above ",
                                            Fixed2(o.pcc_far_below), ": on at ",
                                            Fixed2(FloorThreshold(*worst, o)), " (ENABLE_PCC)"));
      }
      if (yaml.assert_pcc && yaml.required_pcc && threshold < kDefaultRequiredPcc && worst &&
          !std::isnan(*worst) && All(promote_runs, is(Behaviour::kPass)) &&
          FloorThreshold(*worst, o) > threshold + 1e-9) {  // row 5
        const double to = FloorThreshold(*worst, o);
        return Candidate(
            std::move(c), "raise_pcc", "pass",
            util::StrCat("required ", Fixed2(threshold), ", worst ", Pcc(worst),
                         to >= kDefaultRequiredPcc ? ": back to the 0.99 default"
                                                   : util::StrCat(": ", Fixed2(to)),
                         to >= kDefaultRequiredPcc ? " (RAISE_PCC_099)" : " (RAISE_PCC)"));
      }
    }
  }
  // Row 14: the YAML already says what the latest run shows, while the runner hinted at a change
  // (a guidance tag) or the run had another status (the YAML changed since).
  const bool matches = (passing && (now == Behaviour::kPass ||
                                    (now == Behaviour::kIncorrect && !yaml.assert_pcc))) ||
                       (xfail && now == Behaviour::kFail);
  const std::string run_status = RunStatus(latest);
  const bool hinted =
      !latest.guidance().empty() || (!run_status.empty() && run_status != yaml.status);
  if (matches && hinted) {
    j.kind = Judgement::Kind::kAlready;
    c.set_kind("already");
    c.set_expect(std::string(BehaviourName(now)));
    c.set_rule(latest.guidance().empty()
                   ? util::StrCat("the run had ", run_status, "; the YAML now says ", yaml.status)
                   : util::StrCat("guidance ", util::StrJoin(latest.guidance(), ", "),
                                  ", but the YAML already says ", yaml.status));
    j.candidate = std::move(c);
    return j;
  }
  return none;
}

}  // namespace triage::nightly
