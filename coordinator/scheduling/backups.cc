#include "coordinator/scheduling/backups.h"

#include <algorithm>

namespace triage::coord {

TimePoint StragglerAt(TimePoint granted_at, double expected_seconds, const BackupPolicy& policy) {
  const double due = policy.after * std::max(0.0, expected_seconds) + ToSeconds(policy.slack);
  return granted_at + std::chrono::duration_cast<Duration>(std::chrono::duration<double>(due));
}

const ShardRecord* PickStraggler(const std::vector<RunningShard>& running,
                                 const BackupPolicy& policy, TimePoint now) {
  if (policy.after <= 0) return nullptr;
  const ShardRecord* best = nullptr;
  Duration best_over{};
  for (const RunningShard& r : running) {
    if (r.shard == nullptr || !r.shard->lease || r.shard->backup) continue;
    const TimePoint at = StragglerAt(r.shard->lease->granted_at, r.expected_seconds, policy);
    if (now < at) continue;
    const Duration over = now - at;
    if (best == nullptr || over > best_over || (over == best_over && r.shard->seq < best->seq)) {
      best = r.shard;
      best_over = over;
    }
  }
  return best;
}

}  // namespace triage::coord
