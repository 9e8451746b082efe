// `triagectl nightly policy` on a git repository with a maintenance history (docs/nightly.md,
// "Learned from the checkout"): the rounds read from git, the knobs they teach with their
// commits, a policy file over them, and what it refuses.

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/git/git.h"
#include "common/nightly/history.h"
#include "common/nightly/policy_options.h"
#include "common/nightly/rules.h"
#include "common/util/strings.h"
#include "common/util/text.h"
#include "coordinator/planning/sweep_reader.h"
#include "coordinator/triagectl/nightly_policy_cmd.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/test_support.h"

namespace triage {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr char kFile[] = "tests/runner/test_config/torch/test_config_inference_single_device.yaml";

// git through the project's own runner, the test's identity (SetGitTestEnv) and a fixed date.
std::string Git(const fs::path& dir, const std::vector<std::string>& args,
                const std::string& date = "2026-03-01T12:00:00") {
  git::Git::CallOptions options;
  options.env = {{"GIT_AUTHOR_DATE", date}, {"GIT_COMMITTER_DATE", date}};
  auto out = git::Git(dir).RunWith(args, options);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? std::string(util::TrimWhitespace(*out)) : "";
}

void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// A round: the file rewritten, committed on `date`.
void Round(const fs::path& repo, const std::string& date, const std::string& yaml) {
  Write(repo / kFile, yaml);
  Git(repo, {"add", "-A"}, date);
  Git(repo, {"commit", "-q", "-m", "Nightly maintenance " + date}, date);
}

class NightlyPolicyCmd : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::SetGitTestEnv();
    repo_ = testing::MakeTtXlaRepo(tmp_.path() / "src",
                                   {{kFile,
                                     "test_config:\n"
                                     "  a/pytorch-A-single_device-inference:\n"
                                     "    status: EXPECTED_PASSING\n"
                                     "  b/pytorch-B-single_device-inference:\n"
                                     "    status: EXPECTED_PASSING\n"
                                     "  c/pytorch-C-single_device-inference:\n"
                                     "    status: EXPECTED_PASSING\n"}},
                                   {});
    // December: a PCC far off turns the check off.
    Round(repo_, "2025-12-10T10:00:00",
          "test_config:\n"
          "  a/pytorch-A-single_device-inference:\n"
          "    status: EXPECTED_PASSING\n"
          "    assert_pcc: false\n"
          "  b/pytorch-B-single_device-inference:\n"
          "    status: EXPECTED_PASSING\n"
          "  c/pytorch-C-single_device-inference:\n"
          "    status: EXPECTED_PASSING\n");
    // March: two rounds xfail one, and lower a threshold on the 0.005 grid without a comment.
    Round(repo_, "2026-03-02T10:00:00",
          "test_config:\n"
          "  a/pytorch-A-single_device-inference:\n"
          "    status: EXPECTED_PASSING\n"
          "    assert_pcc: false\n"
          "  b/pytorch-B-single_device-inference:\n"
          "    status: KNOWN_FAILURE_XFAIL\n"
          "    bringup_status: INCORRECT_RESULT\n"
          "    reason: \"PCC comparison failed (calc ~0.41, required 0.99) - https://x/1\"\n"
          "  c/pytorch-C-single_device-inference:\n"
          "    status: EXPECTED_PASSING\n");
    Round(repo_, "2026-03-09T10:00:00",
          "test_config:\n"
          "  a/pytorch-A-single_device-inference:\n"
          "    status: KNOWN_FAILURE_XFAIL\n"
          "    bringup_status: INCORRECT_RESULT\n"
          "    reason: \"PCC comparison failed (calc ~0.12, required 0.99)\"\n"
          "  b/pytorch-B-single_device-inference:\n"
          "    status: KNOWN_FAILURE_XFAIL\n"
          "    bringup_status: INCORRECT_RESULT\n"
          "    reason: \"PCC comparison failed (calc ~0.41, required 0.99) - https://x/1\"\n"
          "  c/pytorch-C-single_device-inference:\n"
          "    status: EXPECTED_PASSING\n"
          "    required_pcc: 0.965\n");
    head_ = Git(repo_, {"rev-parse", "--short", "HEAD"});
  }

  int Run(ctl::NightlyPolicyOptions o, std::string* out, std::string* err) {
    o.repo = repo_.string();
    std::ostringstream os, es;
    int rc = ctl::RunNightlyPolicy(o, os, es);
    *out = os.str();
    *err = es.str();
    return rc;
  }

  testing::TempDir tmp_;
  fs::path repo_;
  std::string head_;
};

TEST_F(NightlyPolicyCmd, TheHistoryIsReadRoundByRoundOldestFirst) {
  git::Git git(repo_);
  auto history = nightly::ReadMaintenanceHistory(git, *git.RevParse("HEAD"));
  ASSERT_TRUE(history.ok()) << history.status();
  const auto& rounds = (*history)->rounds;
  // The first commit adds the files: there is nothing before it to compare with.
  ASSERT_EQ(rounds.size(), 3u);
  EXPECT_EQ(rounds[0].date, "2025-12-10");
  EXPECT_EQ(rounds[2].date, "2026-03-09");
  ASSERT_EQ(rounds[2].changes.size(), 2u);  // a and c; b is as it was
  EXPECT_EQ(rounds[2].changes[0].key, "a/pytorch-A-single_device-inference");
  EXPECT_THAT(rounds[2].changes[1].after_text, HasSubstr("required_pcc: 0.965"));
  // --since leaves the older rounds out.
  auto recent =
      nightly::ReadMaintenanceHistory(git, *git.RevParse("HEAD"), {.since = "2026-01-01"});
  ASSERT_TRUE(recent.ok());
  EXPECT_EQ((*recent)->rounds.size(), 2u);
}

