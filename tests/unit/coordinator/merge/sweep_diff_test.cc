// Two sweeps' report.json compared (coordinator/merge/sweep_diff.h) on small hand-written
// reports: every category, how unchanged entries and missing archs are read, the cluster deltas
// and their order, the JSON shape, and reports that are not shaped like report.json. Then the
// report's week-over-week section (coordinator/merge/week_over_week.h).

#include "coordinator/merge/sweep_diff.h"

#include <map>
#include <string>

#include "coordinator/merge/week_over_week.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace triage::merge {
namespace {

using nlohmann::json;

constexpr char kFile[] = "tests/runner/test_config/torch/test_config_training_single_device.yaml";
constexpr char kOom[] = "Out of Memory: Not enough space to allocate 1048576 B DRAM buffer";
constexpr char kOom2[] = "Out of Memory: Not enough space to allocate 2097152 B DRAM buffer";
constexpr char kGather[] = "error: 'ttir.gather' op failed to verify operand shapes";

// An outcome as report.json writes it.
json Out(const std::string& status, const std::string& reason = "") {
  return {{"status", status},
          {"bringup_status", reason.empty() ? json(nullptr) : json("FAILED_RUNTIME")},
          {"reason", reason.empty() ? json(nullptr) : json(reason)},
          {"assert_pcc", nullptr},
          {"markers", nullptr}};
}
json Pass() { return Out("EXPECTED_PASSING"); }
json Xfail(const std::string& reason) { return Out("KNOWN_FAILURE_XFAIL", reason); }

// An entry of report.json with its outcome per arch (null: unchanged) and verdicts.
json Entry(const std::string& key, json arch_outcomes, json verdicts = json::object()) {
  json outcome = nullptr;
  if (arch_outcomes.contains("n150")) outcome = arch_outcomes["n150"];
  return {{"key", key},
          {"file", kFile},
          {"playbook", "unpack_forward_output"},
          {"outcome", outcome},
          {"arch_outcomes", arch_outcomes},
          {"verdicts", verdicts},
          {"review", json::array()}};
}

json Report(const std::string& id, json entries, json clusters = json::array()) {
  return {{"sweep", id},
          {"state", "succeeded"},
          {"repo", "/src/tt-xla"},
          {"entries", entries},
          {"clusters", clusters}};
}

json Cluster(const std::string& signature, int size) {
  return {
      {"signature", signature}, {"example", signature}, {"size", size}, {"entries", json::array()}};
}

// key + ' ' + arch -> category name.
std::map<std::string, std::string> Categories(const SweepDiff& d) {
  std::map<std::string, std::string> out;
  for (const auto& e : d.entries) {
    EXPECT_TRUE(out.emplace(e.key + " " + e.arch, std::string(DiffCategoryName(e.category))).second)
        << e.key << " on " << e.arch << " has two categories";
  }
  return out;
}

TEST(SweepDiff, EveryEntryAndArchGetsExactlyOneCategory) {
  const json a = Report(
      "sw-a", {Entry("fixed", {{"n150", Xfail(kOom)}}), Entry("regressed", {{"n150", Pass()}}),
               Entry("changed", {{"n150", Xfail(kOom)}}), Entry("same", {{"n150", Xfail(kOom)}}),
               Entry("passing", {{"n150", Pass()}}), Entry("carried", {{"n150", Pass()}}),
               Entry("gone", {{"n150", Xfail(kGather)}})});
  json carried = Entry("carried", {{"n150", Xfail(kGather)}});
  carried["carried_from"] = "sw-0";
  const json b = Report(
      "sw-b", {Entry("fixed", {{"n150", Pass()}}), Entry("regressed", {{"n150", Xfail(kGather)}}),
               Entry("changed", {{"n150", Xfail(kGather)}}),
               // The same failure on another model size: one signature.
               Entry("same", {{"n150", Xfail(kOom2)}}), Entry("passing", {{"n150", Pass()}}),
               carried, Entry("new failing", {{"n150", Out("NOT_SUPPORTED_SKIP", kGather)}}),
               Entry("new passing", {{"n150", Pass()}})});
  auto d = DiffSweeps(a, b);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->before_sweep, "sw-a");
  EXPECT_EQ(d->after_sweep, "sw-b");
  const std::map<std::string, std::string> want = {{"fixed n150", "fixed"},
                                                   {"regressed n150", "regressed"},
                                                   {"changed n150", "still_failing_changed"},
                                                   {"same n150", "still_failing"},
                                                   {"passing n150", "still_passing"},
                                                   {"carried n150", "carried"},
                                                   {"new failing n150", "new_failure"},
                                                   {"new passing n150", "new_passing"},
                                                   {"gone n150", "gone"}};
  EXPECT_EQ(Categories(*d), want);
  for (const auto& [c, n] : d->Counts()) EXPECT_EQ(n, 1) << DiffCategoryName(c);
  // The newer sweep's order, then the gone ones.
  EXPECT_EQ(d->entries.front().key, "fixed");
  EXPECT_EQ(d->entries.back().key, "gone");
  for (const auto& e : d->entries) {
    if (e.key == "changed") {
      ASSERT_TRUE(e.before && e.after);
      EXPECT_EQ(e.before->signature, "Out of Memory: Not enough space to allocate N B DRAM buffer");
      EXPECT_EQ(e.after->signature, kGather);
    }
    if (e.key == "carried") EXPECT_EQ(e.carried_from, "sw-0");
    if (e.key == "gone") EXPECT_FALSE(e.after.has_value());
    if (e.key == "new failing") EXPECT_FALSE(e.before.has_value());
  }
}

