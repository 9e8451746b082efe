#include "common/registry/registry.h"

#include <algorithm>
#include <cctype>

#include "common/diff/unified_diff.h"
#include "common/util/strings.h"
#include "common/util/text.h"
#include "re2/re2.h"

namespace triage::registry {
namespace {

const re2::RE2& AttrLine() {
  static const re2::RE2 re(
      R"re(^\s*_register_attr\(\s*(?:"([A-Za-z_]\w*)"|'([A-Za-z_]\w*)')\s*,\s*(?:"([A-Za-z_]\w*)"|'([A-Za-z_]\w*)')\s*\)\s*(?:#.*)?$)re");
  return re;
}

const re2::RE2& HandlerLine() {
  static const re2::RE2 re(
      R"re(^\s*_register_handler\(\s*(?:"([A-Za-z_]\w*)"|'([A-Za-z_]\w*)')\s*,)re");
  return re;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

bool IsIdentifier(std::string_view s) {
  if (s.empty() || s.size() > 200) return false;
  if (!(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

absl::StatusOr<RegistryFile> RegistryFile::Parse(std::string path, std::string text) {
  RegistryFile f;
  f.path_ = std::move(path);
  f.original_ = text;
  for (auto line : util::SplitLines(text)) f.lines_.emplace_back(line);
  f.final_newline_ = text.empty() || text.back() == '\n';
  f.Reindex();
  for (std::size_t i = 0; i < f.registrations_.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (f.registrations_[i].cls == f.registrations_[j].cls) {
        return absl::FailedPreconditionError(
            util::StrCat(f.path_, ":", f.registrations_[i].line + 1, ": second handler for class '",
                         f.registrations_[i].cls, "' (first at line ", f.registrations_[j].line + 1,
                         "); the registry raises on import"));
      }
    }
  }
  return f;
}

void RegistryFile::Reindex() {
  registrations_.clear();
  for (int i = 0; i < static_cast<int>(lines_.size()); ++i) {
    std::string c1, c2, a1, a2;
    const re2::StringPiece line(lines_[i].data(), lines_[i].size());
    if (re2::RE2::FullMatch(line, AttrLine(), &c1, &c2, &a1, &a2)) {
      registrations_.push_back({c1.empty() ? c2 : c1, a1.empty() ? a2 : a1, i});
    } else if (re2::RE2::PartialMatch(line, HandlerLine(), &c1, &c2)) {
      registrations_.push_back({c1.empty() ? c2 : c1, "", i});
    }
  }
}

const Registration* RegistryFile::Find(std::string_view cls) const {
  for (const auto& r : registrations_) {
    if (r.cls == cls) return &r;
  }
  return nullptr;
}

absl::Status RegistryFile::Add(std::string_view cls, std::string_view attr) {
  if (!IsIdentifier(cls) || !IsIdentifier(attr)) {
    return absl::InvalidArgumentError(util::StrCat(path_, ": refusing to register '", cls, "' -> '",
                                                   attr, "': not Python identifiers"));
  }
  if (const Registration* existing = Find(cls)) {
    if (existing->attr == attr) return absl::OkStatus();
    return absl::AlreadyExistsError(
        util::StrCat(path_, ":", existing->line + 1, ": class '", cls, "' already has a handler (",
                     existing->attr.empty() ? "custom function"
                                            : util::StrCat("attribute '", existing->attr, "'"),
                     "); a second handler for one class is refused"));
  }
  // The order the file uses: case-insensitive (as tt-forge-models), else case-sensitive.
  auto sorted_by = [&](auto key) {
    for (std::size_t i = 1; i < registrations_.size(); ++i) {
      if (key(registrations_[i].cls) < key(registrations_[i - 1].cls)) return false;
    }
    return true;
  };
  auto identity = [](const std::string& s) { return s; };
  auto lower = [](const std::string& s) { return Lower(s); };
  const bool ci = sorted_by(lower);
  const bool cs = !ci && sorted_by(identity);
  std::string indent;
  int insert_at;
  if (registrations_.empty()) {
    insert_at = static_cast<int>(lines_.size());
  } else {
    const Registration* before = nullptr;
    if (ci || cs) {
      for (const auto& r : registrations_) {
        if (ci ? Lower(r.cls) > Lower(std::string(cls)) : r.cls > cls) {
          before = &r;
          break;
        }
      }
    }
    const Registration& anchor = before != nullptr ? *before : registrations_.back();
    indent = std::string(util::IndentOf(lines_[anchor.line]), ' ');
    insert_at = before != nullptr ? before->line : anchor.line + 1;
  }
  if (insert_at == static_cast<int>(lines_.size()) && !final_newline_) final_newline_ = true;
  lines_.insert(lines_.begin() + insert_at,
                util::StrCat(indent, "_register_attr(\"", cls, "\", \"", attr, "\")"));
  Reindex();
  return absl::OkStatus();
}

absl::Status RegistryFile::Remove(std::string_view cls) {
  const Registration* r = Find(cls);
  if (r == nullptr) {
    return absl::NotFoundError(util::StrCat(path_, ": no registration for class '", cls, "'"));
  }
  lines_.erase(lines_.begin() + r->line);
  Reindex();
  return absl::OkStatus();
}

std::string RegistryFile::Text() const {
  std::string out;
  for (std::size_t i = 0; i < lines_.size(); ++i) {
    out += lines_[i];
    if (i + 1 < lines_.size() || final_newline_) out += '\n';
  }
  return out;
}

std::string RegistryFile::Diff() const { return diff::UnifiedDiff(path_, original_, Text()); }

std::optional<int> FindUnpackOverride(std::string_view loader_text) {
  static const re2::RE2 re(R"re(^\s+def\s+unpack_forward_output\s*\()re");
  int n = 0;
  for (auto line : util::SplitLines(loader_text)) {
    ++n;
    if (re2::RE2::PartialMatch(re2::StringPiece(line.data(), line.size()), re)) return n;
  }
  return std::nullopt;
}

}  // namespace triage::registry
