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
                         "0.999 (required 0.99); 2/2 confirmation runs passed; decision confirmed"),
            std::string::npos)
      << t->body;
  EXPECT_NE(t->body.find("### Flaky (not changed) (1)\n\n- `f` on p150"), std::string::npos);
}

TEST(PrText, NotAReportIsAnError) {
  EXPECT_FALSE(BuildPrText(json::object(), PrRepo::kTtXla).ok());
  EXPECT_FALSE(
      BuildPrText(json{{"sweep", "x"}, {"commits", 1}, {"entries", 2}}, PrRepo::kForge).ok());
}

}  // namespace
}  // namespace triage::merge
