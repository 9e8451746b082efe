// The nightly policy learned from a checkout's maintenance rounds (docs/nightly.md, "Learned
// from the checkout"): each knob from the newest rounds that speak to it, each round one vote.

#include "common/nightly/learn.h"

#include <deque>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace triage::nightly {
namespace {

using ::testing::HasSubstr;

constexpr char kPath[] = "tests/runner/test_config/torch/test_config_inference_single_device.yaml";

// Rounds built from entries written as YAML; the documents live as long as the builder.
class Rounds {
 public:
  // One round changing `key` from `before` to `after` (field lines indented by four spaces;
  // "" before: the round added the entry).
  Rounds& Round(const std::string& commit, const std::string& date, const std::string& key,
                const std::string& before, const std::string& after) {
    nightly::Round r;
    r.commit = commit;
    r.date = date;
    AddTo(r, key, before, after);
    rounds_.push_back(std::move(r));
    return *this;
  }
  // Another change in the last round.
  Rounds& And(const std::string& key, const std::string& before, const std::string& after) {
    AddTo(rounds_.back(), key, before, after);
    return *this;
  }
  Learned Learn() const { return LearnPolicy(rounds_); }

 private:
  const inventory::Entry* Parse(const std::string& key, const std::string& fields) {
    docs_.push_back(inventory::Document::Parse(kPath, "test_config:\n  " + key + ":\n" + fields));
    EXPECT_TRUE(docs_.back().ok()) << fields;
    return &docs_.back().entries().at(0);
  }
  void AddTo(nightly::Round& r, const std::string& key, const std::string& before,
             const std::string& after) {
    EntryChange c;
    c.key = key;
    c.before = before.empty() ? nullptr : Parse(key, before);
    c.after = Parse(key, after);
    c.after_text = after;
    r.changes.push_back(std::move(c));
  }
  std::deque<inventory::Document> docs_;
  std::vector<nightly::Round> rounds_;
};

constexpr char kKey[] = "m/pytorch-A-single_device-inference";
constexpr char kKey2[] = "m/pytorch-B-single_device-inference";
constexpr char kTp[] = "m/pytorch-C-tensor_parallel-inference";
constexpr char kPassing[] = "    status: EXPECTED_PASSING\n";

TEST(LearnPolicy, AHistorySilentOnAKnobKeepsItsDefault) {
  Learned l = Rounds().Learn();
  EXPECT_EQ(l.policy.nonsense, "disable_pcc");
  EXPECT_TRUE(l.policy.sources.empty());
  EXPECT_TRUE(l.evidence.empty());
}

TEST(LearnPolicy, NonsensePccFollowsTheNewestRounds) {
  const std::string disabled = "    status: EXPECTED_PASSING\n    assert_pcc: false\n";
  const std::string xfailed =
      "    status: KNOWN_FAILURE_XFAIL\n    bringup_status: INCORRECT_RESULT\n"
      "    reason: \"PCC comparison failed (calc ~0.41, required 0.99)\"\n";
  Rounds h;
  h.Round("a1", "2025-12-01", kKey, kPassing, disabled);
  EXPECT_EQ(h.Learn().policy.nonsense, "disable_pcc");
  h.Round("a2", "2026-03-01", kKey, kPassing, xfailed)
      .Round("a3", "2026-03-05", kKey2, kPassing, xfailed);
  Learned l = h.Learn();
  EXPECT_EQ(l.policy.nonsense, "xfail");
  EXPECT_THAT(
      l.policy.sources.at("nonsense"),
      HasSubstr("learned from 3 changes in 3 rounds, newest a3 2026-03-05 " + std::string(kKey2)));
  ASSERT_EQ(l.evidence.at("nonsense").size(), 3u);
  EXPECT_EQ(l.evidence.at("nonsense")[0].commit, "a3");  // newest first
}

TEST(LearnPolicy, EachRoundVotesOnceWhateverItsSize) {
  const std::string skip_with =
      "    status: NOT_SUPPORTED_SKIP\n    bringup_status: FAILED_RUNTIME\n"
      "    reason: \"Hang\"\n";
  const std::string skip_without = "    status: NOT_SUPPORTED_SKIP\n    reason: \"Hang\"\n";
  Rounds h;
  h.Round("b1", "2026-01-01", kKey, kPassing, skip_with)
      .Round("b2", "2026-01-02", kKey, kPassing, skip_with);
  // One large round that omits it: one vote against two.
  h.Round("b3", "2026-01-03", kKey, kPassing, skip_without)
      .And(kKey2, kPassing, skip_without)
      .And("m/pytorch-D-single_device-inference", kPassing, skip_without);
  EXPECT_EQ(h.Learn().policy.skip_bringup_status, "write");
  // A tie goes to the newest round.
  h.Round("b4", "2026-01-04", kKey, kPassing, skip_without);
  EXPECT_EQ(h.Learn().policy.skip_bringup_status, "omit");
}

TEST(LearnPolicy, OnlyTheNewestRoundsThatSpeakToAKnobCount) {
  const std::string hang = "    status: NOT_SUPPORTED_SKIP\n    reason: \"Hang\"\n";
  const std::string sentence =
      "    status: NOT_SUPPORTED_SKIP\n    reason: \"Model timed out during compilation\"\n";
  Rounds h;
  for (int i = 0; i < 6; ++i)
    h.Round("c" + std::to_string(i), "2025-11-0" + std::to_string(i + 1), kKey, kPassing, hang);
  EXPECT_EQ(h.Learn().policy.hang_reason, "Hang");
  for (int i = 0; i < 3; ++i)
    h.Round("d" + std::to_string(i), "2026-02-0" + std::to_string(i + 1), kKey, kPassing, sentence);
  // Of the newest five rounds, three wrote a sentence.
  EXPECT_EQ(h.Learn().policy.hang_reason, "message");
}

TEST(LearnPolicy, ThresholdsTeachTheGridAndTheLowestByParallelism) {
  Rounds h;
  h.Round("e1", "2026-02-01", kKey, kPassing,
          "    status: EXPECTED_PASSING\n    required_pcc: 0.955\n")
      .And(kKey2, kPassing, "    status: EXPECTED_PASSING\n    required_pcc: 0.985\n")
      .And(kTp, kPassing, "    status: EXPECTED_PASSING\n    required_pcc: 0.91\n");
  Learned l = h.Learn();
  EXPECT_DOUBLE_EQ(l.policy.grid, 0.005);
  EXPECT_NEAR(l.policy.Lowest("single_device", "inference"), 0.954, 1e-9);
  EXPECT_NEAR(l.policy.Lowest("tensor_parallel", "inference"), 0.909, 1e-9);
  EXPECT_THAT(l.policy.sources.at("lowest"), HasSubstr("learned from 3 changes in 1 round"));
}

TEST(LearnPolicy, CommentsOnWrittenThresholds) {
  Rounds h;
  h.Round("f1", "2026-02-01", kKey, kPassing,
          "    status: EXPECTED_PASSING\n    required_pcc: 0.98  # pcc 0.9834 on n150\n");
  EXPECT_EQ(h.Learn().policy.pcc_comment, "figure");
  h.Round("f2", "2026-02-02", kKey2, kPassing,
          "    status: EXPECTED_PASSING\n    required_pcc: 0.97\n")
      .Round("f3", "2026-02-03", kKey, kPassing,
             "    status: EXPECTED_PASSING\n    required_pcc: 0.97  # https://x/issues/1\n");
  EXPECT_EQ(h.Learn().policy.pcc_comment, "none");
}

TEST(LearnPolicy, ReasonFormsOfSkipsAndStagesOfXfails) {
  Rounds h;
  h.Round("g1", "2026-03-01", kKey, kPassing,
          "    status: NOT_SUPPORTED_SKIP\n    reason: \"crashed with signal 6 (SIGABRT)\"\n")
      .And(kKey2, kPassing,
           "    status: KNOWN_FAILURE_XFAIL\n    bringup_status: UNKNOWN\n"
           "    reason: \"ValueError: Error code: 13\"\n")
      .And(kTp, kPassing,
           "    status: NOT_SUPPORTED_SKIP\n    reason: \"Host OOM: killed by signal 9\"\n");
  Learned l = h.Learn();
  EXPECT_EQ(l.policy.crash_reason, "signal");
  EXPECT_EQ(l.policy.unknown_stage, "write");
  EXPECT_EQ(l.policy.oom_reason, "Host OOM: killed by signal 9");
  EXPECT_EQ(l.policy.sources.count("hang_reason"), 0u);
}

// A PCC xfail's reason in the runner's words or short; a check that was off kept or dropped
// when its test was demoted for another failure.
TEST(LearnPolicy, PccReasonsAndTheCheckOffOfADemotedTest) {
  const std::string off = "    status: EXPECTED_PASSING\n    assert_pcc: false\n";
  Rounds h;
  h.Round("h1", "2026-03-01", kKey, kPassing,
          "    status: KNOWN_FAILURE_XFAIL\n    bringup_status: INCORRECT_RESULT\n"
          "    reason: \"PCC comparison failed (calc ~0.41, required 0.99)\"\n")
      .And(kKey2, off,
           "    status: KNOWN_FAILURE_XFAIL\n    assert_pcc: false\n"
           "    reason: \"ValueError: Error code: 13\"\n");
  Learned l = h.Learn();
  EXPECT_EQ(l.policy.pcc_reason, "short");
  EXPECT_EQ(l.policy.demote_pcc_off, "keep");
  h.Round("h2", "2026-03-08", kKey, kPassing,
          "    status: KNOWN_FAILURE_XFAIL\n    bringup_status: INCORRECT_RESULT\n"
          "    reason: \"PCC comparison failed. Calculated: pcc=0.41. Required: pcc=0.99.\"\n")
      .And(kKey2, off,
           "    status: NOT_SUPPORTED_SKIP\n    reason: \"Fatal Python error: Aborted\"\n");
  l = h.Learn();  // a tie: the newest round's
  EXPECT_EQ(l.policy.pcc_reason, "runner");
  EXPECT_EQ(l.policy.demote_pcc_off, "drop");
  EXPECT_THAT(l.policy.sources["demote_pcc_off"], HasSubstr("newest h2 2026-03-08"));
}

}  // namespace
}  // namespace triage::nightly
