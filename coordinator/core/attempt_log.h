#pragma once

#include <functional>
#include <string_view>

#include "common/util/log.h"
#include "common/util/log_context.h"
#include "common/util/strings.h"

namespace triage::coord {

// A log line about one shard attempt (docs/observability.md, "Logs"), run as an effect once the
// operation's writes are durable. Not built at all when the level is not logged.
inline std::function<void()> AttemptLog(spdlog::level::level_enum level, std::string_view sweep_id,
                                        std::string_view shard_id, std::string_view lease_id,
                                        std::string_view what) {
  if (!spdlog::should_log(level)) return [] {};
  return [level, line = util::StrCat(util::ShardLogContext(sweep_id, shard_id, lease_id), " ",
                                     what)] { spdlog::log(level, "{}", line); };
}

}  // namespace triage::coord
