#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/classify/classify.h"
#include "triage/v1/control.pb.h"

namespace triage::coord {

// What a valid StartSweepRequest asks for, with the coordinator's defaults filled in.
struct StartRequest {
  std::string executor;                     // native, command, replay
  std::vector<std::string> archs;           // the request's, else the defaults
  std::map<std::string, double> durations;  // pytest node id -> seconds
  // The classification rules: the request's own (rules_yaml), else the built-in ones.
  std::shared_ptr<const classify::Classifier> custom_rules;
  const classify::Classifier* rules = nullptr;
  std::vector<std::string> playbooks;  // as asked; empty: every playbook of the rules
};

// The most nightly records one start request may carry (seven nights of three archs of
// tt-xla hold well under a tenth of it).
inline constexpr std::size_t kMaxNightlyRecords = 2'000'000;

struct StartDefaults {
  std::string executor = "native";
  std::vector<std::string> archs = {"n150"};
};

// Checks a start request before anything is read (docs/farm.md, "A sweep"): exactly one of
// repo_path or git_url; a known executor, arch and playbook; max_attempts in range; the command
// executor's parameters; readable rules and durations. A pure function: the errors name the
// field and the value.
// The options (fields of StartSweepRequest but reason, request_id and durations_json) in which
// a repeated start differs from the first with the same request id; empty: the same sweep.
// Both requests as stored: executor filled in with its default.
std::vector<std::string> StartOptionsDiffer(const v1::StartSweepRequest& first,
                                            const v1::StartSweepRequest& again);

// pytest-split's .test_durations JSON (node id -> seconds; entries that are not numbers are
// left out); "" gives none. InvalidArgument ("durations: ...") when it is not a JSON object.
absl::StatusOr<std::map<std::string, double>> ParseDurations(const std::string& json);

// An idempotency key: at most 200 characters of printable ASCII without spaces ("" = none).
absl::Status ValidateRequestId(std::string_view id);

// A nightly request as the coordinator keeps it: the runs replaced by their digest
// (nightly_digest; docs/nightly.md). Other requests come back as they are.
v1::StartSweepRequest WithoutNightlyRuns(const v1::StartSweepRequest& req);

// The nightly runs' checks (docs/nightly.md): every record's test function, key and arch, the
// options' ranges, and what does not combine with a nightly sweep (playbooks, incremental).
absl::Status ValidateNightly(const v1::StartSweepRequest& req);

absl::StatusOr<StartRequest> ValidateStartRequest(const v1::StartSweepRequest& req,
                                                  const StartDefaults& defaults);

}  // namespace triage::coord
