// The pull requests' text (docs/landing.md, "PR text") from report.json documents.

#include "coordinator/merge/pr_text.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace triage::merge {
namespace {

using nlohmann::json;

json Outcome(const std::string& status, const std::string& reason = "") {
  return {{"status", status},
          {"reason", reason.empty() ? json(nullptr) : json(reason)},
          {"bringup_status", nullptr},
          {"assert_pcc", nullptr},
          {"markers", nullptr}};
}

json TriageReport() {
  json r = {
      {"sweep", "sw-0007"},
      {"executor", "native"},
      {"playbooks", {"unpack_forward_output"}},
      {"archs", {"n150", "p150"}},
      {"commits", {{"tt-xla", std::string(40, 'a')}, {"tt_forge_models", std::string(40, 'b')}}},
      {"partial", nullptr},
      {"registry", {{{"op", "add"}, {"class", "MiniOut"}, {"attr", "logits"}, {"entries", 1}}}},
      {"entries", json::array()}};
  r["entries"].push_back({{"key", "m/pytorch-A"},
                          {"file", "f.yaml"},
                          {"loader", "third_party/tt_forge_models/m/pytorch/loader.py"},
                          {"playbook", "unpack_forward_output"},
                          {"fix_path", "registry"},
                          {"output_class", "MiniOut"},
                          {"placement", "top_level"},
                          {"outcome", Outcome("EXPECTED_PASSING")},
                          {"loss_target", {{"reason", "classification: `logits` (1, 2)"}}},
                          {"verdicts", {{"n150", {{"verdict", "pass"}, {"stage", ""}}}}},
                          {"review", json::array()},
                          {"evidence", {"evidence/w1/junit/01-verify.xml"}}});
  r["entries"].push_back(
      {{"key", "m/pytorch-B"},
       {"file", "f.yaml"},
       {"loader", "third_party/tt_forge_models/m/pytorch/loader.py"},
       {"playbook", "unpack_forward_output"},
       {"fix_path", "none"},
       {"placement", "top_level"},
       {"outcome", Outcome("KNOWN_FAILURE_XFAIL", "error: boom")},
       {"verdicts", {{"n150", {{"verdict", "failure"}, {"stage", "FAILED_RUNTIME"}}}}},
       {"review", {"check the `reason`"}},
       {"evidence", json::array()}});
  r["entries"].push_back({{"key", "m/pytorch-C"},
                          {"file", "f.yaml"},
                          {"playbook", "unpack_forward_output"},
                          {"fix_path", "none"},
                          {"outcome", nullptr},
                          {"review", json::array()}});
  return r;
}

TEST(PrText, TtXlaGroupsChangesByKindWithWhy) {
  PrOptions options;
  options.evidence_url = "https://ci/x";
  auto t = BuildPrText(TriageReport(), PrRepo::kTtXla, options);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->title, "Triage sweep sw-0007: 1 promoted, 1 xfail");
  EXPECT_NE(t->body.find("read tt-xla `aaaaaaaaaaaa` and tt-forge-models `bbbbbbbbbbbb`"),
            std::string::npos)
      << t->body;
  EXPECT_NE(t->body.find("### Promoted to EXPECTED_PASSING (1)\n\n- `m/pytorch-A`: status: "
                         "EXPECTED_PASSING. Why: unpack_forward_output, fix `registry`; loss "
                         "target classification: `logits` (1, 2); verified: n150 pass "
                         "([evidence](https://ci/x/evidence/w1/junit/01-verify.xml))"),
            std::string::npos)
      << t->body;
  EXPECT_NE(t->body.find("n150 failure at FAILED_RUNTIME"), std::string::npos);
  EXPECT_NE(t->body.find("### Unchanged (left as they are) (1)\n\n- `m/pytorch-C`"),
            std::string::npos);
  EXPECT_NE(t->body.find("## Needs a person (1)"), std::string::npos);
  EXPECT_NE(t->body.find("- `m/pytorch-B`: check the `reason`"), std::string::npos) << t->body;
  EXPECT_EQ(t->CommitMessage(), t->title + "\n\n" + t->body);
}

TEST(PrText, LeftOutEntriesMoveToTheirOwnSection) {
  PrOptions options;
  options.left_out = {{"m/pytorch-B", "the entry changed upstream"}};
  options.ttxla_base = std::string(40, 'c');
  options.forge_commit = std::string(40, 'd');
  auto t = BuildPrText(TriageReport(), PrRepo::kTtXla, options);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->body.find("### KNOWN_FAILURE_XFAIL"), std::string::npos) << t->body;
  EXPECT_NE(
      t->body.find("## Left out of this PR (1)\n\n- `m/pytorch-B`: the entry changed upstream"),
      std::string::npos);
  EXPECT_NE(t->body.find("Applied entry by entry onto tt-xla `cccccccccccc`"), std::string::npos);
  EXPECT_NE(t->body.find("moves `third_party/tt_forge_models` to `" + std::string(40, 'd')),
            std::string::npos);
  EXPECT_EQ(t->body.find("## Needs a person"), std::string::npos) << "B was its only flag";
}

