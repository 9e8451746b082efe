// Reading a field's value and comment off its line (edit_internal.h).

#include <algorithm>
#include <iterator>
#include <string_view>
#include <vector>

#include "common/inventory/edit_internal.h"
#include "common/inventory/schema.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::inventory::edit_internal {

int InsertRank(std::string_view name) {
  for (int i = 0; i < static_cast<int>(std::size(kInsertOrder)); ++i) {
    if (kInsertOrder[i] == name) return i;
  }
  return static_cast<int>(std::size(kInsertOrder));
}

// End (exclusive) of the value starting at line[i], or npos when it does not end on the line.
std::size_t ValueEnd(std::string_view line, std::size_t i) {
  char c = line[i];
  if (c == '"') {
    for (std::size_t k = i + 1; k < line.size(); ++k) {
      if (line[k] == '\\') {
        ++k;
      } else if (line[k] == '"') {
        return k + 1;
      }
    }
    return std::string_view::npos;
  }
  if (c == '\'') {
    for (std::size_t k = i + 1; k < line.size(); ++k) {
      if (line[k] == '\'') {
        if (k + 1 < line.size() && line[k + 1] == '\'') {
          ++k;
        } else {
          return k + 1;
        }
      }
    }
    return std::string_view::npos;
  }
  if (c == '[' || c == '{') {
    int depth = 0;
    char quote = 0;
    for (std::size_t k = i; k < line.size(); ++k) {
      char d = line[k];
      if (quote != 0) {
        if (quote == '"' && d == '\\') {
          ++k;
        } else if (d == quote) {
          quote = 0;
        }
        continue;
      }
      if (d == '"' || d == '\'') {
        quote = d;
      } else if (d == '[' || d == '{') {
        ++depth;
      } else if (d == ']' || d == '}') {
        if (--depth == 0) return k + 1;
      }
    }
    return std::string_view::npos;
  }
  // Plain scalar: up to " #" or the end of the line, without trailing spaces.
  std::size_t end = line.size();
  for (std::size_t k = i; k + 1 < line.size(); ++k) {
    if ((line[k] == ' ' || line[k] == '\t') && line[k + 1] == '#') {
      end = k;
      break;
    }
  }
  while (end > i && (line[end - 1] == ' ' || line[end - 1] == '\t')) --end;
  return end;
}

// Where the value of `name:` ends on its key line: after the value when it ends on the line,
// after the ':' when the line holds no value (a block list or mapping follows), npos otherwise.
std::size_t ValueEndOnKeyLine(std::string_view line, int key_col, std::string_view name) {
  std::size_t colon = line.find(':', static_cast<std::size_t>(key_col) + name.size());
  if (colon == std::string_view::npos) return std::string_view::npos;
  std::size_t i = colon + 1;
  while (i < line.size() && line[i] == ' ') ++i;
  if (i >= line.size() || line[i] == '#') return colon + 1;
  return ValueEnd(line, i);
}

// The " # comment" after a single-line value, or "".
std::string InlineComment(std::string_view line, int key_col, std::string_view name) {
  std::size_t end = ValueEndOnKeyLine(line, key_col, name);
  if (end == std::string_view::npos) return "";
  std::string_view rest = line.substr(end);
  std::size_t hash = rest.find('#');
  if (hash == std::string_view::npos) return "";
  if (!util::TrimWhitespace(rest.substr(0, hash)).empty()) return "";
  // No value on the line: the comment follows the ':' after one space.
  if (end > 0 && line[end - 1] == ':') return util::StrCat(" ", rest.substr(hash));
  return std::string(rest);
}

// The trailer a comment text is written as: " # text", the text's surrounding spaces trimmed.
std::string CommentTrailer(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  return util::StrCat(" # ", text);
}

namespace {
bool IsLink(std::string_view word) {
  return word.starts_with("https://") || word.starts_with("http://");
}
// The words of a comment's text, split at spaces and tabs.
std::vector<std::string_view> Words(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    std::size_t j = i;
    while (j < text.size() && text[j] != ' ' && text[j] != '\t') ++j;
    if (j > i) out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}
}  // namespace

std::string WithKeptLinks(std::string_view trailer, std::string_view old_comment) {
  std::string out(trailer);
  for (std::string_view word : Words(old_comment)) {
    if (IsLink(word) && trailer.find(word) == std::string_view::npos) {
      util::StrAppend(&out, " ", word);
    }
  }
  return out;
}

bool IsTrailerWithLinks(std::string_view got, std::string_view trailer) {
  if (!got.starts_with(trailer)) return false;
  const std::string_view rest = got.substr(trailer.size());
  if (rest.empty()) return true;
  if (rest.front() != ' ') return false;
  for (std::string_view word : Words(rest)) {
    if (!IsLink(word)) return false;
  }
  return true;
}

const std::string* FindComment(const std::vector<std::pair<std::string, std::string>>& comments,
                               std::string_view name) {
  for (const auto& [field, text] : comments) {
    if (field == name) return &text;
  }
  return nullptr;
}

// Whether a string can be written as a plain scalar and read back as the same string.
bool PlainSafe(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.' || c == '/' || c == '+';
    if (!ok) return false;
  }
  if (s[0] == '-' || s[0] == '.' || s[0] == '+') return false;
  Value resolved = ResolvePlainScalar(s);
  return resolved.is_string();
}

}  // namespace triage::inventory::edit_internal
