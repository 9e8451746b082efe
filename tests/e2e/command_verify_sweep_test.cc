// A coding agent's fix, verified by the farm (docs/farm.md, "Executors", the `command` bullet),
// with real processes on the ttxla-mini fixture: a coordinator and an n150 agent with the command
// executor over gRPC on loopback, triagectl, real torch and pytest. The command is a stand-in
// coding agent (tests/fixtures/coding_agent_standin.py) that fixes two loaders and promotes both
// entries to EXPECTED_PASSING: right for speech_mini (its test then passes), wrong for
// densenet_mini (its test still fails). The merged report and patch keep the command's decision for
// the first, "verified by the farm", and replace the second with the farm's, flagged with both
// decisions; the second's loader edit does not land. The agent's environment holds an API key,
// which the command never sees.

#include <set>
#include <string>

#include "common/util/strings.h"
#include "common/util/text.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/fixture_farm.h"
#include "tests/support/test_support.h"

namespace triage {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using ::testing::HasSubstr;

const std::string kSrc = TRIAGE_SOURCE_DIR;
constexpr char kSpeech[] = "speech_mini/pytorch-Tts-single_device-training";
constexpr char kDensenet[] = "densenet_mini/pytorch-Xray-single_device-training";
constexpr char kDensenetReason[] =
    "RuntimeError: \"hardshrink_backward_cpu\" not implemented for 'BFloat16'";

class CommandVerifySweepTest : public testing::FixtureFarmTest {
 protected:
  CommandVerifySweepTest()
      : FixtureFarmTest({"--tick_ms", "200", "--heartbeat_interval_seconds", "2"}) {}

  void TearDown() override {
    FixtureFarmTest::TearDown();
    ::unsetenv("ANTHROPIC_API_KEY");
  }

  // Runs the dtype_bfloat16 entries of the fixture through the stand-in coding agent on n150 with
  // the given extra sweep arguments; the report.json of the finished sweep (patches in out/).
  // select: the selection flags (default: the dtype_bfloat16 playbook's entries).
  json Sweep(const std::vector<std::string>& extra,
             const std::vector<std::string>& select = {"--playbooks", "dtype_bfloat16"}) {
    std::vector<std::string> args = select;
    args.insert(args.end(), extra.begin(), extra.end());
    return StandinSweep(args, "e2e: command verified by the farm");
  }

  // The value at a JSON pointer ("/verdicts/n150/verdict"); null when absent.
  static json At(const json& j, const std::string& pointer) {
    const json::json_pointer p(pointer);
    return j.contains(p) ? j.at(p) : json();
  }

  static std::map<std::string, json> ByKey(const json& report) {
    std::map<std::string, json> out;
    for (const auto& e : report.value("entries", json::array())) out[e["key"]] = e;
    return out;
  }

  // The command's environment held the allow-list and the executor's own variables only: the
  // stand-in recorded the names it was given, and the agent's ANTHROPIC_API_KEY is not among them.
  void ExpectScrubbedEnvironment() {
    std::set<std::string> allowed = {
        "PATH",         "HOME",       "LANG",          "LC_ALL", "LC_CTYPE",   "TZ",
        "TMPDIR",       "USER",       "LOGNAME",       "TERM",   "PYTHONPATH", "TRIAGE_SHARD_DIR",
        "TRIAGE_JUNIT", "TRIAGE_KEY", "TRIAGE_SUMMARY"};
    int files = 0;
    for (const auto& f :
         std::filesystem::recursive_directory_iterator(dir_ / "data-command-n150")) {
      if (!f.path().filename().string().starts_with("command-env-")) continue;
      ++files;
      const std::string names = testing::ReadFileOrDie(f.path());
      for (auto name : util::SplitLines(names)) {
        if (name.empty()) continue;
        EXPECT_TRUE(allowed.count(std::string(name)))
            << f.path().filename() << ": the command saw " << name;
      }
    }
    EXPECT_GE(files, 2) << "the stand-in recorded its environment";
  }

