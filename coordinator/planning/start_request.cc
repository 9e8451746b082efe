#include "coordinator/planning/start_request.h"

#include <algorithm>
#include <set>

#include "agent/playbooks/catalog.h"
#include "common/command/command_params.h"
#include "common/inventory/schema.h"
#include "common/util/strings.h"
#include "google/protobuf/util/message_differencer.h"
#include "nlohmann/json.hpp"

namespace triage::coord {
namespace {

absl::StatusOr<std::map<std::string, double>> ParseDurations(const std::string& json) {
  std::map<std::string, double> out;
  if (json.empty()) return out;
  try {
    auto j = nlohmann::json::parse(json);
    if (!j.is_object()) {
      return absl::InvalidArgumentError("durations: expected a JSON object of node id -> seconds");
    }
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.value().is_number()) out[it.key()] = it.value().get<double>();
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(util::StrCat("durations: invalid JSON: ", e.what()));
  }
  return out;
}

}  // namespace

absl::Status ValidateRequestId(std::string_view id) {
  constexpr std::size_t kMaxLength = 200;
  if (id.size() > kMaxLength) {
    return absl::InvalidArgumentError(
        util::StrCat("request_id is longer than ", kMaxLength, " characters (", id.size(), ")"));
  }
  for (std::size_t i = 0; i < id.size(); ++i) {
    const auto u = static_cast<unsigned char>(id[i]);
    if (u <= 0x20 || u >= 0x7f) {
      return absl::InvalidArgumentError(
          util::StrCat("request_id: character ", i + 1, " (0x", util::Hex(u, 2),
                       ") is not allowed: printable ASCII without spaces only"));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> StartOptionsDiffer(const v1::StartSweepRequest& first,
                                            const v1::StartSweepRequest& again) {
  // Not options of the sweep: why it was asked (audit), the key itself, and the durations (the
  // first sweep keeps none, and they only order the work).
  static const std::set<std::string> kIgnored = {"reason", "request_id", "durations_json"};
  const auto* descriptor = v1::StartSweepRequest::descriptor();
  std::vector<std::string> differ;
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const auto* field = descriptor->field(i);
    if (kIgnored.count(field->name())) continue;
    // Each side with only this field kept.
    auto only = [&](const v1::StartSweepRequest& r) {
      v1::StartSweepRequest kept = r;
      const auto* reflection = kept.GetReflection();
      for (int j = 0; j < descriptor->field_count(); ++j) {
        if (j != i) reflection->ClearField(&kept, descriptor->field(j));
      }
      return kept;
    };
    if (!google::protobuf::util::MessageDifferencer::Equals(only(first), only(again))) {
      differ.push_back(field->name());
    }
  }
  return differ;
}

absl::StatusOr<StartRequest> ValidateStartRequest(const v1::StartSweepRequest& req,
                                                  const StartDefaults& defaults) {
  if (req.repo_path().empty() == req.git_url().empty()) {
    return absl::InvalidArgumentError("give exactly one of repo_path or git_url");
  }
  StartRequest out;
  out.executor = req.executor().empty() ? defaults.executor : req.executor();
  if (out.executor != "native" && out.executor != "command" && out.executor != "replay") {
    return absl::InvalidArgumentError(
        util::StrCat("unknown executor '", out.executor, "' (native, command, replay)"));
  }
  for (const auto& arch : req.archs()) {
    if (!inventory::IsKnownArch(arch)) {
      return absl::InvalidArgumentError(util::StrCat("unknown arch '", arch, "'"));
    }
  }
  out.archs.assign(req.archs().begin(), req.archs().end());
  if (out.archs.empty()) out.archs = defaults.archs;
  // 0: the coordinator's max_attempts.
  if (req.max_attempts() < 0 || req.max_attempts() > 1000) {
    return absl::InvalidArgumentError(
        util::StrCat("max_attempts must be between 1 and 1000 (0: the coordinator's default), got ",
                     req.max_attempts()));
  }
  if (req.max_failed_shards() < 0 || req.max_failed_shards() > 100000) {
    return absl::InvalidArgumentError(
        util::StrCat("max_failed_shards must be between 0 (no budget) and 100000, got ",
                     req.max_failed_shards()));
  }
  if (auto st = ValidateRequestId(req.request_id()); !st.ok()) return st;
  if (!req.since().empty() && !req.incremental()) {
    return absl::InvalidArgumentError("since names the sweep to carry from: it needs incremental");
  }
  if (out.executor == "command") {
    // Refused now, not on every agent later.
    auto params = command::ParseParams({req.params().begin(), req.params().end()});
    if (!params.ok()) return params.status();
  }
  out.rules = &playbooks::DefaultClassifier();
  if (!req.rules_yaml().empty()) {
    auto c = classify::Classifier::FromYaml(req.rules_yaml(), "rules");
    if (!c.ok()) return c.status();
    out.custom_rules = std::make_shared<const classify::Classifier>(std::move(*c));
    out.rules = out.custom_rules.get();
  }
  const auto known = out.rules->Playbooks();
  for (const auto& pb : req.playbooks()) {
    if (std::find(known.begin(), known.end(), pb) == known.end()) {
      return absl::InvalidArgumentError(util::StrCat("unknown playbook '", pb, "'"));
    }
  }
  out.playbooks.assign(req.playbooks().begin(), req.playbooks().end());
  auto durations = ParseDurations(req.durations_json());
  if (!durations.ok()) return durations.status();
  out.durations = std::move(*durations);
  return out;
}

}  // namespace triage::coord