TEST_F(NightlyPolicyCmd, PrintsEachKnobWithTheRoundsItCameFrom) {
  std::string out, err;
  ASSERT_EQ(Run({}, &out, &err), 0) << err;
  EXPECT_THAT(out, HasSubstr("learned from 3 maintenance round(s)"));
  // Two of the three rounds that speak to it xfail a nonsense PCC.
  EXPECT_THAT(out, HasSubstr("nonsense: xfail  # learned from 3 changes in 3 rounds, newest " +
                             head_ + " 2026-03-09 a/pytorch-A-single_device-inference"));
  EXPECT_THAT(out, HasSubstr("grid: 0.005  # learned from 1 change in 1 round"));
  EXPECT_THAT(out, HasSubstr("pcc_comment: none  # learned"));
  EXPECT_THAT(out, HasSubstr("margin: 0  # default"));
  EXPECT_THAT(out, HasSubstr("skip_bringup: write  # default"));

  ctl::NightlyPolicyOptions json;
  json.output = "json";
  ASSERT_EQ(Run(json, &out, &err), 0) << err;
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["rounds"], 3);
  EXPECT_EQ(j["knobs"]["nonsense"]["value"], "xfail");
  ASSERT_EQ(j["knobs"]["nonsense"]["evidence"].size(), 3u);
  EXPECT_EQ(j["knobs"]["nonsense"]["evidence"][2]["value"], "disable_pcc");
  EXPECT_EQ(j["knobs"]["nonsense"]["evidence"][2]["date"], "2025-12-10");
  EXPECT_EQ(j["knobs"]["margin"]["source"], "default");

  // Since January, only the xfail rounds.
  ctl::NightlyPolicyOptions since;
  since.since = "2026-01-01";
  ASSERT_EQ(Run(since, &out, &err), 0) << err;
  EXPECT_THAT(out, HasSubstr("nonsense: xfail  # learned from 2 changes in 2 rounds"));
}

TEST_F(NightlyPolicyCmd, APolicyFileReplacesTheLearnedKnobsItNames) {
  const fs::path file = tmp_.path() / "policy.yaml";
  Write(file, "# ours\nnonsense: disable_pcc\n");
  ctl::NightlyPolicyOptions o;
  o.policy = file.string();
  std::string out, err;
  ASSERT_EQ(Run(o, &out, &err), 0) << err;
  EXPECT_THAT(out, HasSubstr("nonsense: disable_pcc  # " + file.string() + ":2"));
  EXPECT_THAT(out, HasSubstr("grid: 0.005  # learned"));
  Write(file, "nonsense: maybe\n");
  EXPECT_EQ(Run(o, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr(file.string() + ":1: nonsense: 'maybe' is not one of"));
}

TEST_F(NightlyPolicyCmd, BadArgumentsAreNamed) {
  std::string out, err;
  ctl::NightlyPolicyOptions o;
  o.since = "March";
  EXPECT_EQ(Run(o, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("--since March: expected a date YYYY-MM-DD"));
  o = {};
  o.rev = "no-such-branch";
  EXPECT_EQ(Run(o, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("cannot read revision no-such-branch"));
  o = {};
  o.policy = (tmp_.path() / "missing.yaml").string();
  EXPECT_EQ(Run(o, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("missing.yaml: cannot read it"));
}

// A nightly sweep's start reads the same history (the coordinator's sweep reader), and the
// policy it resolves names where each knob came from; other sweeps and --no-learn read none.
TEST_F(NightlyPolicyCmd, ANightlySweepLearnsThePolicyFromItsCheckout) {
  auto reader = coord::MakeGitSweepReader(tmp_.path() / "cache");
  v1::StartSweepRequest req;
  req.set_repo_path(repo_.string());
  req.add_nightly()->set_label("night-1");
  auto input = reader(req);
  ASSERT_TRUE(input.ok()) << input.status();
  ASSERT_TRUE(input->learned_policy.has_value());
  EXPECT_EQ(input->learned_policy->nonsense, "xfail");
  EXPECT_THAT(input->learned_from, HasSubstr("3 maintenance round(s) (2025-12-10 to 2026-03-09)"));

  req.mutable_nightly_options()->set_policy_file("ops.yaml");
  req.mutable_nightly_options()->set_policy_text("pcc_comment: figure\n");
  auto resolved =
      nightly::ResolvePolicy(req.nightly_options(), &*input->learned_policy, input->learned_from);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  const nightly::Policy p = nightly::RuleOptionsFrom(*resolved).policy;
  EXPECT_EQ(p.nonsense, "xfail");
  EXPECT_THAT(p.sources.at("nonsense"), HasSubstr("learned from 3 changes in 3 rounds"));
  EXPECT_EQ(p.pcc_comment, "figure");  // the file over the learned "none"
  EXPECT_EQ(p.sources.at("pcc_comment"), "ops.yaml:1");
  EXPECT_EQ(p.sources.count("margin"), 0u);

  req.mutable_nightly_options()->set_no_learn(true);
  input = reader(req);
  ASSERT_TRUE(input.ok()) << input.status();
  EXPECT_FALSE(input->learned_policy.has_value());
  v1::StartSweepRequest playbook_sweep;
  playbook_sweep.set_repo_path(repo_.string());
  input = reader(playbook_sweep);
  ASSERT_TRUE(input.ok()) << input.status();
  EXPECT_FALSE(input->learned_policy.has_value());
}

}  // namespace
}  // namespace triage
