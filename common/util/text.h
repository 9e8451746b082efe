#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace triage::util {

// Splits text into lines without their '\n'. A text ending in '\n' has no empty last line; a
// text not ending in '\n' keeps its unterminated last line. Views point into text.
std::vector<std::string_view> SplitLines(std::string_view text);

// Byte offset of the first byte that is not part of well-formed UTF-8 (overlongs, surrogates
// and code points above U+10FFFF are ill-formed), or nullopt when all of text is valid.
std::optional<std::size_t> FirstInvalidUtf8(std::string_view text);

// Number of leading spaces.
int IndentOf(std::string_view line);

// True for lines that hold only whitespace, or whitespace then a '#' comment.
bool IsBlankOrComment(std::string_view line);

std::string_view TrimWhitespace(std::string_view s);

// 1-based line and column of a byte offset.
struct LineCol {
  int line = 1;
  int col = 1;
};
LineCol LineColAt(std::string_view text, std::size_t offset);

// Shortens s to at most max_bytes, cutting on a UTF-8 character boundary.
std::string_view TruncateUtf8(std::string_view s, std::size_t max_bytes);

}  // namespace triage::util
