#pragma once

// The rule table of nightly maintenance (docs/nightly.md, section 2): what one test's records on
// one arch, read against its YAML entry as resolved on that arch, make it a candidate for. Pure.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/inventory/document.h"
#include "common/nightly/policy.h"
#include "common/util/text.h"
#include "triage/v1/nightly.pb.h"

namespace triage::nightly {

// The thresholds of the rules, defaults filled in (NightlyOptions' zeros mean the default).
struct RuleOptions {
  int confirm = 2;
  bool no_confirm = false;
  double max_device_hours = 0;
  double pcc_margin = 0;
  double pcc_step = 0.01;
  double pcc_far_below = 0.97;
  int regression_runs = 2;
  int promote_runs = 2;
  // The policy's knobs (docs/nightly.md, "The policy"); its grid, margin and default lowest
  // threshold are pcc_step, pcc_margin and pcc_far_below.
  Policy policy;
};
RuleOptions RuleOptionsFrom(const v1::NightlyOptions& options);
// The options with a policy's knobs (pcc_step, pcc_margin and pcc_far_below from it).
RuleOptions WithPolicy(RuleOptions options, const Policy& policy);
// The options for one test: pcc_far_below is the policy's lowest threshold for the record's
// parallelism and run mode.
RuleOptions ForRecord(const RuleOptions& options, const v1::NightlyRecord& record);
// The request's options back, defaults written out (what a sweep records and reports).
v1::NightlyOptions ToProto(const RuleOptions& options);

// tt-xla's default PCC threshold (required_pcc when the entry has none).
inline constexpr double kDefaultRequiredPcc = 0.99;

// The candidate kinds, in the order of their value to a sweep with a device-time budget
// (docs/nightly.md, section 3: promotions and new failures first).
inline constexpr std::string_view kKinds[] = {"promote",   "demote_xfail",   "demote_skip",
                                              "lower_pcc", "disable_pcc",    "enable_pcc",
                                              "raise_pcc", "refresh_reason", "add_config"};
// The kind's place in kKinds (kinds not listed: after them).
int KindRank(std::string_view kind);

// An entry as resolved on one arch (per field: arch_overrides.<arch>, else the top level).
struct OnArch {
  bool exists = false;
  std::string status = "UNSPECIFIED";
  std::optional<double> required_pcc;  // absent: the 0.99 default
  bool assert_pcc = true;
  std::string reason;
  std::string bringup_status;
};
OnArch Resolve(const inventory::Entry* entry, std::string_view arch);

// One test on one arch over the runs.
struct History {
  std::string test_function;
  std::string key;
  std::string arch;
  std::vector<v1::NightlyRecord> records;  // oldest run first, at most one per run
  // Other archs whose latest record of the test ran to its end (the capacity rule: another
  // runner can absorb a test that exhausts host memory on this one).
  std::vector<std::string> completed_elsewhere;
};

struct Judgement {
  enum class Kind {
    kNothing,    // no change, nothing to report
    kCandidate,  // a candidate change (candidate)
    kAlready,    // the YAML already says what the runs show, and the runner hinted otherwise
    kCapacity,   // flagged for a person (candidate says why), never decided
  };
  Kind kind = Kind::kNothing;
  v1::NightlyCandidate candidate;  // kCandidate, kCapacity and kAlready: filled for the report
};

// The rule table applied to one test on one arch. `exists` false in `yaml`: the checkout has no
// entry for the test (only add_config can come of it).
Judgement Judge(const History& history, const OnArch& yaml, const RuleOptions& options);

// Rule P: the threshold for a worst measured PCC: floored to the pcc_step grid, one step lower
// when that leaves less than pcc_margin below the worst PCC (but not below pcc_far_below).
double FloorThreshold(double worst_pcc, const RuleOptions& options);

// Rule S: whether an entry's reason (and bringup status) no longer describes the failure a
// record shows: the stage changed, or the error's signature shares nothing with the reason's.
bool StaleReason(std::string_view reason, std::string_view bringup_status,
                 const v1::NightlyRecord& latest);

// Whether a new reason names the failure an old one names: the signature (junit::ReasonSignature)
// of either contains the other's ("Hangs" and "Hang"; "Too large for single chip" and "crashed
// with signal 6 (SIGABRT): Too large for single chip"). An empty old reason names nothing.
bool SameFailure(std::string_view old_reason, std::string_view new_reason);

// A reason without a trailing tracking URL (" - https://...").
std::string_view WithoutUrl(std::string_view reason);
template <util::TemporaryString S>  // a view into it (util::TemporaryString)
std::string_view WithoutUrl(S&& reason) = delete;

// Devices a test of this parallelism needs on an agent of this arch: 1 for single_device, the
// arch's machine size for data_parallel and tensor_parallel (docs/nightly.md, section 3).
int MinDevices(std::string_view parallelism, std::string_view arch);

}  // namespace triage::nightly
