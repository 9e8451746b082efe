#pragma once

// Records and entries for the nightly rules' tests, written as tt-xla's runner would.

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "common/inventory/document.h"
#include "triage/v1/nightly.pb.h"

namespace triage::nightly::testing {

// A record of one run: bringup PASSED, INCORRECT_RESULT, FAILED_*, or "" for none.
inline v1::NightlyRecord Rec(v1::NightlyRecord::Outcome outcome, std::string bringup,
                             std::optional<double> pcc = std::nullopt, std::string arch = "n150",
                             std::string error = "") {
  v1::NightlyRecord r;
  r.set_test_function("test_all_models_torch");
  r.set_key("m/pytorch-Base-single_device-inference");
  r.set_arch(std::move(arch));
  r.set_outcome(outcome);
  r.set_bringup_status(std::move(bringup));
  r.set_parallelism("single_device");
  r.set_run_mode("inference");
  if (pcc) r.set_pcc(*pcc);
  if (!error.empty()) r.set_error_message(std::move(error));
  r.set_duration_seconds(12);
  return r;
}

inline v1::NightlyRecord Pass(std::optional<double> pcc = 0.999, std::string arch = "n150") {
  return Rec(v1::NightlyRecord::PASSED, "PASSED", pcc, std::move(arch));
}
inline v1::NightlyRecord XfailPass(std::optional<double> pcc = 0.999, std::string arch = "n150") {
  auto r = Rec(v1::NightlyRecord::XFAILED, "PASSED", pcc, std::move(arch));
  r.add_guidance("RM_XFAIL");
  return r;
}
inline v1::NightlyRecord Incorrect(double pcc,
                                   v1::NightlyRecord::Outcome outcome = v1::NightlyRecord::FAILED,
                                   std::string arch = "n150") {
  return Rec(outcome, "INCORRECT_RESULT", pcc, std::move(arch),
             "Test marked w/ INCORRECT_RESULT. [1/1]: PCC check enabled.");
}
inline v1::NightlyRecord Fail(std::string stage, std::string error,
                              v1::NightlyRecord::Outcome outcome = v1::NightlyRecord::FAILED,
                              std::string arch = "n150") {
  return Rec(outcome, std::move(stage), std::nullopt, std::move(arch), std::move(error));
}
inline v1::NightlyRecord Hang(std::string arch = "n150") {
  auto r = Rec(v1::NightlyRecord::FAILED, "UNKNOWN", std::nullopt, std::move(arch));
  r.set_failure("Failed: Timeout >3600.0s");
  r.set_timed_out(true);
  return r;
}
inline v1::NightlyRecord Crash(int signal, std::string arch = "n150") {
  auto r = Rec(v1::NightlyRecord::FAILED, "UNKNOWN", std::nullopt, std::move(arch));
  r.set_failure("tests/runner/test_models.py:344: running the test CRASHED with signal " +
                std::to_string(signal));
  r.set_crash_signal(signal);
  return r;
}

// One entry parsed from an inference-style file.
struct OneEntry {
  inventory::Document doc;
  const inventory::Entry* entry() const { return &doc.entries().at(0); }
};
inline OneEntry Entry(const std::string& fields,
                      const std::string& key = "m/pytorch-Base-single_device-inference") {
  std::string text = "test_config:\n  " + key + ":\n" + fields;
  return OneEntry{inventory::Document::Parse(
      "tests/runner/test_config/torch/test_config_inference_single_device.yaml", text)};
}

}  // namespace triage::nightly::testing
