#pragma once

// The context a log line about one shard attempt starts with, in one format for both daemons
// (docs/observability.md, "Logs"): "[sweep S shard X lease L]".

#include <string>
#include <string_view>

namespace triage::util {

// "[sweep S shard X lease L]"; a part that is not known ("") is left out, and nothing known
// gives "". Grep a shard's history across the coordinator's and the agents' logs with
// "shard X", one attempt's with "lease L".
inline std::string ShardLogContext(std::string_view sweep, std::string_view shard,
                                   std::string_view lease = {}) {
  std::string out;
  auto add = [&out](std::string_view name, std::string_view value) {
    if (value.empty()) return;
    out += out.empty() ? "[" : " ";
    out += name;
    out += ' ';
    out += value;
  };
  add("sweep", sweep);
  add("shard", shard);
  add("lease", lease);
  if (!out.empty()) out += ']';
  return out;
}

}  // namespace triage::util