// A carried entry is listed as carried whatever it did, and a null carried_from is no carry.
TEST(SweepDiff, CarriedEntriesAreCarriedWhateverTheirStatus) {
  json fixed_carried = Entry("x", {{"n150", Pass()}});
  fixed_carried["carried_from"] = "sw-0";
  json not_carried = Entry("y", {{"n150", Pass()}});
  not_carried["carried_from"] = nullptr;
  auto d = DiffSweeps(
      Report("a", {Entry("x", {{"n150", Xfail(kOom)}}), Entry("y", {{"n150", Xfail(kOom)}})}),
      Report("b", {fixed_carried, not_carried}));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(Categories(*d),
            (std::map<std::string, std::string>{{"x n150", "carried"}, {"y n150", "fixed"}}));
}

// An entry the patch leaves unchanged (outcome null) stays at its failing YAML status; its reason
// is the verdict's when the arch has one, else unknown, and unknown never reads as a change.
TEST(SweepDiff, UnchangedEntriesFailWithTheVerdictsReason) {
  const json verdict_oom = {{"n150", {{"verdict", "failure"}, {"stage", ""}, {"reason", kOom}}}};
  const json a = Report(
      "a", {Entry("to-pass", {{"n150", nullptr}}), Entry("unknown-then-known", {{"n150", nullptr}}),
            Entry("verdict-then-other", {{"n150", nullptr}}, verdict_oom),
            Entry("verdict-then-same", {{"n150", nullptr}}, verdict_oom),
            Entry("passing-then-unchanged", {{"n150", Pass()}})});
  const json b = Report("b", {Entry("to-pass", {{"n150", Pass()}}),
                              Entry("unknown-then-known", {{"n150", Xfail(kGather)}}),
                              Entry("verdict-then-other", {{"n150", Xfail(kGather)}}),
                              Entry("verdict-then-same", {{"n150", Xfail(kOom2)}}),
                              Entry("passing-then-unchanged", {{"n150", nullptr}})});
  auto d = DiffSweeps(a, b);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(Categories(*d), (std::map<std::string, std::string>{
                                {"to-pass n150", "fixed"},
                                {"unknown-then-known n150", "still_failing"},
                                {"verdict-then-other n150", "still_failing_changed"},
                                {"verdict-then-same n150", "still_failing"},
                                {"passing-then-unchanged n150", "regressed"}}));
  const auto unchanged = ReadArchState(a["entries"][2], "n150");
  ASSERT_TRUE(unchanged.has_value());
  EXPECT_EQ(unchanged->status, "unchanged");
  EXPECT_FALSE(unchanged->passing);
  EXPECT_EQ(unchanged->reason, kOom);
  const auto unknown = ReadArchState(a["entries"][0], "n150");
  ASSERT_TRUE(unknown.has_value());
  EXPECT_FALSE(unknown->signature.has_value());
  EXPECT_FALSE(ReadArchState(a["entries"][0], "p150").has_value()) << "not a target arch of it";
}

