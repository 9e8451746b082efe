#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/classify/classify.h"
#include "coordinator/planning/selection.h"
#include "google/protobuf/repeated_ptr_field.h"
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
  // The request's selection, compiled; nullptr when it sets nothing.
  std::shared_ptr<const Selector> selector;
};

// The most nightly records one start request may carry (seven nights of three archs of
// tt-xla hold well under a tenth of it).
inline constexpr std::size_t kMaxNightlyRecords = 2'000'000;

struct StartDefaults {
  std::string executor = "native";
  std::vector<std::string> archs = {"n150"};
  // A recheck sweep that names no arch: the single-device archs tt-xla's nightly runs its
  // single-device test configs on, where a NOT_SUPPORTED_SKIP hides a test.
  std::vector<std::string> recheck_archs = {"n150", "p150"};
};

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

// The SHA-256 (hex) of nightly runs a sweep keeps (nightly_digest): over each run serialized
// deterministically, preceded by its size and ':'.
std::string NightlyDigest(const google::protobuf::RepeatedPtrField<v1::NightlyRun>& runs);

// A nightly request as the coordinator keeps it: the runs replaced by their digest
// (nightly_digest; docs/nightly.md). Other requests come back as they are.
v1::StartSweepRequest WithoutNightlyRuns(const v1::StartSweepRequest& req);

// "nightly run 2 (2026-11-27)": how refusals name a run (index from 0).
std::string NightlyRunName(int index, const v1::NightlyRun& run);

// One record's checks: a model test function, a test-config key, a known arch. The error
// starts with where (the run's name) and the record's source.
absl::Status CheckNightlyRecord(const v1::NightlyRecord& record, std::string_view where);

// The nightly runs' checks (docs/nightly.md): every record's test function, key and arch (at most
// kMaxNightlyRecords), the options' ranges, and what does not combine with a nightly sweep
// (playbooks, incremental). The runs are nightly or an upload (nightly_upload, not both);
// runs_to_come: a nightly sweep whose runs are uploaded after this check (CheckSweep).
absl::Status ValidateNightly(const v1::StartSweepRequest& req, bool runs_to_come = false);

// Checks a start request before anything is read (docs/farm.md, "A sweep"): exactly one of
// repo_path or git_url; a known executor, arch and playbook; max_attempts in range; the command
// executor's parameters; readable rules and durations; the selection (a failing selection needs
// the command executor and takes no playbooks or rules); the nightly checks (nightly_to_come as
// ValidateNightly's runs_to_come). A pure function: the errors name the field and the value.
absl::StatusOr<StartRequest> ValidateStartRequest(const v1::StartSweepRequest& req,
                                                  const StartDefaults& defaults,
                                                  bool nightly_to_come = false);

}  // namespace triage::coord
