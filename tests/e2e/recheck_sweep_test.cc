// Rechecking the skipped entries (docs/nightly.md, "Rechecking skipped entries") on the
// ttxla-mini fixture with real processes: an n150 agent runs the NOT_SUPPORTED_SKIP entries with
// --force-run, twice each, and the nightly rules decide. Two sweeps on a device-time budget of
// the same number of entry-archs each: the second takes entries the first did not check, and
// both say how much of the skipped set is covered.

#include <set>

#include "common/util/strings.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/fixture_farm.h"
#include "tests/support/test_support.h"

namespace triage {
namespace {

using nlohmann::json;

class RecheckSweepTest : public testing::FixtureFarmTest {
 protected:
  RecheckSweepTest() : FixtureFarmTest({"--tick_ms", "200", "--heartbeat_interval_seconds", "2"}) {}

  // A recheck sweep on n150 within hours of device time, followed to its end: its status.
  json Recheck(double hours) {
    std::string out;
    EXPECT_EQ(
        Ctl({"sweep", "start", "--repo", repo_.string(), "--arch", "n150", "--recheck-skipped",
             "--max-device-hours", util::StrCat(hours), "--reason", "weekly recheck", "-o", "json"},
            &out),
        0)
        << out;
    const std::string id = json::parse(out, nullptr, false).value("id", "");
    EXPECT_FALSE(id.empty()) << out;
    EXPECT_EQ(Ctl({"sweep", "watch", id}, &out), 0) << out;
    EXPECT_EQ(Ctl({"sweep", "status", id, "-o", "json"}, &out), 0) << out;
    return json::parse(out, nullptr, false);
  }

  json Report(const std::string& id) {
    std::string out;
    const auto dir = dir_ / ("out-" + id);
    EXPECT_EQ(Ctl({"sweep", "report", id, "--out", dir.string()}, &out), 0) << out;
    return json::parse(testing::ReadFileOrDie(dir / "report.json"), nullptr, false);
  }
};

TEST_F(RecheckSweepTest, TwoBudgetedSweepsTakeTheLongestUncheckedFirst) {
  ASSERT_NO_FATAL_FAILURE(StartFixtureAgents("native", "native", {"n150"}));
  // The farm's estimate of a run (no recorded durations) is the same for every entry: a budget
  // holds the same number of entry-archs in both sweeps.
  const json first = Recheck(1.0);
  ASSERT_TRUE(first.contains("recheck")) << first.dump(2);
  const json& r1 = first["recheck"];
  const int skipped = r1.value("skipped", 0);
  const int per_sweep = r1.value("selected", 0);
  ASSERT_GT(per_sweep, 0) << first.dump(2);
  ASSERT_GE(skipped, 2 * per_sweep) << first.dump(2);
  EXPECT_EQ(r1.value("left", 0), skipped - per_sweep);
  EXPECT_EQ(r1.value("checked_before", 0), 0);
  EXPECT_EQ(r1.value("never_checked", 0), skipped - per_sweep);
  EXPECT_EQ(std::stoll(r1.value("oldest_check_unix_ms", "0")), 0) << "nothing was checked before";
  const json second = Recheck(1.0);
  const json& r2 = second["recheck"];
  EXPECT_EQ(r2.value("selected", 0), per_sweep) << second.dump(2);
  EXPECT_EQ(r2.value("checked_before", 0), per_sweep);
  EXPECT_EQ(r2.value("never_checked", 0), skipped - 2 * per_sweep);
  // Those left now include the ones the first sweep checked: the oldest check is known.
  EXPECT_GT(std::stoll(r2.value("oldest_check_unix_ms", "0")), 0) << second.dump(2);

  std::set<std::string> seen;
  for (const json* status : {&first, &second}) {
    const json report = Report(status->value("id", ""));
    ASSERT_TRUE(report.contains("recheck")) << report.dump(2).substr(0, 2000);
    EXPECT_EQ(report["recheck"].value("selected", 0), per_sweep);
    int decided = 0;
    for (const auto& e : report["entries"]) {
      const std::string key = e.value("key", "");
      EXPECT_TRUE(seen.insert(key).second) << key << " rechecked twice";
      const std::string verdict = e["verdicts"]["n150"].value("verdict", "");
      SCOPED_TRACE(key + ": " + verdict);
      if (verdict == "unskip_xfail") {
        // A clean failure: KNOWN_FAILURE_XFAIL with the stage and the error the runs showed.
        ASSERT_TRUE(e["outcome"].is_object());
        EXPECT_EQ(e["outcome"].value("status", ""), "KNOWN_FAILURE_XFAIL");
        EXPECT_FALSE(e["outcome"].value("reason", "").empty());
        EXPECT_FALSE(e["outcome"].value("bringup_status", "").empty());
      } else if (verdict == "refresh_skip") {
        ASSERT_TRUE(e["outcome"].is_object());
        EXPECT_EQ(e["outcome"].value("status", ""), "NOT_SUPPORTED_SKIP");
      } else {
        // The skip's reason says what both runs showed already; nothing changes.
        EXPECT_EQ(verdict, "already");
        EXPECT_TRUE(e["outcome"].is_null());
      }
      // The hang of the fixture's slow model stays a skip.
      if (key.starts_with("slow_mini/")) {
        EXPECT_NE(verdict, "unskip_xfail");
      }
      ++decided;
    }
    EXPECT_EQ(decided, per_sweep);
  }
  EXPECT_EQ(static_cast<int>(seen.size()), 2 * per_sweep);
}

}  // namespace
}  // namespace triage
