// Issue drafts (coordinator/merge/issue_drafts.h): one per remediation cluster left failing, from
// report.json alone. On a small report: what a draft says; on a report of every failing entry of
// the real tt-xla test-config files (../shared/data): every failing test in exactly one draft.

#include "coordinator/merge/issue_drafts.h"

#include <map>
#include <set>
#include <string>

#include "common/inventory/inventory.h"
#include "common/junit/reason.h"
#include "common/util/strings.h"
#include "coordinator/merge/report_internal.h"
#include "coordinator/planning/planner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/test_support.h"

namespace triage::merge {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

// A command sweep's entry of report.json: failing on n150 unless fixed.
json Entry(const std::string& key, const std::string& fingerprint, const std::string& cluster,
           const std::string& reason, bool fixed) {
  json summary = {{"fingerprint", fingerprint},
                  {"layer", "tt-mlir"},
                  {"root_cause", "bad op"},
                  {"result", fixed ? "pass" : "failed"}};
  json e = {
      {"key", key},
      {"file", "tests/runner/test_config/torch/test_config_inference_single_device.yaml"},
      {"node_id", "tests/runner/test_models.py::test_all_models_torch[" + key + "]"},
      {"fingerprint", fingerprint.empty() ? json(nullptr) : json(fingerprint)},
      {"cluster", cluster.empty() ? json(nullptr) : json(cluster)},
      {"arch_outcomes", {{"n150", fixed ? json{{"status", "EXPECTED_PASSING"}} : json(nullptr)}}},
      {"verdicts",
       {{"n150",
         {{"verdict", fixed ? "pass" : "failure"},
          {"stage", "FAILED_TTMLIR_COMPILATION"},
          {"reason", reason},
          {"shard", "sw-0001-s00" + std::to_string(key.size() % 10)}}}}},
      {"evidence", {"evidence/w1-" + key + "/junit/01-verify.xml"}}};
  if (!fingerprint.empty()) e["verdicts"]["n150"]["summary"] = summary;
  return e;
}

json Report(json entries) {
  json report = {{"sweep", "sw-0001"},
                 {"commits", {{"tt-xla", "0123456789abcdef"}, {"tt_forge_models", "fedcba98"}}},
                 {"entries", entries}};
  report["remediation"] = report_internal::RemediationJson(entries);
  return report;
}

TEST(IssueDrafts, OneDraftPerClusterLeftFailingSayingWhatAReviewerNeeds) {
  json report = Report(json::array({
      Entry("a/pytorch-single_device-inference", "ttir-gather", "", "error: gather", false),
      Entry("b/pytorch-single_device-inference", "ttir-gather", "", "error: gather", false),
      Entry("c/pytorch-single_device-inference", "fixed-bug", "", "error: x", true),
      Entry("d/pytorch-single_device-inference", "", "c-0123abcd", "RuntimeError: `odd`", false),
  }));
  report["workarounds"] = json::array(
      {{{"shard", "sw-0001-s009"},
        {"entries", {"a/pytorch-single_device-inference"}},
        {"found", {{{"guard", "cpu_offload"}, {"where", "tt_forge_models/a/loader.py:3"}}}}}});
  auto drafts = BuildIssueDrafts(report, {.evidence_url = "https://ci.example/sw-0001"});
  ASSERT_TRUE(drafts.ok()) << drafts.status();
  ASSERT_EQ(drafts->size(), 2u);
  const IssueDraft& gather = (*drafts)[0];
  EXPECT_EQ(gather.file, "fingerprint-ttir-gather.md");
  EXPECT_EQ(gather.title, "ttir-gather: error: gather (2 tests)");
  EXPECT_EQ(gather.failing, 2);
  for (const std::string& line :
       {"**Layer:** tt-mlir", "**Tests still failing:** 2 of 2 in the cluster (the sweep fixed 0)",
        "at tt-xla `0123456789ab`", "```\nerror: gather\n```",
        "Stage: `FAILED_TTMLIR_COMPILATION`.", "- bad op", "### n150 (2)",
        "- `a/pytorch-single_device-inference` (failure; entry unchanged) "
        "([evidence](https://ci.example/sw-0001/evidence/w1-a/pytorch-single_device-inference/"
        "junit/01-verify.xml))",
        "shard sw-0001-s009's change was held for review: cpu_offload at "
        "`tt_forge_models/a/loader.py:3`",
        "pytest -svv 'tests/runner/test_models.py::test_all_models_torch[a/"}) {
    EXPECT_THAT(gather.body, HasSubstr(line)) << gather.body;
  }
  const IssueDraft& odd = (*drafts)[1];
  EXPECT_EQ(odd.by, "reason");
  EXPECT_EQ(odd.file, "cluster-c-0123abcd.md");
  EXPECT_THAT(odd.body, HasSubstr("**Failure cluster:** `c-0123abcd`"));
  EXPECT_THAT(odd.body, HasSubstr("**Layer:** unknown"));
  for (const auto& d : *drafts) EXPECT_THAT(d.body, Not(HasSubstr("c/pytorch"))) << "fixed";
}

// A cluster of thousands of tests: the draft stays under a tracker's cap and counts the rest.
TEST(IssueDrafts, AHugeClusterListsWhatFitsAndCountsTheRest) {
  json entries = json::array();
  for (int i = 0; i < 3000; ++i) {
    entries.push_back(Entry(util::StrCat("model_", i, "/pytorch-Variant-single_device-inference"),
                            "huge", "", "error: one op", false));
  }
  auto drafts = BuildIssueDrafts(Report(entries));
  ASSERT_TRUE(drafts.ok()) << drafts.status();
  ASSERT_EQ(drafts->size(), 1u);
  const IssueDraft& d = drafts->front();
  EXPECT_EQ(d.failing, 3000);
  EXPECT_LT(d.title.size() + d.body.size(), 60000u);
  EXPECT_THAT(d.body, HasSubstr("### n150 (3000)"));
  EXPECT_THAT(d.body, ::testing::ContainsRegex("- and [0-9]+ more: see the sweep's report.json"));
  EXPECT_THAT(d.body, HasSubstr("## Reproduce")) << "the sections after the list stay";
}

TEST(IssueDrafts, AReportWithoutRemediationIsRefusedNamingWhy) {
  auto none = BuildIssueDrafts(json{{"sweep", "sw-0002"}, {"entries", json::array()}});
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(std::string(none.status().message()),
              HasSubstr("sweep sw-0002 has no remediation clusters"));
  EXPECT_FALSE(BuildIssueDrafts(json::array()).ok());
  // Every cluster fixed: no drafts.
  auto fixed = BuildIssueDrafts(
      Report(json::array({Entry("c/pytorch-single_device-inference", "x", "", "e", true)})));
  ASSERT_TRUE(fixed.ok());
  EXPECT_TRUE(fixed->empty());
}

// Every failing entry of the real files, grouped by the failure cluster of its reason as a
// command sweep that fixed nothing would report them: each failing test is in exactly one draft,
// under its arch, and every draft's title is one line.
TEST(IssueDrafts, EveryFailingEntryOfTheRealFilesIsInExactlyOneDraft) {
  TRIAGE_REQUIRE_SHARED_DATA(dir);
  inventory::WorkTreeSource source(dir / "head");
  auto inv = inventory::LoadInventory(source);
  ASSERT_TRUE(inv.ok()) << inv.status();
  json entries = json::array();
  std::set<std::string> failing;
  for (const auto& ref : inv->TestEntries()) {
    const std::string status(ref.entry->Status());
    if (status != "KNOWN_FAILURE_XFAIL" && status != "NOT_SUPPORTED_SKIP") continue;
    const std::string reason(ref.entry->StringField("reason"));
    const std::string key = ref.entry->key;
    json e = Entry(key, "", reason.empty() ? "" : junit::ClusterIdOfReason(reason), reason, false);
    e["file"] = ref.document->path();
    e["node_id"] = coord::NodeId(*ref.document, *ref.entry);
    if (!reason.empty()) failing.insert(ref.document->path() + "\n" + key);
    entries.push_back(std::move(e));
  }
  ASSERT_GT(failing.size(), 500u)
      << "the real files hold hundreds of failing entries with a reason";
  const json report = Report(entries);
  auto drafts = BuildIssueDrafts(report);
  ASSERT_TRUE(drafts.ok()) << drafts.status();
  EXPECT_EQ(drafts->size(), report["remediation"].size());
  int total = 0;
  std::set<std::string> files;
  std::map<std::string, int> seen;  // key -> drafts naming it under n150
  for (const auto& d : *drafts) {
    total += d.failing;
    EXPECT_TRUE(files.insert(d.file).second) << d.file;
    EXPECT_EQ(d.title.find('\n'), std::string::npos) << d.title;
    EXPECT_LE(d.title.size(), 220u) << d.title;
    EXPECT_LT(d.body.size(), 60000u) << d.id;
    EXPECT_THAT(d.body, HasSubstr(util::StrCat("### n150 (", d.failing, ")"))) << d.id;
    const json* group = nullptr;
    for (const auto& g : report["remediation"]) {
      if (g["id"] == d.id) group = &g;
    }
    ASSERT_NE(group, nullptr) << d.id;
    for (const auto& k : (*group)["entries"]) {
      if (d.body.find("- `" + k.get<std::string>() + "` (") != std::string::npos) {
        ++seen[k.get<std::string>()];
      }
    }
  }
  EXPECT_EQ(total, static_cast<int>(failing.size()));
  for (const auto& id : failing) {
    const std::string key = id.substr(id.find('\n') + 1);
    EXPECT_GE(seen[key], 1) << key;
  }
}

}  // namespace
}  // namespace triage::merge