// Archs are compared one by one: an arch the older sweep did not target is new, one the newer
// sweep does not target is gone.
TEST(SweepDiff, ArchsAreComparedOneByOne) {
  auto d = DiffSweeps(Report("a", {Entry("k", {{"n150", Xfail(kOom)}}),
                                   Entry("m", {{"n150", Pass()}, {"p150", Pass()}})}),
                      Report("b", {Entry("k", {{"n150", Xfail(kOom)}, {"p150", Xfail(kOom)}}),
                                   Entry("m", {{"n150", Pass()}})}));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(Categories(*d), (std::map<std::string, std::string>{{"k n150", "still_failing"},
                                                                {"k p150", "new_failure"},
                                                                {"m n150", "still_passing"},
                                                                {"m p150", "gone"}}));
}

// Entries are one by file and key: the same key in another file is another entry.
TEST(SweepDiff, EntriesAreIdentifiedByFileAndKey) {
  json other = Entry("k", {{"n150", Pass()}});
  other["file"] = "tests/runner/test_config/torch/other.yaml";
  auto d = DiffSweeps(Report("a", {Entry("k", {{"n150", Xfail(kOom)}})}), Report("b", {other}));
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->entries.size(), 2u);
  EXPECT_EQ(d->entries[0].category, DiffCategory::kNewPassing);
  EXPECT_EQ(d->entries[1].category, DiffCategory::kGone);
}

// Every signature of either sweep, with new and vanished clusters, by |delta|, then size, then
// signature.
TEST(SweepDiff, ClusterDeltasIncludeNewAndVanishedClustersLargestChangeFirst) {
  const json a = Report(
      "a", json::array(),
      {Cluster("oom N B", 5), Cluster("gather", 2), Cluster("steady", 7), Cluster("vanished", 1)});
  const json b = Report(
      "b", json::array(),
      {Cluster("oom N B", 2), Cluster("gather", 4), Cluster("steady", 7), Cluster("new", 3)});
  auto d = DiffSweeps(a, b);
  ASSERT_TRUE(d.ok()) << d.status();
  std::vector<std::tuple<std::string, int, int, int>> got;
  for (const auto& c : d->clusters) got.emplace_back(c.signature, c.before, c.after, c.delta());
  const std::vector<std::tuple<std::string, int, int, int>> want = {{"oom N B", 5, 2, -3},
                                                                    {"new", 0, 3, 3},
                                                                    {"gather", 2, 4, 2},
                                                                    {"vanished", 1, 0, -1},
                                                                    {"steady", 7, 7, 0}};
  EXPECT_EQ(got, want);
}

// A report.json written before it had "clusters": its clusters are counted from its entries.
TEST(SweepDiff, ClustersOfAnOlderReportWithoutThemAreCountedFromItsEntries) {
  json a = Report("a", {Entry("k1", {{"n150", Xfail(kOom)}, {"p150", Xfail(kOom2)}}),
                        Entry("k2", {{"n150", Xfail(kOom)}}), Entry("k3", {{"n150", Pass()}}),
                        Entry("k4", {{"n150", nullptr}})});
  a.erase("clusters");
  const json b =
      Report("b", json::array(),
             {Cluster("Out of Memory: Not enough space to allocate N B DRAM buffer", 1)});
  auto d = DiffSweeps(a, b);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->clusters.size(), 1u);
  EXPECT_EQ(d->clusters[0].before, 2) << "entries, not entry-arch pairs";
  EXPECT_EQ(d->clusters[0].after, 1);
}