  static std::string Reviews(const json& entry) {
    std::string out;
    for (const auto& r : entry.value("review", json::array())) out += r.get<std::string>() + "\n";
    return out;
  }
};

TEST_F(CommandVerifySweepTest, RightDecisionIsAcceptedAndWrongOneReplacedByTheFarms) {
  ::setenv("ANTHROPIC_API_KEY", "x", 1);  // the agent's; the command must not see it
  ASSERT_NO_FATAL_FAILURE(StartFixtureAgent("command-n150", "n150", "command"));
  const json report = Sweep({});
  ASSERT_TRUE(report.is_object());
  auto entries = ByKey(report);
  ASSERT_TRUE(entries.count(kSpeech) && entries.count(kDensenet)) << report.dump(2).substr(0, 3000);

  // The right decision: the command's edit stands, verified by the farm's run.
  const json& speech = entries[kSpeech];
  EXPECT_EQ(At(speech, "/arch_outcomes/n150"), (json{{"status", "EXPECTED_PASSING"},
                                                     {"bringup_status", nullptr},
                                                     {"reason", nullptr},
                                                     {"assert_pcc", nullptr},
                                                     {"markers", nullptr}}))
      << speech.dump(2);
  EXPECT_EQ(At(speech, "/verdicts/n150/verdict"), json("pass")) << speech.dump(2);
  EXPECT_EQ(At(speech, "/verdicts/n150/command_check"), json("verified by the farm"))
      << speech.dump(2);
  EXPECT_EQ(Reviews(speech).find("command wrote"), std::string::npos) << Reviews(speech);

  // The wrong decision: replaced by what the farm's run shows, and flagged with both.
  const json& densenet = entries[kDensenet];
  EXPECT_EQ(At(densenet, "/arch_outcomes/n150/status"), json("KNOWN_FAILURE_XFAIL"))
      << densenet.dump(2);
  EXPECT_EQ(At(densenet, "/arch_outcomes/n150/reason"), json(kDensenetReason)) << densenet.dump(2);
  EXPECT_EQ(At(densenet, "/verdicts/n150/verdict"), json("failure")) << densenet.dump(2);
  EXPECT_EQ(At(densenet, "/verdicts/n150/command_check"), json("replaced by the farm's decision"))
      << densenet.dump(2);
  EXPECT_THAT(Reviews(densenet),
              HasSubstr(util::StrCat("command wrote status EXPECTED_PASSING, no reason; the "
                                     "farm's run on n150 shows failure (",
                                     kDensenetReason,
                                     "): the farm writes status "
                                     "KNOWN_FAILURE_XFAIL, reason '",
                                     kDensenetReason, "'")));

  // The patches: the accepted entry's loader fix; none of the overruled one's (rejected means
  // rejected), which its review says; the YAML as decided.
  const std::string forge = testing::ReadFileOrDie(dir_ / "out/tt-forge-models.patch");
  EXPECT_THAT(forge, HasSubstr("+        decoder_input_values = torch.zeros((1, 4, 8), "
                               "dtype=dtype_override)"));
  EXPECT_EQ(forge.find("densenet_mini"), std::string::npos) << forge;
  EXPECT_THAT(Reviews(densenet), HasSubstr("not landed: the command's edits of densenet_mini/"));
  const std::string xla = testing::ReadFileOrDie(dir_ / "out/tt-xla.patch");
  EXPECT_THAT(xla, HasSubstr("hardshrink_backward_cpu")) << xla;
  // The verification run's JUnit and log are the entries' evidence, with the command's log.
  std::set<std::string> names;
  for (const auto& n : densenet.value("evidence", json::array())) {
    const std::string path = n.get<std::string>();
    names.insert(path.substr(path.rfind('/', path.rfind('/') - 1) + 1));
  }
  EXPECT_TRUE(names.count("logs/command-1.log")) << At(densenet, "/evidence").dump(2);
  EXPECT_TRUE(names.count("junit/01-verify.xml")) << At(densenet, "/evidence").dump(2);
  EXPECT_TRUE(names.count("logs/01-verify.log")) << At(densenet, "/evidence").dump(2);

  // The command's summary: on each verdict, and the sweep's remediation clusters group both
  // entries by the fingerprint it reported; the farm's verification decides what is fixed.
  EXPECT_EQ(At(speech, "/fingerprint"), json("loader-tensor-without-dtype-override"));
  EXPECT_EQ(At(densenet, "/verdicts/n150/summary/layer"), json("loader")) << densenet.dump(2);
  ASSERT_TRUE(report.contains("remediation")) << report.dump(2).substr(0, 2000);
  json cluster;
  for (const auto& c : report["remediation"]) {
    if (c["by"] == "fingerprint") {
      EXPECT_TRUE(cluster.is_null()) << "one fingerprint: " << report["remediation"].dump(2);
      cluster = c;
    } else {
      EXPECT_EQ(c["by"], "reason") << "the other entries: by the cluster of their reason";
    }
  }
  ASSERT_TRUE(cluster.is_object()) << report["remediation"].dump(2);
  EXPECT_EQ(cluster["id"], "loader-tensor-without-dtype-override");
  EXPECT_EQ(cluster["size"], 2);
  EXPECT_EQ(cluster["fixed"], 1);
  EXPECT_EQ(cluster["failing"], 1);
  EXPECT_THAT(testing::ReadFileOrDie(dir_ / "out/report.md"),
              HasSubstr("| 2 | 1 | 1 | `loader-tensor-without-dtype-override` | fingerprint | "
                        "loader |"));

  ExpectScrubbedEnvironment();
}

// verify=false: the command's decisions stand as they are, unchecked.
TEST_F(CommandVerifySweepTest, WithoutVerifyTheCommandsDecisionStands) {
  ::setenv("ANTHROPIC_API_KEY", "x", 1);
  ASSERT_NO_FATAL_FAILURE(StartFixtureAgent("command-n150", "n150", "command"));
  const json report = Sweep({"--param", "verify=false"});
  ASSERT_TRUE(report.is_object());
  auto entries = ByKey(report);
  ASSERT_TRUE(entries.count(kDensenet)) << report.dump(2).substr(0, 3000);
  const json& densenet = entries[kDensenet];
  EXPECT_EQ(At(densenet, "/arch_outcomes/n150/status"), json("EXPECTED_PASSING"))
      << densenet.dump(2);
  EXPECT_EQ(At(densenet, "/verdicts/n150/verdict"), json("command")) << densenet.dump(2);
  EXPECT_TRUE(At(densenet, "/verdicts/n150/command_check").is_null()) << densenet.dump(2);
  EXPECT_EQ(Reviews(densenet).find("command wrote"), std::string::npos) << Reviews(densenet);
  ExpectScrubbedEnvironment();
}

// A failing selection by key (docs/remediation.md, "Selecting entries"): no playbook's rules,
// just the two keys the user named, each with its failure cluster in the shard; the other
// failing entries of the fixture are not touched.
TEST_F(CommandVerifySweepTest, AFailingSelectionByKeyTakesExactlyTheNamedEntries) {
  ASSERT_NO_FATAL_FAILURE(StartFixtureAgent("command-n150", "n150", "command"));
  const json report = Sweep({"--param", "verify=false"},
                            {"--failing", "--keys", util::StrCat(kSpeech, ",", kDensenet)});
  ASSERT_TRUE(report.is_object());
  auto entries = ByKey(report);
  ASSERT_EQ(entries.size(), 2u) << report.dump(2).substr(0, 3000);
  ASSERT_TRUE(entries.count(kSpeech) && entries.count(kDensenet));
  EXPECT_EQ(At(entries[kDensenet], "/arch_outcomes/n150/status"), json("EXPECTED_PASSING"))
      << entries[kDensenet].dump(2);
  std::string out;
  ASSERT_EQ(Ctl({"shards", "list", "--sweep", report.value("sweep", ""), "-o", "json"}, &out), 0)
      << out;
  EXPECT_THAT(out, HasSubstr("\"remediate\"")) << out;
}

}  // namespace
}  // namespace triage
