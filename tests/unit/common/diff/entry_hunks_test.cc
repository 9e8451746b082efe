// The patches' shape for landing (docs/report.md, "The patches"): git blob ids on index lines,
// one hunk per YAML entry anchored in the entry's own lines, and hunks applied one by one to a
// file that moved on since the sweep.

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "common/diff/apply_diff.h"
#include "common/diff/blob_id.h"
#include "common/diff/unified_diff.h"
#include "common/util/strings.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace triage::diff {
namespace {

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// git in dir (isolated from the user's config): its exit code; output in *out.
int Git(const std::filesystem::path& dir, const std::vector<std::string>& args, std::string* out) {
  std::vector<std::string> argv = {
      "git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"};
  argv.insert(argv.end(), args.begin(), args.end());
  return testing::RunCommand(argv, dir, out, {{"GIT_CONFIG_GLOBAL", "/dev/null"}});
}

// n entries "e<i>:" with a status and a reason, back to back as in tt-xla's files.
struct Entries {
  std::string text;
  std::vector<Region> regions;  // one per entry, old == new (filled by Edit)
};

std::string EntryText(int i, const std::string& status, const std::string& reason) {
  return util::StrCat("  e", i, ":\n    status: ", status, "\n    reason: \"", reason, "\"\n");
}

// The file with the entries in changed[] given a new status (and, for odd ones, a new reason
// line more); the regions are the changed entries' line ranges.
std::pair<std::string, std::string> Edit(int n, const std::vector<bool>& changed,
                                         std::vector<Region>* regions) {
  std::string a = "test_config:\n", b = a;
  int old_line = 1, new_line = 1;
  for (int i = 0; i < n; ++i) {
    const std::string before = EntryText(i, "KNOWN_FAILURE_XFAIL", util::StrCat("r", i));
    a += before;
    if (!changed[i]) {
      b += before;
      old_line += 3;
      new_line += 3;
      continue;
    }
    std::string after = EntryText(i, "EXPECTED_PASSING", util::StrCat("r", i));
    int added = 3;
    if (i % 2 == 1) {
      after = util::StrCat("  e", i, ":\n    status: EXPECTED_PASSING\n    assert_pcc: false\n");
    }
    if (i % 3 == 0) {
      after += "    markers: [push]\n";
      ++added;
    }
    b += after;
    regions->push_back({old_line, old_line + 3, new_line, new_line + added});
    old_line += 3;
    new_line += added;
  }
  return {a, b};
}

TEST(GitBlobId, IsWhatGitHashObjectSays) {
  testing::TempDir tmp;
  std::mt19937 rng(3);
  // Lengths around SHA-1's 64-byte block and its 56-byte padding limit.
  for (int len : {0, 1, 47, 55, 56, 57, 63, 64, 65, 119, 120, 1000, 70000}) {
    std::string content;
    for (int k = 0; k < len; ++k) content.push_back(static_cast<char>('a' + rng() % 26));
    if (len % 3 == 0 && len > 0) content.back() = '\n';
    testing::WriteFileOrDie(tmp.path() / "f", content);
    std::string out;
    ASSERT_EQ(Git(tmp.path(), {"hash-object", "f"}, &out), 0) << out;
    EXPECT_EQ(GitBlobId(content), Trimmed(out)) << "length " << len;
  }
}

TEST(HunkPerRegion, OneHunkPerChangedEntryThatGitApplies) {
  std::mt19937 rng(11);
  for (int round = 0; round < 30; ++round) {
    const int n = 3 + static_cast<int>(rng() % 12);
    std::vector<bool> changed(n);
    int count = 0;
    for (int i = 0; i < n; ++i) count += changed[i] = rng() % 2 == 0;
    std::vector<Region> regions;
    auto [a, b] = Edit(n, changed, &regions);
    const std::string patch = UnifiedDiffOfRegions("f.yaml", a, b, regions,
                                                   {.index_line = true, .hunk_per_region = true});
    if (count == 0) {
      EXPECT_EQ(patch, "");
      continue;
    }
    auto files = SplitDiff(patch);
    ASSERT_TRUE(files.ok());
    auto hunks = ParseHunks(files->front());
    ASSERT_TRUE(hunks.ok());
    EXPECT_EQ(static_cast<int>(hunks->size()), count) << patch;
    // No line is in two hunks, and each hunk starts at or below its entry's key line.
    for (std::size_t h = 0; h < hunks->size(); ++h) {
      const Hunk& hk = (*hunks)[h];
      EXPECT_GE(hk.old_start - 1, regions[h].old_begin) << hk.Text();
      if (h + 1 < hunks->size()) {
        EXPECT_LE(hk.old_start + hk.old_count, (*hunks)[h + 1].old_start) << patch;
      }
    }
    EXPECT_NE(patch.find("\nindex " + GitBlobId(a) + ".." + GitBlobId(b) + "\n"), std::string::npos)
        << patch;
    testing::TempDir tmp;
    testing::WriteFileOrDie(tmp.path() / "f.yaml", a);
    testing::WriteFileOrDie(tmp.path() / "p.patch", patch);
    std::string out;
    ASSERT_EQ(testing::RunCommand({"git", "apply", "p.patch"}, tmp.path(), &out), 0)
        << out << patch;
    EXPECT_EQ(testing::ReadFileOrDie(tmp.path() / "f.yaml"), b) << "round " << round;
    // The same hunks through ApplyHunksNear on the unchanged base.
    PartialApply near = ApplyHunksNear(a, *hunks);
    EXPECT_EQ(near.text, b);
  }
}

// An upstream edit of one entry after the sweep: git apply refuses the whole patch; hunk by
// hunk, only that entry is left out, even when lines were added above and between entries.
TEST(ApplyHunksNear, AnEntryChangedUpstreamLeavesOutOnlyItsHunk) {
  const int n = 8;
  std::vector<bool> changed(n, true);
  std::vector<Region> regions;
  auto [a, b] = Edit(n, changed, &regions);
  const std::string patch =
      UnifiedDiffOfRegions("f.yaml", a, b, regions, {.hunk_per_region = true});
  auto hunks = ParseHunks(SplitDiff(patch)->front());
  ASSERT_TRUE(hunks.ok());
  ASSERT_EQ(hunks->size(), 8u);
  // Upstream: a comment on top, a new entry between e3 and e4, e5's reason reworded.
  std::string later = a;
  later.replace(later.find("    reason: \"r5\""), 16, "    reason: \"r5, see #12\"");
  later.insert(later.find("  e4:"), "  new_one:\n    status: EXPECTED_PASSING\n");
  later.insert(later.find("test_config:") + 13, "  # moved on\n");
  testing::TempDir tmp;
  testing::WriteFileOrDie(tmp.path() / "f.yaml", later);
  testing::WriteFileOrDie(tmp.path() / "p.patch", patch);
  std::string out;
  EXPECT_NE(testing::RunCommand({"git", "apply", "--check", "p.patch"}, tmp.path(), &out), 0);

  // Without windows, e3's hunk breaks too: its trailing context (e4's key) moved away.
  PartialApply plain = ApplyHunksNear(later, *hunks);
  EXPECT_FALSE(plain.hunks[3].applied);
  EXPECT_FALSE(plain.hunks[5].applied);
  // With each entry's lines (at the later commit, and where it ended in the sweep's), only e5's.
  std::vector<LineWindow> windows;
  for (int i = 0; i < n; ++i) {
    const std::string key = util::StrCat("  e", i, ":");
    const auto line_of = [](const std::string& text, std::size_t pos) {
      return static_cast<int>(std::count(text.begin(), text.begin() + pos, '\n'));
    };
    const std::size_t at = later.find(key);
    std::size_t end = later.find('\n', at) + 1;  // past the entry's lines (indented 4)
    while (end < later.size() && later.compare(end, 4, "    ") == 0)
      end = later.find('\n', end) + 1;
    windows.push_back({line_of(later, at), line_of(later, end), regions[i].old_end});
  }
  PartialApply near = ApplyHunksNear(later, *hunks, windows);
  ASSERT_EQ(near.hunks.size(), 8u);
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(near.hunks[i].applied, i != 5) << i << ": " << near.hunks[i].why;
  }
  EXPECT_NE(near.hunks[5].why.find("not in the file"), std::string::npos) << near.hunks[5].why;
  // The result: `later` with every entry but e5 as the sweep left it.
  std::string want = b;
  want.insert(want.find("test_config:") + 13, "  # moved on\n");
  want.insert(want.find("  e4:"), "  new_one:\n    status: EXPECTED_PASSING\n");
  const std::string e5_sweep =
      want.substr(want.find("  e5:"), want.find("  e6:") - want.find("  e5:"));
  want.replace(want.find("  e5:"), e5_sweep.size(),
               EntryText(5, "KNOWN_FAILURE_XFAIL", "r5, see #12"));
  EXPECT_EQ(near.text, want);
}

