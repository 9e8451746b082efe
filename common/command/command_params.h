#pragma once

// The command executor's parameters (docs/farm.md, "Executors"), parsed in one place: the
// coordinator checks them when a sweep starts, so a malformed command is refused then instead of
// failing every shard on the agents, and the agent reads them with the same code.

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace triage::command {

struct Params {
  std::vector<std::string> command;  // argv template items (placeholders not yet replaced)
  bool per_shard = false;            // "per": "entry" (default) or "shard"
  std::optional<std::chrono::seconds> timeout;  // "timeout_seconds": 1 .. 7 days
};

// From the executor parameters of a sweep or shard. Errors name the parameter:
//   command          required; a non-empty JSON array of strings
//   per              entry | shard
//   timeout_seconds  a whole number of seconds, 1 .. 604800
absl::StatusOr<Params> ParseParams(const std::map<std::string, std::string>& params);

}  // namespace triage::command