TEST(PrText, ForgeListsRegistryLinesAndLoaders) {
  json r = TriageReport();
  r["entries"][1]["fix_path"] = "loader_dtype";
  r["entries"][1]["probe_finding"] = "float32 passes";
  auto t = BuildPrText(r, PrRepo::kForge);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->title, "Triage sweep sw-0007: 1 registry line, 1 loader");
  EXPECT_NE(t->body.find("- `_register_attr(\"MiniOut\", \"logits\")` for `m/pytorch-A`. Why: "
                         "classification: `logits` (1, 2)"),
            std::string::npos)
      << t->body;
  EXPECT_NE(t->body.find("`m/pytorch/loader.py`:\n\n- `m/pytorch-B`: `loader_dtype`. Why: float32 "
                         "passes"),
            std::string::npos)
      << t->body;
}

TEST(PrText, NightlySectionsCarryTagsFiguresAndRuns) {
  json r = TriageReport();
  r["entries"] = json::array({{{"key", "k"},
                               {"file", "f.yaml"},
                               {"outcome", Outcome("EXPECTED_PASSING")},
                               {"review", json::array()}}});
  r["nightly"] = {{"intake", {{"runs", 2}, {"run_labels", {"nightly-100", "nightly-101"}}}},
                  {"sections",
                   {{"promoted",
                     {{{"key", "k"},
                       {"arch", "n150"},
                       {"change", "status: EXPECTED_PASSING"},
                       {"decision", "confirmed"},
                       {"confirmations",
                        {{{"outcome", "passed"},
                          {"guidance", {"RM_XFAIL"}},
                          {"pcc", 0.999},
                          {"pcc_threshold", 0.99}},
                         {{"outcome", "passed"},
                          {"guidance", {"RM_XFAIL"}},
                          {"pcc", 0.998},
                          {"pcc_threshold", 0.99}}}}}}},
                    {"flaky",
                     {{{"key", "f"},
                       {"arch", "p150"},
                       {"decision", "flaky"},
                       {"confirmations", json::array()}}}}}}};
  auto t = BuildPrText(r, PrRepo::kTtXla);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->title, "Nightly maintenance sw-0007: 1 promoted");
  EXPECT_NE(t->body.find("Nightly runs (oldest first): `nightly-100`, `nightly-101`."),
            std::string::npos)
      << t->body;
  EXPECT_NE(t->body.find("- `k` on n150: status: EXPECTED_PASSING. Why: guidance RM_XFAIL; pcc "
                         "0.999 (required 0.99) on n150; confirmed by 2 runs on the fleet\n"),
            std::string::npos)
      << t->body;
  EXPECT_NE(t->body.find("### Flaky (not changed) (1)\n\n- `f` on p150"), std::string::npos);
  EXPECT_NE(t->body.find("| Promoted | 1 |\n| Flaky (not changed) | 1 |\n"), std::string::npos)
      << t->body;
  EXPECT_EQ(t->counts, (std::map<std::string, std::size_t>{{"promoted", 1}, {"flaky", 1}}));
}

// A nightly item per arch; the PR lists the entry once, with each arch's change when they
// differ, and counts it once.
json NightlyItem(const std::string& key, const std::string& arch, const std::string& change,
                 const std::string& decision) {
  return {{"key", key},
          {"arch", arch},
          {"change", change},
          {"rule", "xfail passes in every run"},
          {"decision", decision},
          {"nightly", {{{"outcome", "xpassed"}, {"guidance", {"RM_XFAIL"}}}}},
          {"confirmations", json::array()}};
}

json NightlyReport(const json& sections, int entries) {
  json r = TriageReport();
  r["entries"] = json::array();
  for (int i = 0; i < entries; ++i) {
    r["entries"].push_back({{"key", "k" + std::to_string(i)},
                            {"file", "f.yaml"},
                            {"outcome", Outcome("EXPECTED_PASSING")},
                            {"review", json::array()}});
  }
  r["nightly"] = {{"intake", {{"runs", 1}}}, {"sections", sections}};
  return r;
}

TEST(PrText, NightlyEntryIsOneLineWhateverItsArchs) {
  json sections = {{"promoted",
                    {NightlyItem("k0", "n150", "status: EXPECTED_PASSING", "confirmed"),
                     NightlyItem("k0", "p150", "status: EXPECTED_PASSING", "confirmed"),
                     NightlyItem("k1", "n150", "status: EXPECTED_PASSING", "confirmed"),
                     NightlyItem("k1", "p150", "", "already")}}};
  auto t = BuildPrText(NightlyReport(sections, 2), PrRepo::kTtXla);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->title, "Nightly maintenance sw-0007: 2 promoted");
  EXPECT_NE(t->body.find("### Promoted (2)\n\n- `k0` on n150, p150: status: EXPECTED_PASSING. "
                         "Why: xfail passes in every run; guidance RM_XFAIL; confirmed by 0 runs "
                         "on the fleet\n- `k1` on n150, p150: p150 unchanged; n150 status: "
                         "EXPECTED_PASSING. Why: xfail passes in every run; guidance RM_XFAIL; "
                         "p150 already at target; n150 confirmed by 0 runs on the fleet\n"),
            std::string::npos)
      << t->body;
  EXPECT_EQ(t->counts.at("promoted"), 2u);
}

