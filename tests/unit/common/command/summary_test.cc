// The command's summary (common/command/summary.h): a full one read, each field checked with an
// error naming the file and the field, unknown fields and oversized input refused.

#include "common/command/summary.h"

#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace triage::command {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(Summary, AFullSummaryIsRead) {
  auto s = ParseSummary(R"({"fingerprint": "flax-class-removed-in-transformers-5",
    "layer": "loader", "fix_kind": "shared",
    "workarounds": {"layer_trimming": false, "cpu_offload": true, "pcc_lowering": true},
    "root_cause": "FlaxAutoModel is gone", "result": "pass"})",
                        "summaries/run-1.json");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->fingerprint(), "flax-class-removed-in-transformers-5");
  EXPECT_EQ(s->layer(), "loader");
  EXPECT_EQ(s->fix_kind(), "shared");
  EXPECT_THAT(s->workarounds(), ElementsAre("cpu_offload", "pcc_lowering"));
  EXPECT_EQ(s->root_cause(), "FlaxAutoModel is gone");
  EXPECT_EQ(s->result(), "pass");
  auto minimal = ParseSummary(R"({"fingerprint": "x"})", "s.json");
  ASSERT_TRUE(minimal.ok()) << minimal.status();
  EXPECT_EQ(minimal->layer(), "");
}

TEST(Summary, EachWrongFieldIsNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "s.json: not JSON"},
      {"[1]", "s.json: not a JSON object"},
      {"{}", "s.json: fingerprint: missing"},
      {R"({"fingerprint": "Has Spaces"})", "s.json: fingerprint: must be 1 to 100 characters"},
      {R"({"fingerprint": "-lead"})", "s.json: fingerprint: must be"},
      {R"({"fingerprint": 7})", "s.json: fingerprint: must be"},
      {R"({"fingerprint": "a", "layer": "kernel"})",
       "s.json: layer: must be one of loader, tt-xla, tt-mlir, tt-metal, hardware, unknown"},
      {R"({"fingerprint": "a", "fix_kind": "magic"})", "s.json: fix_kind: must be one of none"},
      {R"({"fingerprint": "a", "result": "PASS"})", "s.json: result: must be one of pass"},
      {R"({"fingerprint": "a", "workarounds": ["cpu_offload"]})",
       "s.json: workarounds: must be an object"},
      {R"({"fingerprint": "a", "workarounds": {"teleport": true}})",
       "s.json: workarounds.teleport: not a workaround name"},
      {R"({"fingerprint": "a", "workarounds": {"cpu_offload": "yes"}})",
       "s.json: workarounds.cpu_offload: must be true or false"},
      {R"({"fingerprint": "a", "root_cause": 3})", "s.json: root_cause: must be a string"},
      {R"({"fingerprint": "a", "fingerprnt": "b"})", "s.json: fingerprnt: not a summary field"},
      {"{\"fingerprint\": \"a\", \"root_cause\": \"\xff\"}", "s.json: not UTF-8"},
      {R"({"fingerprint": "a", "version": 2})", "s.json: version: must be a string"},
      {R"({"fingerprint": "a", "pins": ["tt-mlir"]})", "s.json: pins: must be an object"},
      {R"({"fingerprint": "a", "pins": {"tt mlir": "abc"}})", "s.json: pins.tt mlir: a name is"},
      {R"({"fingerprint": "a", "pins": {"tt-mlir": ""}})",
       "s.json: pins.tt-mlir: must be a string of 1 to 200 bytes"},
  };
  for (const auto& [text, error] : cases) {
    SCOPED_TRACE(text);
    auto s = ParseSummary(text, "s.json");
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(error));
  }
}

// version and pins are provenance: checked, then read by the agent for provenance.json.
TEST(Summary, VersionAndPinsAreCheckedAndReadAsProvenance) {
  const std::string text = R"json({"fingerprint": "a", "version": "agent 2.1 (skill 7)",
    "pins": {"tt-mlir": "4f2a9c1", "third_party/tt-metal": "77e0b2d"}})json";
  ASSERT_TRUE(ParseSummary(text, "s.json").ok());
  const SummaryProvenance p = ProvenanceOfSummary(text);
  EXPECT_EQ(p.version, "agent 2.1 (skill 7)");
  EXPECT_EQ(p.pins, (std::map<std::string, std::string>{{"tt-mlir", "4f2a9c1"},
                                                        {"third_party/tt-metal", "77e0b2d"}}));
  // A summary the parser refuses reports nothing.
  const SummaryProvenance none = ProvenanceOfSummary(R"({"version": "v1"})");
  EXPECT_TRUE(none.version.empty());
  EXPECT_TRUE(none.pins.empty());
  std::string many = R"({"fingerprint": "a", "pins": {)";
  for (int i = 0; i <= 32; ++i)
    many += "\"r" + std::to_string(i) + "\": \"c\"" + (i < 32 ? "," : "");
  many += "}}";
  EXPECT_FALSE(ParseSummary(many, "s.json").ok()) << "33 pins";
}

TEST(Summary, OversizedInputIsRefused) {
  const std::string big =
      R"({"fingerprint": "a", "root_cause": ")" + std::string(kMaxRootCauseBytes + 1, 'x') + "\"}";
  auto s = ParseSummary(big, "s.json");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("root_cause: 4097 bytes, over the limit"));
  auto huge = ParseSummary(std::string(kMaxSummaryBytes + 1, ' '), "s.json");
  ASSERT_FALSE(huge.ok());
  EXPECT_THAT(std::string(huge.status().message()), HasSubstr("over the limit of 65536"));
}

}  // namespace
}  // namespace triage::command