TEST(SweepDiff, ReportsNotShapedLikeReportJsonAreRefusedNamingTheField) {
  const json good = Report("b", {Entry("k", {{"n150", Pass()}})});
  struct Case {
    json report;
    std::string names;
  };
  json no_entries = good;
  no_entries.erase("entries");
  json bad_outcomes = good;
  bad_outcomes["entries"][0]["arch_outcomes"] = json::array();
  json bad_outcome = good;
  bad_outcome["entries"][0]["arch_outcomes"]["n150"] = {{"reason", "x"}};
  json no_key = good;
  no_key["entries"][0].erase("key");
  json twice = good;
  twice["entries"].push_back(twice["entries"][0]);
  json bad_clusters = good;
  bad_clusters["clusters"] = {{{"signature", "x"}}};
  json bad_carried = good;
  bad_carried["entries"][0]["carried_from"] = 3;
  const std::vector<Case> cases = {
      {json::array(), "is not an object"},
      {no_entries, "\"entries\" is not an array"},
      {bad_outcomes, "entries[0]: \"arch_outcomes\" is not an object"},
      {bad_outcome, "entries[0]: arch_outcomes.n150 is neither null nor an outcome"},
      {no_key, "entries[0]: \"key\" is not a string"},
      {twice, "entries[1]: k of " + std::string(kFile) + " is listed twice"},
      {bad_clusters, "clusters[0] needs a string \"signature\" and an integer \"size\""},
      {bad_carried, "entries[0]: \"carried_from\" is neither null nor a sweep id"}};
  for (const auto& c : cases) {
    auto as_newer = DiffSweeps(good, c.report);
    ASSERT_FALSE(as_newer.ok()) << c.names;
    EXPECT_NE(as_newer.status().message().find(c.names), std::string::npos)
        << as_newer.status().message();
    EXPECT_NE(as_newer.status().message().find("newer"), std::string::npos)
        << as_newer.status().message();
    auto as_older = DiffSweeps(c.report, good);
    ASSERT_FALSE(as_older.ok()) << c.names;
    EXPECT_NE(as_older.status().message().find("older"), std::string::npos)
        << as_older.status().message();
  }
}

TEST(SweepDiff, JsonListsTheNonTrivialEntriesUnlessAll) {
  auto d = DiffSweeps(
      Report("a", {Entry("fixed", {{"n150", Xfail(kOom)}}), Entry("same", {{"n150", Xfail(kOom)}}),
                   Entry("passing", {{"n150", Pass()}})}),
      Report("b",
             {Entry("fixed", {{"n150", Pass()}}), Entry("same", {{"n150", Xfail(kOom)}}),
              Entry("passing", {{"n150", Pass()}})},
             {Cluster("x", 1)}));
  ASSERT_TRUE(d.ok()) << d.status();
  const json j = DiffJson(*d, /*all=*/false);
  EXPECT_EQ(j["before"], "a");
  EXPECT_EQ(j["after"], "b");
  EXPECT_EQ(j["counts"], json({{"fixed", 1},
                               {"regressed", 0},
                               {"new_failure", 0},
                               {"still_failing_changed", 0},
                               {"still_failing", 1},
                               {"still_passing", 1},
                               {"new_passing", 0},
                               {"carried", 0},
                               {"gone", 0}}));
  ASSERT_EQ(j["entries"].size(), 1u) << j.dump(2);
  EXPECT_EQ(
      j["entries"][0],
      json(
          {{"key", "fixed"},
           {"file", kFile},
           {"arch", "n150"},
           {"category", "fixed"},
           {"before",
            {{"status", "KNOWN_FAILURE_XFAIL"},
             {"reason", kOom},
             {"signature", "Out of Memory: Not enough space to allocate N B DRAM buffer"}}},
           {"after",
            {{"status", "EXPECTED_PASSING"}, {"reason", nullptr}, {"signature", "(no reason)"}}}}));
  EXPECT_EQ(j["clusters"],
            json::array({{{"signature", "x"}, {"before", 0}, {"after", 1}, {"delta", 1}}}));
  EXPECT_EQ(DiffJson(*d, /*all=*/true)["entries"].size(), 3u);
  EXPECT_EQ(StateText(d->entries[0].before), std::string("KNOWN_FAILURE_XFAIL: ") + kOom);
  EXPECT_EQ(StateText(d->entries[0].after), "EXPECTED_PASSING");
  EXPECT_EQ(StateText(std::nullopt), "-");
}

