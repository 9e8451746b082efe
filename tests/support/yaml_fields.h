#pragma once

// A YAML node's fields as a flat map, for comparing test-config entries in tests:
// "status" -> "EXPECTED_PASSING", "arch_overrides.n150.reason" -> "...", lists as "[a,b]".

#include <map>
#include <string>

#include "yaml-cpp/yaml.h"

namespace triage::testing {

inline void FlattenYaml(const YAML::Node& n, const std::string& prefix,
                        std::map<std::string, std::string>& out) {
  if (n.IsMap()) {
    for (const auto& kv : n) {
      const std::string k = kv.first.as<std::string>();
      FlattenYaml(kv.second, prefix.empty() ? k : prefix + "." + k, out);
    }
  } else if (n.IsSequence()) {
    std::string items;
    for (const auto& i : n) items += (items.empty() ? "" : ",") + i.as<std::string>();
    out[prefix] = "[" + items + "]";
  } else if (n.IsScalar()) {
    out[prefix] = n.as<std::string>();
  }
}

inline std::map<std::string, std::string> YamlFields(const YAML::Node& n) {
  std::map<std::string, std::string> out;
  FlattenYaml(n, "", out);
  return out;
}

}  // namespace triage::testing
