#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "common/diff/apply_diff.h"
#include "common/diff/unified_diff.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace triage::diff {
namespace {

// Applies patch to old_text with `git apply` in a temp dir and returns the result.
std::string GitApply(const std::string& path, const std::string& old_text, const std::string& patch,
                     bool* ok) {
  testing::TempDir tmp;
  testing::WriteFileOrDie(tmp.path() / path, old_text);
  testing::WriteFileOrDie(tmp.path() / "p.patch", patch);
  std::string out;
  int rc = testing::RunCommand({"git", "apply", "--check", "p.patch"}, tmp.path(), &out);
  *ok = rc == 0;
  if (rc != 0) {
    ADD_FAILURE() << "git apply --check failed: " << out << "\n" << patch;
    return "";
  }
  rc = testing::RunCommand({"git", "apply", "p.patch"}, tmp.path(), &out);
  *ok = rc == 0;
  return testing::ReadFileOrDie(tmp.path() / path);
}

TEST(UnifiedDiff, EqualTextsGiveNoDiff) { EXPECT_EQ(UnifiedDiff("f", "a\nb\n", "a\nb\n"), ""); }

TEST(UnifiedDiff, OneChangedLineWithContext) {
  std::string a = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
  std::string b = "1\n2\n3\n4\nFIVE\n6\n7\n8\n9\n";
  EXPECT_EQ(UnifiedDiff("dir/f.yaml", a, b),
            "diff --git a/dir/f.yaml b/dir/f.yaml\n"
            "--- a/dir/f.yaml\n"
            "+++ b/dir/f.yaml\n"
            "@@ -2,7 +2,7 @@\n"
            " 2\n 3\n 4\n-5\n+FIVE\n 6\n 7\n 8\n");
}

TEST(UnifiedDiff, GitApplyAcceptsEdgeCases) {
  struct Case {
    std::string name, a, b;
  };
  const Case cases[] = {
      {"insert at start", "a\nb\nc\n", "new\na\nb\nc\n"},
      {"append at end", "a\nb\n", "a\nb\nc\n"},
      {"delete everything but one", "a\nb\nc\nd\n", "c\n"},
      {"no newline at end (old)", "a\nb", "a\nc\n"},
      {"no newline at end (new)", "a\nb\n", "a\nb"},
      {"two far hunks", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n",
       "1\nX\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\nY\n15\n"},
      {"utf8 and quotes", "r: \"a \xE2\x80\x94 b\"\n", "r: \"a \\\" b\"\n"},
      {"empty to text", "", "x\n"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    bool ok = false;
    std::string patch = UnifiedDiff("f.txt", c.a, c.b);
    EXPECT_EQ(GitApply("f.txt", c.a, patch, &ok), c.b);
    EXPECT_TRUE(ok);
  }
}

TEST(UnifiedDiff, RandomEditsRoundTripThroughGitApply) {
  std::mt19937 rng(1234);
  for (int round = 0; round < 20; ++round) {
    std::vector<std::string> lines;
    for (int i = 0; i < 200; ++i) lines.push_back("line " + std::to_string(i % 37));
    std::string a;
    for (const auto& l : lines) a += l + "\n";
    for (int k = 0; k < 15; ++k) {
      int at = static_cast<int>(rng() % lines.size());
      switch (rng() % 3) {
        case 0:
          lines.erase(lines.begin() + at);
          break;
        case 1:
          lines.insert(lines.begin() + at, "inserted " + std::to_string(k));
          break;
        default:
          lines[at] = "changed " + std::to_string(k);
      }
    }
    std::string b;
    for (const auto& l : lines) b += l + "\n";
    bool ok = false;
    EXPECT_EQ(GitApply("r.txt", a, UnifiedDiff("r.txt", a, b), &ok), b) << "round " << round;
  }
}

TEST(UnifiedDiff, FallsBackToOneHunkBeyondTheEditDistanceLimit) {
  std::string a, b;
  for (int i = 0; i < 100; ++i) {
    a += "a" + std::to_string(i) + "\n";
    b += "b" + std::to_string(i) + "\n";
  }
  DiffOptions options;
  options.max_edit_distance = 10;
  bool ok = false;
  EXPECT_EQ(GitApply("f", a, UnifiedDiff("f", a, b, options), &ok), b);
}

TEST(ApplyDiff, RoundTripsOurDiffsIncludingEdgeCases) {
  std::mt19937 rng(99);
  const std::pair<std::string, std::string> fixed[] = {
      {"a\nb", "a\nc\n"},
      {"a\nb\n", "a\nb"},
      {"", "x\n"},
      {"x\n", ""},
      {"1\n2\n3\n4\n5\n6\n7\n8\n9\n", "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n"}};
  for (const auto& [a, b] : fixed) {
    auto files = SplitDiff(UnifiedDiff("f", a, b));
    ASSERT_TRUE(files.ok());
    ASSERT_EQ(files->size(), 1u);
    auto out = ApplyFileDiff(a, (*files)[0]);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(*out, b);
  }
  for (int round = 0; round < 50; ++round) {
    std::vector<std::string> lines;
    for (int i = 0; i < 60; ++i) lines.push_back("l" + std::to_string(i % 11));
    std::string a;
    for (const auto& l : lines) a += l + "\n";
    for (int k = 0; k < 6; ++k) {
      int at = static_cast<int>(rng() % lines.size());
      if (rng() % 2) {
        lines.insert(lines.begin() + at, "new" + std::to_string(k));
      } else {
        lines.erase(lines.begin() + at);
      }
    }
    std::string b;
    for (const auto& l : lines) b += l + "\n";
    auto files = SplitDiff(UnifiedDiff("f", a, b));
    ASSERT_TRUE(files.ok());
    if (a == b) continue;
    auto out = ApplyFileDiff(a, (*files)[0]);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(*out, b) << "round " << round;
  }
}

TEST(ApplyDiff, SplitsMultiFileDiffsAndRefusesMismatches) {
  std::string d = UnifiedDiff("x/a.py", "1\n2\n", "1\n3\n") + UnifiedDiff("b.py", "q\n", "r\n");
  auto files = SplitDiff(d);
  ASSERT_TRUE(files.ok());
  ASSERT_EQ(files->size(), 2u);
  EXPECT_EQ((*files)[0].path(), "x/a.py");
  EXPECT_EQ((*files)[1].path(), "b.py");
  auto bad = ApplyFileDiff("1\nX\n", (*files)[0]);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("does not apply at line 2"), std::string::npos)
      << bad.status();
  EXPECT_FALSE(SplitDiff("garbage\n").ok());
}

TEST(ApplyDiff, ParsesHunksWithTheirLinesAndMarkers) {
  std::string a, b;
  for (int i = 1; i <= 20; ++i) a += std::to_string(i) + "\n";
  b = a;
  b.replace(b.find("2\n"), 2, "two\n");
  b.pop_back();  // the last line loses its newline
  b.replace(b.rfind("20"), 2, "twenty");
  auto files = SplitDiff(UnifiedDiff("f", a, b));
  ASSERT_TRUE(files.ok());
  ASSERT_EQ(files->size(), 1u);
  auto hunks = ParseHunks((*files)[0]);
  ASSERT_TRUE(hunks.ok()) << hunks.status();
  ASSERT_EQ(hunks->size(), 2u) << (*files)[0].text;
  const Hunk& first = (*hunks)[0];
  EXPECT_EQ(first.old_start, 1);
  EXPECT_EQ(first.old_count, 5);
  EXPECT_EQ(first.header, "@@ -1,5 +1,5 @@");
  EXPECT_EQ(first.Text(), "@@ -1,5 +1,5 @@\n 1\n-2\n+two\n 3\n 4\n 5\n");
  const Hunk& last = (*hunks)[1];
  EXPECT_EQ(last.new_start, 17);
  ASSERT_FALSE(last.lines.empty());
  EXPECT_EQ(last.lines.back(), "\\ No newline at end of file");
  EXPECT_EQ(std::count(last.lines.begin(), last.lines.end(), "+twenty"), 1);

  FileDiff bad;
  bad.new_path = "f";
  bad.text = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n?x\n";
  EXPECT_FALSE(ParseHunks(bad).ok()) << "a line that is no hunk line";
  bad.text = "--- a/f\n+++ b/f\n@@ -x +1 @@\n-a\n+b\n";
  EXPECT_FALSE(ParseHunks(bad).ok()) << "a malformed header";
}

// Random block replacements with their regions: the region diff equals the whole-file diff when
// blocks are far apart, and always applies with git apply.
TEST(UnifiedDiffOfRegions, MatchesTheWholeFileDiffAndApplies) {
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    std::vector<std::string> old_lines;
    for (int i = 0; i < 200; ++i) old_lines.push_back("line " + std::to_string(i));
    std::string a, b;
    std::vector<Region> regions;
    int new_line = 0;
    for (int i = 0; i < 200;) {
      if (rng() % 20 == 0 && i + 3 <= 200) {
        const int len = 1 + static_cast<int>(rng() % 3);
        const int added = static_cast<int>(rng() % 4);
        for (int k = 0; k < len; ++k) a += old_lines[i + k] + "\n";
        b += old_lines[i] + "\n";  // the block's first line stays (like an entry's key line)
        for (int k = 0; k < added; ++k)
          b += "new " + std::to_string(round * 1000 + i * 10 + k) + "\n";
        regions.push_back({i, i + len, new_line, new_line + 1 + added});
        new_line += 1 + added;
        i += len + 8;  // keep blocks more than 2 * context apart
        for (int k = i - 8; k < i && k < 200; ++k) {
          a += old_lines[k] + "\n";
          b += old_lines[k] + "\n";
          ++new_line;
        }
        continue;
      }
      a += old_lines[i] + "\n";
      b += old_lines[i] + "\n";
      ++new_line;
      ++i;
    }
    const std::string whole = UnifiedDiff("f", a, b);
    const std::string by_regions = UnifiedDiffOfRegions("f", a, b, regions);
    EXPECT_EQ(by_regions, whole) << "round " << round;
    if (!by_regions.empty()) {
      bool ok = false;
      EXPECT_EQ(GitApply("f", a, by_regions, &ok), b);
    }
  }
}

TEST(UnifiedDiffOfRegions, WrongRegionsFallBackToTheWholeFileDiff) {
  const std::string a = "1\n2\n3\n4\n5\n", b = "1\n2\nX\n4\n5\n";
  const std::vector<Region> wrong = {{0, 1, 0, 1}};  // the change is at line 2, not 0
  EXPECT_EQ(UnifiedDiffOfRegions("f", a, b, wrong), UnifiedDiff("f", a, b));
  const std::vector<Region> overlapping = {{2, 3, 2, 3}, {1, 2, 1, 2}};
  EXPECT_EQ(UnifiedDiffOfRegions("f", a, b, overlapping), UnifiedDiff("f", a, b));
  const std::vector<Region> right = {{2, 3, 2, 3}};
  EXPECT_EQ(UnifiedDiffOfRegions("f", a, b, right), UnifiedDiff("f", a, b));
}

}  // namespace
}  // namespace triage::diff