// ---- the report's week-over-week section

TEST(ReportWeekOverWeek, ComparesWithThePreviousSweepsReport) {
  const json previous =
      Report("sw-a",
             {Entry("k1", {{"n150", Xfail(kOom)}}), Entry("k2", {{"n150", Pass()}}),
              Entry("k3", {{"n150", Xfail(kOom)}})},
             {Cluster("Out of Memory: Not enough space to allocate N B DRAM buffer", 2)});
  json report = Report("sw-b",
                       {Entry("k1", {{"n150", Pass()}}), Entry("k2", {{"n150", Xfail(kGather)}}),
                        Entry("k3", {{"n150", Xfail(kOom)}})},
                       {Cluster("Out of Memory: Not enough space to allocate N B DRAM buffer", 1),
                        Cluster(kGather, 1)});
  const std::string md = AddWeekOverWeek(PreviousReport{"sw-a", previous.dump()}, report);
  const json& wow = report["week_over_week"];
  EXPECT_EQ(wow["previous"], "sw-a");
  EXPECT_EQ(wow["counts"]["fixed"], 1);
  EXPECT_EQ(wow["counts"]["regressed"], 1);
  EXPECT_EQ(wow["counts"]["still_failing"], 1);
  ASSERT_EQ(wow["entries"].size(), 2u) << "still_failing as a count only";
  EXPECT_EQ(wow["entries"][0]["key"], "k1");
  EXPECT_EQ(wow["entries"][0]["category"], "fixed");
  EXPECT_EQ(wow["entries"][1]["category"], "regressed");
  ASSERT_EQ(wow["clusters"].size(), 2u);
  EXPECT_FALSE(wow.contains("error"));
  EXPECT_TRUE(md.starts_with("\n## Since sweep sw-a\n\n")) << md;
  EXPECT_NE(md.find("fixed 1 · regressed 1 · still_failing 1."), std::string::npos) << md;
  EXPECT_NE(md.find("| k1 | n150 | fixed | KNOWN\\_FAILURE\\_XFAIL: " + std::string(kOom) +
                    " | EXPECTED\\_PASSING |\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| 0 | 1 | +1 | error: 'ttir.gather' op failed to verify operand shapes |\n"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("| k3 |"), std::string::npos) << "still failing the same way: counted only";
}

TEST(ReportWeekOverWeek, WithoutAPreviousSweepSaysSoInOneLine) {
  json report = Report("sw-b", {Entry("k1", {{"n150", Pass()}})});
  const std::string md = AddWeekOverWeek(std::nullopt, report);
  EXPECT_EQ(report["week_over_week"], json({{"previous", nullptr},
                                            {"counts", json::object()},
                                            {"entries", json::array()},
                                            {"clusters", json::array()}}));
  EXPECT_EQ(md,
            "\n## Since the previous sweep\n\nNo earlier sweep of this repository has a report "
            "to compare with.\n");
}

TEST(ReportWeekOverWeek, AnUnreadablePreviousReportIsNamedNotFatal) {
  json report = Report("sw-b", {Entry("k1", {{"n150", Pass()}})});
  const std::string md = AddWeekOverWeek(PreviousReport{"sw-a", "{\"sweep\": \"sw-a\"}"}, report);
  EXPECT_EQ(report["week_over_week"]["previous"], "sw-a");
  EXPECT_NE(report["week_over_week"].value("error", "").find("\"entries\" is not an array"),
            std::string::npos)
      << report["week_over_week"].dump();
  EXPECT_TRUE(report["week_over_week"]["entries"].empty());
  EXPECT_NE(md.find("Cannot compare with sweep sw-a: "), std::string::npos) << md;
  json again = Report("sw-b", json::array());
  AddWeekOverWeek(PreviousReport{"sw-a", "not json"}, again);
  EXPECT_EQ(again["week_over_week"].value("error", ""), "its report.json is not JSON");
}

}  // namespace
}  // namespace triage::merge
