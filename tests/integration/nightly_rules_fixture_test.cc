// The nightly rules on the fixture's own nightly result set: tests/fixtures/make-nightly.sh runs
// ttxla-mini's runner (real pytest, real torch, --forked) for two nights on n150 and p150; the
// streaming intake reads the JUnit files, the mapping finds the entries of a workspace, and the
// rule table must name, per entry and arch, the candidate ttxla-mini/nightly_truth.yaml says
// (a fixture fact derived from faults.yaml). Decided from the nightly alone (--no-confirm) and
// placed against the entries, the YAML must read as the truth's after_no_confirm (else after).

#include <map>
#include <set>

#include "common/inventory/editor.h"
#include "common/inventory/inventory.h"
#include "common/nightly/decide.h"
#include "common/nightly/intake.h"
#include "common/nightly/mapping.h"
#include "common/nightly/placement.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"
#include "tests/support/yaml_fields.h"
#include "yaml-cpp/yaml.h"

namespace triage::nightly {
namespace {

const std::string kSrc = TRIAGE_SOURCE_DIR;

class NightlyFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ::triage::testing::SetGitTestEnv();
    tmp_ = new ::triage::testing::TempDir();
    const auto dir = tmp_->path();
    std::string out;
    ASSERT_EQ(::triage::testing::RunCommand(
                  {kSrc + "/tests/fixtures/make-workspace.sh", (dir / "src").string()}, dir, &out),
              0)
        << out;
    ASSERT_EQ(
        ::triage::testing::RunCommand({kSrc + "/tests/fixtures/make-nightly.sh",
                                       (dir / "src/tt-xla").string(), (dir / "nightly").string()},
                                      dir, &out),
        0)
        << out;
  }
  static void TearDownTestSuite() {
    delete tmp_;
    tmp_ = nullptr;
  }
  static std::filesystem::path Dir() { return tmp_->path(); }
  static ::triage::testing::TempDir* tmp_;
};
::triage::testing::TempDir* NightlyFixture::tmp_ = nullptr;

YAML::Node Truth() {
  return YAML::LoadFile(kSrc + "/tests/fixtures/ttxla-mini/nightly_truth.yaml");
}

std::vector<v1::NightlyRun> ReadRuns(const std::filesystem::path& dir) {
  std::vector<v1::NightlyRun> runs;
  for (const char* night : {"night-1", "night-2"}) {
    auto run = ReadNightlyRun(dir / night);
    EXPECT_TRUE(run.ok()) << run.status();
    if (run.ok()) runs.push_back(std::move(*run));
  }
  return runs;
}

std::map<std::string, std::string> Fields(const YAML::Node& n) { return testing::YamlFields(n); }

