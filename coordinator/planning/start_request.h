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

// An idempotency key: at most 200 characters of printable ASCII without spaces ("" = none).
absl::Status ValidateRequestId(std::string_view id);

absl::StatusOr<StartRequest> ValidateStartRequest(const v1::StartSweepRequest& req,
                                                  const StartDefaults& defaults);

}  // namespace triage::coord
