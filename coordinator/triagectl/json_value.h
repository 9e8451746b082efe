#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "common/inventory/value.h"
#include "nlohmann/json_fwd.hpp"

namespace triage::ctl {

// JSON -> YAML value for edits: strings, booleans, numbers and lists of them. where names the
// place in the input for messages ("edits.json: [2].set.status").
absl::StatusOr<inventory::Value> ValueFromJson(const nlohmann::json& j, const std::string& where);
// The same from a JSON read with its objects' member order kept.
absl::StatusOr<inventory::Value> ValueFromJson(const nlohmann::ordered_json& j,
                                               const std::string& where);
nlohmann::json ValueToJson(const inventory::Value& v);

}  // namespace triage::ctl
