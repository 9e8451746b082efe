#include "bench/nightly_replay_night.h"

#include <regex>

#include "common/inventory/key.h"
#include "common/nightly/learn.h"
#include "common/util/strings.h"

namespace triage::bench {

using nightly::OnArch;
using nlohmann::json;

namespace {

// A PCC a reason quotes ("pcc=0.1442", "calc ~0.52", "Calculated: pcc=0.98"), if any.
std::optional<double> PccInText(const std::string& text) {
  static const std::regex kPcc(R"((?:pcc|PCC|calc)[^0-9\-]{0,12}(-?[01]?\.[0-9]+))");
  std::smatch m;
  if (std::regex_search(text, m, kPcc)) return std::stod(m[1].str());
  return std::nullopt;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::vector<std::string> Archs(const std::string& key, const json& before, const json& after) {
  std::set<std::string> out;
  for (const json* e : {&before, &after}) {
    if (e->is_null()) continue;
    if (auto it = e->find("supported_archs"); it != e->end() && it->is_array()) {
      for (const auto& a : *it) out.insert(a.get<std::string>());
    }
  }
  if (out.empty()) {
    if (inventory::IsTensorParallelKey(key)) {
      out.insert(std::string(inventory::kTensorParallelArch));
    } else {
      out = {"n150", "p150"};
    }
  }
  for (const json* e : {&before, &after}) {
    if (e->is_null()) continue;
    if (auto it = e->find("arch_overrides"); it != e->end() && it->is_object()) {
      for (const auto& [arch, v] : it->items()) out.insert(arch);
    }
  }
  return {out.begin(), out.end()};
}

// The PCC the PR quotes for the key on the arch: the lowest number of a figure line that names
// the arch, else of any figure line; nullopt when it quotes none.
std::optional<double> Figure(const json& figures, const std::string& arch) {
  std::optional<double> named, any;
  for (const auto& f : figures) {
    const std::string line = f.value("line", "");
    const bool names = line.find(arch) != std::string::npos;
    for (const auto& n : f.value("numbers", json::array())) {
      double v = 0;
      try {
        v = std::stod(n.get<std::string>());
      } catch (...) {
        continue;
      }
      if (v <= -1 || v >= 1) continue;
      if (!any || v < *any) any = v;
      if (names && (!named || v < *named)) named = v;
    }
  }
  return named ? named : any;
}

Synth Synthesize(const std::string& key, const std::string& arch, const OnArch& before,
                 const OnArch& after, std::optional<double> figure) {
  Synth s;
  v1::NightlyRecord& r = s.record;
  r.set_test_function(std::string(inventory::TestFunctionOfKey(key)));
  r.set_key(key);
  r.set_arch(arch);
  r.set_parallelism(inventory::IsTensorParallelKey(key)                ? "tensor_parallel"
                    : key.find("-data_parallel-") != std::string::npos ? "data_parallel"
                                                                       : "single_device");
  r.set_run_mode(key.ends_with("-training") ? "training" : "inference");
  r.set_model_test_status(util::StrCat("ModelTestStatus.", before.status));
  const double before_threshold = before.required_pcc.value_or(nightly::kDefaultRequiredPcc);
  r.set_pcc_threshold(before_threshold);
  r.set_pcc_assertion_enabled(before.assert_pcc);
  const bool before_xfail = before.status == "KNOWN_FAILURE_XFAIL";
  auto quoted_pcc = [&]() -> std::optional<double> {
    if (figure) return figure;
    if (auto p = PccInText(after.reason)) return p;
    return PccInText(before.reason);
  };
  auto ran = [&](double pcc) {
    r.set_pcc(pcc);
    const bool below = before.assert_pcc && pcc < before_threshold;
    r.set_bringup_status(below ? "BringupStatus.INCORRECT_RESULT" : "BringupStatus.PASSED");
    r.set_outcome(below || before_xfail
                      ? (before_xfail ? v1::NightlyRecord::XFAILED : v1::NightlyRecord::FAILED)
                      : v1::NightlyRecord::PASSED);
    if (!below && before_xfail) r.set_outcome(v1::NightlyRecord::PASSED);
  };
  if (after.status == "EXPECTED_PASSING") {
    if (after.assert_pcc) {
      const double t = after.required_pcc.value_or(nightly::kDefaultRequiredPcc);
      double pcc = figure ? *figure : (t < nightly::kDefaultRequiredPcc ? t + 0.002 : 0.995);
      s.how = figure ? "ran, PCC quoted" : "ran, PCC within the engineer's threshold";
      ran(pcc);
    } else {
      auto p = quoted_pcc();
      s.how = p ? "ran, PCC quoted" : "ran, PCC check off, no figure: 0.5";
      ran(p.value_or(0.5));
    }
    return s;
  }
  const std::string reason(nightly::WithoutUrl(after.reason));
  const std::string low = Lower(after.reason);
  if (after.status == "KNOWN_FAILURE_XFAIL") {
    if (after.bringup_status == "INCORRECT_RESULT" || low.find("pcc") != std::string::npos) {
      auto p = quoted_pcc();
      s.how = p ? "incorrect result, PCC quoted" : "incorrect result, no figure: 0.5";
      r.set_pcc(p.value_or(0.5));
      r.set_bringup_status("BringupStatus.INCORRECT_RESULT");
      r.set_outcome(before_xfail ? v1::NightlyRecord::XFAILED : v1::NightlyRecord::FAILED);
      r.set_error_message(reason);
      return s;
    }
    s.how = "failed with the reason's error";
    r.set_bringup_status(util::StrCat("BringupStatus.", after.bringup_status.starts_with("FAILED_")
                                                            ? after.bringup_status
                                                            : "UNKNOWN"));
    r.set_outcome(before_xfail ? v1::NightlyRecord::XFAILED : v1::NightlyRecord::FAILED);
    r.set_error_message(reason.empty() ? "failed" : reason);
    r.set_failure(r.error_message());
    return s;
  }
  // NOT_SUPPORTED_SKIP: the run took the job down; the reason says how, if it says.
  r.set_outcome(v1::NightlyRecord::FAILED);
  r.set_error_message(reason);
  r.set_failure(reason);
  r.set_bringup_status(util::StrCat("BringupStatus.", after.bringup_status.starts_with("FAILED_")
                                                          ? after.bringup_status
                                                          : "UNKNOWN"));
  auto has = [&](std::initializer_list<std::string_view> words) {
    for (auto w : words) {
      if (low.find(w) != std::string::npos) return true;
    }
    return false;
  };
  const std::string_view cause = nightly::SkipCause(after.reason);
  if (cause == "hang") {
    r.set_timed_out(true);
    s.how = "hung (the reason says)";
  } else if (cause == "oom_kill") {
    r.set_crash_signal(9);
    s.how = "killed for host memory (the reason says)";
  } else if (has({"segmentation", "signal 11", "segfault"})) {
    r.set_crash_signal(11);
    s.how = "crashed, SIGSEGV (the reason says)";
  } else {
    r.set_crash_signal(6);
    s.how = "crashed (the reason names no cause: an abort)";
  }
  return s;
}

}  // namespace triage::bench
