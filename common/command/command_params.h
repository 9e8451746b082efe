#pragma once

// The command executor's parameters (docs/farm.md, "Executors"), parsed in one place: the
// coordinator checks them when a sweep starts, so a malformed command is refused then instead of
// failing every shard on the agents, and the agent reads them with the same code.

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace triage::command {

struct Params {
  std::vector<std::string> command;  // argv template items (placeholders not yet replaced)
  bool per_shard = false;            // "per": "entry" (default) or "shard"
  std::optional<std::chrono::seconds> timeout;  // "timeout_seconds": 1 .. 7 days
  // "verify": true (default) or false. On: the farm's own verification run of each entry after
  // the command, which decides the entry's YAML where the command's edit differs (docs/farm.md,
  // "Executors").
  bool verify = true;
};

// From the executor parameters of a sweep or shard. Errors name the parameter:
//   command          required; a non-empty JSON array of strings
//   per              entry | shard
//   timeout_seconds  a whole number of seconds, 1 .. 604800
//   verify           true | false ("" = the default, true)
absl::StatusOr<Params> ParseParams(const std::map<std::string, std::string>& params);

// The environment a command runs with (docs/farm.md, "Executors"): only the variables named by
// kEnvAllowList and by extra_allow (the agent's command_env_allow), taken from env (the agent's
// own, "NAME=value" items); every other variable, API tokens and cloud credentials included,
// stays out. The executor adds its own TRIAGE_* variables on top.
inline constexpr std::string_view kEnvAllowList[] = {
    "PATH",   "HOME", "LANG",    "LC_ALL", "LC_CTYPE",   "TZ",
    "TMPDIR", "USER", "LOGNAME", "TERM",   "PYTHONPATH",
};
std::vector<std::pair<std::string, std::string>> AllowedEnvironment(
    const std::vector<std::string>& extra_allow, const std::vector<std::string>& env);

// Whether name can be an environment variable name of command_env_allow: letters, digits and '_',
// not starting with a digit.
bool ValidEnvName(std::string_view name);

}  // namespace triage::command
