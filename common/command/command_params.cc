#include "common/command/command_params.h"

#include <algorithm>
#include <charconv>

#include "common/util/strings.h"
#include "nlohmann/json.hpp"

namespace triage::command {

absl::StatusOr<Params> ParseParams(const std::map<std::string, std::string>& params) {
  Params out;
  auto get = [&](const char* name) -> const std::string* {
    auto it = params.find(name);
    return it == params.end() ? nullptr : &it->second;
  };
  const std::string* command = get("command");
  if (command == nullptr || command->empty()) {
    return absl::InvalidArgumentError(
        "params.command is required: a JSON array of argv items, e.g. '[\"tool\", \"{key}\"]'");
  }
  // No exceptions leave the parser: a malformed or hostile value is an error, not a crash.
  const nlohmann::json j = nlohmann::json::parse(*command, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(
        util::StrCat("params.command is not valid JSON: '", *command,
                     "' (expected a JSON array of strings, e.g. '[\"tool\", \"{key}\"]')"));
  }
  if (!j.is_array() || j.empty()) {
    return absl::InvalidArgumentError("params.command must be a non-empty JSON array of strings");
  }
  for (std::size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_string()) {
      return absl::InvalidArgumentError(
          util::StrCat("params.command[", i, "] must be a string, got ", j[i].dump()));
    }
    out.command.push_back(j[i].get<std::string>());
  }
  if (const std::string* per = get("per"); per != nullptr && !per->empty()) {
    if (*per != "entry" && *per != "shard") {
      return absl::InvalidArgumentError(
          util::StrCat("params.per must be entry or shard, got '", *per, "'"));
    }
    out.per_shard = *per == "shard";
  }
  if (const std::string* t = get("timeout_seconds"); t != nullptr && !t->empty()) {
    constexpr long long kMax = 7 * 24 * 3600;
    long long v = 0;
    const auto [end, ec] = std::from_chars(t->data(), t->data() + t->size(), v);
    if (ec != std::errc() || end != t->data() + t->size() || v < 1 || v > kMax) {
      return absl::InvalidArgumentError(
          util::StrCat("params.timeout_seconds must be a whole number of seconds from 1 to ", kMax,
                       ", got '", *t, "'"));
    }
    out.timeout = std::chrono::seconds(v);
  }
  if (const std::string* v = get("verify"); v != nullptr && !v->empty()) {
    if (*v != "true" && *v != "false") {
      return absl::InvalidArgumentError(
          util::StrCat("params.verify must be true or false, got '", *v, "'"));
    }
    out.verify = *v == "true";
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> AllowedEnvironment(
    const std::vector<std::string>& extra_allow, const std::vector<std::string>& env) {
  auto allowed = [&](std::string_view name) {
    for (std::string_view a : kEnvAllowList) {
      if (a == name) return true;
    }
    return std::find(extra_allow.begin(), extra_allow.end(), name) != extra_allow.end();
  };
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& item : env) {
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string name = item.substr(0, eq);
    if (!allowed(name)) continue;
    // The first of duplicate items wins, as getenv reads them.
    bool seen = false;
    for (const auto& kv : out) seen |= kv.first == name;
    if (!seen) out.emplace_back(std::move(name), item.substr(eq + 1));
  }
  return out;
}

bool ValidEnvName(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name) {
    const bool ok =
        c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!ok) return false;
  }
  return true;
}

}  // namespace triage::command
