#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace triage::util {

// A temporary std::string argument (an rvalue: S deduced without a reference). A function that
// returns views into its argument declares a deleted overload for it, so that a call on a
// temporary, whose views would dangle once the full expression ends (a range-for over
// SplitLines(MakeText()) reads freed memory), does not compile: name the string first. Other
// arguments (an lvalue string, a literal, a view) take the string_view overload.
template <typename S>
concept TemporaryString = std::is_same_v<std::remove_const_t<S>, std::string>;

// Splits text into lines without their '\n'. A text ending in '\n' has no empty last line; a
// text not ending in '\n' keeps its unterminated last line. Views point into text.
std::vector<std::string_view> SplitLines(std::string_view text);
template <TemporaryString S>
std::vector<std::string_view> SplitLines(S&& text) = delete;

// Byte offset of the first byte that is not part of well-formed UTF-8 (overlongs, surrogates
// and code points above U+10FFFF are ill-formed), or nullopt when all of text is valid.
std::optional<std::size_t> FirstInvalidUtf8(std::string_view text);

// Number of leading spaces.
int IndentOf(std::string_view line);

// True for lines that hold only whitespace, or whitespace then a '#' comment.
bool IsBlankOrComment(std::string_view line);

std::string_view TrimWhitespace(std::string_view s);
template <TemporaryString S>
std::string_view TrimWhitespace(S&& s) = delete;

// 1-based line and column of a byte offset.
struct LineCol {
  int line = 1;
  int col = 1;
};
LineCol LineColAt(std::string_view text, std::size_t offset);

// Shortens s to at most max_bytes, cutting on a UTF-8 character boundary.
std::string_view TruncateUtf8(std::string_view s, std::size_t max_bytes);
template <TemporaryString S>
std::string_view TruncateUtf8(S&& s, std::size_t max_bytes) = delete;

}  // namespace triage::util