// A hunk whose lines also match in another entry lands in its own entry's window.
TEST(ApplyHunksNear, AWindowKeepsAHunkInItsEntry) {
  const std::string a = "x:\n  s: 1\n  t: 2\ny:\n  s: 1\n  t: 2\n";
  Hunk h;
  h.old_start = 2;  // the diff says x's lines
  h.old_count = 2;
  h.new_start = 2;
  h.new_count = 2;
  h.header = "@@ -2,2 +2,2 @@";
  h.lines = {"-  s: 1", "+  s: 9", "   t: 2"};
  EXPECT_EQ(ApplyHunksNear(a, {h}).text, "x:\n  s: 9\n  t: 2\ny:\n  s: 1\n  t: 2\n");
  // Entry y's lines are [3, 6): there it goes.
  EXPECT_EQ(ApplyHunksNear(a, {h}, {{3, 6}}).text, "x:\n  s: 1\n  t: 2\ny:\n  s: 9\n  t: 2\n");
  PartialApply none = ApplyHunksNear(a, {h}, {{0, 2}});
  EXPECT_FALSE(none.hunks[0].applied);
  EXPECT_EQ(none.text, a);
}

// The index line lets git apply --3way merge a hunk whose context changed upstream.
TEST(IndexLine, LetsGitApplyThreeWayMergeAnUpstreamContextEdit) {
  testing::TempDir tmp;
  std::string out;
  ASSERT_EQ(Git(tmp.path(), {"init", "-q"}, &out), 0) << out;
  const std::string a = "a\nb\nc\nd\ne\nf\ng\n";
  testing::WriteFileOrDie(tmp.path() / "f.txt", a);
  ASSERT_EQ(Git(tmp.path(), {"add", "f.txt"}, &out), 0) << out;
  ASSERT_EQ(Git(tmp.path(), {"commit", "-qm", "base"}, &out), 0) << out;
  const std::string with_index =
      UnifiedDiff("f.txt", a, "a\nb\nc\nD\ne\nf\ng\n", {.index_line = true});
  const std::string without = UnifiedDiff("f.txt", a, "a\nb\nc\nD\ne\nf\ng\n");
  testing::WriteFileOrDie(tmp.path() / "f.txt", "a\nB\nc\nd\ne\nf\ng\n");  // upstream, in context
  ASSERT_EQ(Git(tmp.path(), {"commit", "-qam", "upstream"}, &out), 0) << out;
  testing::WriteFileOrDie(tmp.path() / "with.patch", with_index);
  testing::WriteFileOrDie(tmp.path() / "without.patch", without);
  EXPECT_NE(Git(tmp.path(), {"apply", "--check", "with.patch"}, &out), 0) << out;
  EXPECT_NE(Git(tmp.path(), {"apply", "--3way", "without.patch"}, &out), 0) << out;
  ASSERT_EQ(Git(tmp.path(), {"apply", "--3way", "with.patch"}, &out), 0) << out;
  EXPECT_EQ(testing::ReadFileOrDie(tmp.path() / "f.txt"), "a\nB\nc\nD\ne\nf\ng\n");
}

}  // namespace
}  // namespace triage::diff