TEST_F(NightlyFixture, TheIntakeReadsEveryNightAndTheRulesNameTheTruthsCandidates) {
  const std::vector<v1::NightlyRun> runs = ReadRuns(Dir() / "nightly");
  ASSERT_EQ(runs.size(), 2u);
  const YAML::Node truth = Truth();
  inventory::WorkTreeSource source(Dir() / "src/tt-xla");
  auto inv = inventory::LoadInventory(source);
  ASSERT_TRUE(inv.ok()) << inv.status();
  ASSERT_TRUE(inv->ok());
  const Mapping m = MapRuns(*inv, runs);
  EXPECT_EQ(m.intake.contradictory(), 0);
  EXPECT_EQ(m.intake.duplicates(), 0);
  EXPECT_EQ(m.intake.left_out(), 0);

  std::map<std::string, const MappedTest*> tests;
  for (const auto& t : m.tests) tests[t.key] = &t;
  int checked = 0;
  for (const auto& item : truth["entries"]) {
    const std::string key = item.first.as<std::string>();
    const YAML::Node e = item.second;
    SCOPED_TRACE(key);
    auto it = tests.find(key);
    ASSERT_NE(it, tests.end());
    const MappedTest& t = *it->second;
    EXPECT_EQ(t.document->path(), e["file"].as<std::string>());
    ASSERT_EQ(t.histories.size(), 2u);
    for (const auto& h : t.histories) {
      SCOPED_TRACE(h.arch);
      ASSERT_EQ(h.records.size(), 2u) << "one record per night";
      const Judgement j = Judge(h, Resolve(t.entry, h.arch), {});
      const std::string want = e["rule"][h.arch]["candidate"].as<std::string>();
      std::string got = j.kind == Judgement::Kind::kCandidate  ? j.candidate.kind()
                        : j.kind == Judgement::Kind::kCapacity ? "capacity"
                                                               : "none";
      EXPECT_EQ(got, want);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 * static_cast<int>(truth["entries"].size()));
}

// With --no-confirm every candidate is decided from the nightly alone; placed over the archs,
// each entry must read as the truth's after_no_confirm (else after).
TEST_F(NightlyFixture, DecidedFromTheNightlyAlonePlacementReachesTheTruth) {
  const std::vector<v1::NightlyRun> runs = ReadRuns(Dir() / "nightly");
  inventory::WorkTreeSource source(Dir() / "src/tt-xla");
  auto inv = inventory::LoadInventory(source);
  ASSERT_TRUE(inv.ok());
  const Mapping m = MapRuns(*inv, runs);
  const YAML::Node truth = Truth();
  std::map<std::string, std::vector<inventory::EntryEdit>> per_file;
  for (const auto& t : m.tests) {
    std::vector<ArchTarget> targets;
    for (const auto& h : t.histories) {
      const Judgement j = Judge(h, Resolve(t.entry, h.arch), {});
      if (j.kind != Judgement::Kind::kCandidate) continue;
      v1::ShardEntry se;
      se.set_key(t.key);
      se.set_file(t.document->path());
      *se.mutable_nightly() = j.candidate;
      v1::EntryOutcome o = DecideNightly(se, {}, {}, DecideMode::kNoConfirm);
      ASSERT_TRUE(o.changed()) << t.key << " " << h.arch;
      targets.push_back({h.arch, o.edit(), o.nightly().pcc_comment()});
    }
    if (targets.empty()) continue;
    if (t.entry == nullptr) {
      per_file[t.document->path()].push_back(NewEntry(t.key, targets.front().edit));
    } else {
      Placement p = Place(*t.entry, t.archs, targets);
      for (auto& e : p.edits) per_file[t.document->path()].push_back(std::move(e));
    }
  }
  std::map<std::string, inventory::Document> after;
  for (const auto& [file, edits] : per_file) {
    const inventory::Document* doc = inv->FindDocument(file);
    ASSERT_NE(doc, nullptr);
    auto text = inventory::ApplyEdits(*doc, edits);
    ASSERT_TRUE(text.ok()) << text.status();
    after.emplace(file, inventory::Document::Parse(file, *text));
  }
  for (const auto& item : truth["entries"]) {
    const std::string key = item.first.as<std::string>();
    const YAML::Node e = item.second;
    SCOPED_TRACE(key);
    YAML::Node want = e["after_no_confirm"] ? e["after_no_confirm"] : e["after"];
    const std::string file = e["file"].as<std::string>();
    if (want.IsScalar() && want.as<std::string>() == "unchanged") want = e["before"];
    const inventory::Document* doc = after.count(file) ? &after.at(file) : inv->FindDocument(file);
    const inventory::Entry* entry = doc->Find(key);
    if (want.IsNull()) {
      EXPECT_EQ(entry, nullptr);
      continue;
    }
    ASSERT_NE(entry, nullptr);
    // The entry's own text, read back as YAML.
    YAML::Node got = YAML::Load(doc->EntryText(*entry))[key];
    std::map<std::string, std::string> got_fields = Fields(got);
    EXPECT_EQ(got_fields, Fields(want));
  }
}

}  // namespace
}  // namespace triage::nightly
