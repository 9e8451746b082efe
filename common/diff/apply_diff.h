#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace triage::diff {

// One file's part of a (possibly multi-file) git-style unified diff.
struct FileDiff {
  std::string old_path;  // without a/ ("" for /dev/null: a new file)
  std::string new_path;  // without b/ ("" for /dev/null: a deleted file)
  std::string text;      // this file's headers and hunks
  std::string path() const { return new_path.empty() ? old_path : new_path; }
};

// Splits a diff at its "diff --git" / "--- " file headers.
absl::StatusOr<std::vector<FileDiff>> SplitDiff(std::string_view diff);

// One hunk of a file's diff.
struct Hunk {
  int old_start = 0;
  int old_count = 0;
  int new_start = 0;
  int new_count = 0;
  std::string header;              // "@@ -a,b +c,d @@ ..." as written
  std::vector<std::string> lines;  // ' ', '-', '+' lines and "\ No newline" markers, as written
  std::string Text() const;        // the header and the lines, each ending in '\n'
};

// The hunks of one file's diff, in order (the file headers before the first hunk are skipped).
// A hunk ends when its line counts are reached. Errors: a malformed header, a line that is not
// context, removal or addition inside a hunk.
absl::StatusOr<std::vector<Hunk>> ParseHunks(const FileDiff& diff);

// Applies one file's unified diff to its original text, strictly: every hunk's context and
// removed lines must match where the hunk says (after earlier hunks' shifts), like `git apply`
// without fuzz. An error names the hunk and the line that did not match.
absl::StatusOr<std::string> ApplyFileDiff(std::string_view original, const FileDiff& diff);

}  // namespace triage::diff