// --no-confirm is the sweep's choice: its changes have their own part, said once, and are not
// each "a person's".
TEST(PrText, NoConfirmChangesHaveTheirOwnPart) {
  json r = NightlyReport(
      {{"demoted", {NightlyItem("k0", "n150", "status: X", "no_confirm")}},
       {"promoted", {NightlyItem("k1", "n150", "status: Y", "confirmed")}},
       {"flagged",
        {NightlyItem("k2", "n150", "", "no_confirm"), NightlyItem("k3", "n150", "", "capacity")}}},
      4);
  auto t = BuildPrText(r, PrRepo::kTtXla);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->title, "Nightly maintenance sw-0007: 1 promoted, 1 demoted");
  const auto changes = t->body.find("## Changes by kind\n\n### Promoted (1)\n\n- `k1`");
  const auto alone = t->body.find(
      "## Proposed from the nightly alone (--no-confirm)\n\nNot confirmed on the fleet");
  ASSERT_NE(changes, std::string::npos) << t->body;
  ASSERT_NE(alone, std::string::npos) << t->body;
  EXPECT_GT(t->body.find("### Demoted to KNOWN_FAILURE_XFAIL (1)\n\n- `k0`"), alone);
  EXPECT_NE(t->body.find("**1 of the changes were decided from the nightly runs alone"),
            std::string::npos);
  EXPECT_EQ(t->body.find("Needs a person"), std::string::npos);
  EXPECT_NE(t->body.find("## Not changed\n\n### Flagged for a person (not changed) (2)\n\n- `k2`"),
            std::string::npos)
      << "what stays is listed once, whatever its decision: " << t->body;
}

// A night of tt-xla's size: every group shows its first lines, the rest folded as far as the
// budget goes, the remainder counted; nothing is cut mid-line and every entry is shown or counted.
TEST(PrText, AnyNumberOfEntriesStaysUnderGitHubsCap) {
  const char* kinds[] = {"promoted", "demoted", "thresholds", "reasons", "already"};
  json sections = json::object();
  int n = 0;
  for (const char* kind : kinds) {
    sections[kind] = json::array();
    for (int i = 0; i < 400; ++i, ++n) {
      const std::string key = "family_" + std::to_string(n) + "/pytorch-" + std::string(60, 'x') +
                              "-single_device-inference";
      for (const char* arch : {"n150", "p150"}) {
        sections[kind].push_back(
            NightlyItem(key, arch, "status: KNOWN_FAILURE_XFAIL, reason: " + std::string(120, 'r'),
                        "confirmed"));
      }
    }
  }
  json r = NightlyReport(sections, n);
  for (int i = 0; i < 300; ++i) r["entries"][i]["review"] = {"check " + std::string(100, 'c')};
  auto t = BuildPrText(r, PrRepo::kTtXla);
  ASSERT_TRUE(t.ok());
  EXPECT_LE(t->body.size(), 60'000u);
  EXPECT_GT(t->body.size(), 40'000u) << "the budget is used";
  EXPECT_EQ(t->title,
            "Nightly maintenance sw-0007: 400 promoted, 400 demoted, 400 thresholds, 400 reasons "
            "refreshed");
  EXPECT_NE(t->body.find("### Promoted (400)\n\n"), std::string::npos);
  EXPECT_NE(t->body.find("<details><summary>"), std::string::npos);
  // Every entry is a line of the body or counted in a "N more in report.md".
  std::size_t shown = 0, counted = 0;
  for (std::size_t at = 0; (at = t->body.find("\n- `", at)) != std::string::npos; ++at) ++shown;
  for (std::size_t at = 0; (at = t->body.find(" more in report.md", at)) != std::string::npos;
       ++at) {
    const auto start = t->body.rfind('\n', at) + 1;
    counted += std::stoul(t->body.substr(start, at - start));
  }
  EXPECT_EQ(shown + counted, std::size_t(n) + 300) << "2,000 entries and 300 flags";
  EXPECT_GT(counted, 0u);
  // Lines are whole: each line of an entry ends its sentence.
  EXPECT_EQ(t->body.find("xxxxx\n"), std::string::npos);
}

TEST(PrText, NotAReportIsAnError) {
  EXPECT_FALSE(BuildPrText(json::object(), PrRepo::kTtXla).ok());
  EXPECT_FALSE(
      BuildPrText(json{{"sweep", "x"}, {"commits", 1}, {"entries", 2}}, PrRepo::kForge).ok());
}

}  // namespace
}  // namespace triage::merge
