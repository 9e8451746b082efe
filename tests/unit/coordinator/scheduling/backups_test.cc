// PickStraggler and StragglerAt on their own: which leased shard an idle agent backs up.

#include "coordinator/scheduling/backups.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace triage::coord {
namespace {

using namespace std::chrono_literals;

const TimePoint kT0 = FromUnixMillis(1'700'000'000'000);

ShardRecord Leased(const std::string& id, std::int64_t seq, Duration running_for, TimePoint now) {
  ShardRecord s;
  s.id = id;
  s.seq = seq;
  s.state = ShardState::kRunning;
  LeaseInfo l;
  l.lease_id = id + "-l1";
  l.agent_id = "a1";
  l.granted_at = now - running_for;
  s.lease = l;
  return s;
}

TEST(StragglerAtTest, AfterTimesTheEstimatePlusTheSlack) {
  const BackupPolicy policy{.after = 1.5, .slack = 10min};
  struct Row {
    double expected_seconds;
    std::chrono::duration<double> due;  // after the grant
  };
  const std::vector<Row> rows = {
      {0, 10min},                   // no estimate: the slack alone
      {60, 690s},                   // 1.5 x 1 min + 10 min
      {1200, 40min},                // 1.5 x 20 min + 10 min
      {3600, 100min}, {-5, 10min},  // a negative estimate counts as none
  };
  for (const Row& r : rows) {
    EXPECT_EQ(StragglerAt(kT0, r.expected_seconds, policy),
              kT0 + std::chrono::duration_cast<Duration>(r.due))
        << r.expected_seconds;
  }
}

TEST(PickStragglerTest, PicksTheShardFurthestPastItsDueTime) {
  const TimePoint now = kT0;
  const BackupPolicy policy{.after = 2, .slack = 0s};
  // expected 100 s each: due 200 s after the grant.
  ShardRecord on_time = Leased("on-time", 1, 150s, now);
  ShardRecord late = Leased("late", 2, 300s, now);
  ShardRecord later = Leased("later", 3, 500s, now);
  ShardRecord backed_up = Leased("backed-up", 4, 900s, now);
  backed_up.backup = *backed_up.lease;  // one backup per shard
  ShardRecord no_lease = Leased("no-lease", 5, 900s, now);
  no_lease.lease.reset();
  struct Row {
    std::vector<const ShardRecord*> shards;
    std::string want;  // "" for none
  };
  const std::vector<Row> rows = {
      {{}, ""},
      {{&on_time}, ""},
      {{&on_time, &late}, "late"},
      {{&late, &later, &on_time}, "later"},
      {{&backed_up, &no_lease, &on_time}, ""},
      {{&backed_up, &late}, "late"},
  };
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::vector<RunningShard> running;
    for (const ShardRecord* s : rows[i].shards) running.push_back({s, 100});
    const ShardRecord* got = PickStraggler(running, policy, now);
    EXPECT_EQ(got == nullptr ? "" : got->id, rows[i].want) << "row " << i;
  }
}

TEST(PickStragglerTest, ABatchsLaterShardIsDueAfterThoseBeforeIt) {
  const TimePoint now = kT0;
  const BackupPolicy policy{.after = 1.5, .slack = 0s};
  // Both leased 400 s ago as one batch of 200 s shards: the head is due at 300 s, the second
  // (planned to end at 400 s) at 600 s.
  ShardRecord head = Leased("head", 1, 400s, now);
  ShardRecord second = Leased("second", 2, 400s, now);
  const ShardRecord* got = PickStraggler({{&second, 400}, {&head, 200}}, policy, now);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->id, "head");
  EXPECT_EQ(PickStraggler({{&second, 400}}, policy, now), nullptr);
}

TEST(PickStragglerTest, TiesGoToTheOldestShardAndZeroTurnsBackupsOff) {
  const TimePoint now = kT0;
  ShardRecord a = Leased("a", 7, 1h, now);
  ShardRecord b = Leased("b", 3, 1h, now);
  const BackupPolicy on{.after = 1.5, .slack = 1min};
  const ShardRecord* got = PickStraggler({{&a, 60}, {&b, 60}}, on, now);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->id, "b");
  const BackupPolicy off{.after = 0, .slack = 1min};
  EXPECT_EQ(PickStraggler({{&a, 60}, {&b, 60}}, off, now), nullptr);
}

}  // namespace
}  // namespace triage::coord
