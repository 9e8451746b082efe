#include "common/command/summary.h"

#include <algorithm>
#include <span>
#include <string>

#include "common/util/strings.h"
#include "common/util/text.h"
#include "nlohmann/json.hpp"

namespace triage::command {
namespace {

absl::Status Invalid(std::string_view source, std::string_view field, std::string_view why) {
  return absl::InvalidArgumentError(util::StrCat(source, ": ", field, ": ", why));
}

bool OneOf(std::span<const std::string_view> names, std::string_view v) {
  return std::find(names.begin(), names.end(), v) != names.end();
}

std::string Names(std::span<const std::string_view> names) { return util::StrJoin(names, ", "); }

bool IsFingerprint(std::string_view s) {
  if (s.empty() || s.size() > 100) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(s[0])) return false;
  return std::all_of(s.begin(), s.end(),
                     [&](char c) { return alnum(c) || c == '.' || c == '_' || c == '-'; });
}

bool IsPinName(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '/' || c == '-';
  });
}

// A string field that must be one of names.
absl::Status Choice(const nlohmann::json& j, std::string_view source, std::string_view field,
                    std::span<const std::string_view> names, std::string* out) {
  if (!j.is_string() || !OneOf(names, j.get<std::string>())) {
    return Invalid(source, field, util::StrCat("must be one of ", Names(names)));
  }
  *out = j.get<std::string>();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::CommandSummary> ParseSummary(std::string_view text, std::string_view source) {
  if (text.size() > kMaxSummaryBytes) {
    return absl::InvalidArgumentError(
        util::StrCat(source, ": ", text.size(), " bytes, over the limit of ", kMaxSummaryBytes));
  }
  if (util::FirstInvalidUtf8(text)) {
    return absl::InvalidArgumentError(util::StrCat(source, ": not UTF-8"));
  }
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(util::StrCat(source, ": not JSON"));
  if (!j.is_object()) {
    return absl::InvalidArgumentError(util::StrCat(source, ": not a JSON object"));
  }
  v1::CommandSummary s;
  for (const auto& [field, value] : j.items()) {
    absl::Status st;
    if (field == "fingerprint") {
      if (!value.is_string() || !IsFingerprint(value.get<std::string>())) {
        return Invalid(source, field,
                       "must be 1 to 100 characters of a-z, 0-9, '.', '_' and '-', starting with "
                       "a letter or digit");
      }
      s.set_fingerprint(value.get<std::string>());
    } else if (field == "layer") {
      st = Choice(value, source, field, kSummaryLayers, s.mutable_layer());
    } else if (field == "fix_kind") {
      st = Choice(value, source, field, kSummaryFixKinds, s.mutable_fix_kind());
    } else if (field == "result") {
      st = Choice(value, source, field, kSummaryResults, s.mutable_result());
    } else if (field == "root_cause") {
      if (!value.is_string()) return Invalid(source, field, "must be a string");
      const std::string cause = value.get<std::string>();
      if (cause.size() > kMaxRootCauseBytes) {
        return Invalid(
            source, field,
            util::StrCat(cause.size(), " bytes, over the limit of ", kMaxRootCauseBytes));
      }
      s.set_root_cause(cause);
    } else if (field == "workarounds") {
      if (!value.is_object()) {
        return Invalid(source, field, "must be an object of names to true or false");
      }
      for (const auto& [name, used] : value.items()) {
        if (!OneOf(kSummaryWorkarounds, name)) {
          return Invalid(source, util::StrCat(field, ".", name),
                         util::StrCat("not a workaround name (", Names(kSummaryWorkarounds), ")"));
        }
        if (!used.is_boolean()) {
          return Invalid(source, util::StrCat(field, ".", name), "must be true or false");
        }
        if (used.get<bool>()) s.add_workarounds(name);
      }
    } else if (field == "version") {
      if (!value.is_string() || value.get<std::string>().size() > kMaxVersionBytes) {
        return Invalid(source, field,
                       util::StrCat("must be a string of at most ", kMaxVersionBytes, " bytes"));
      }
    } else if (field == "pins") {
      if (!value.is_object() || value.size() > kMaxPins) {
        return Invalid(source, field,
                       util::StrCat("must be an object of at most ", kMaxPins,
                                    " repository names to commits"));
      }
      for (const auto& [name, commit] : value.items()) {
        if (!IsPinName(name)) {
          return Invalid(source, util::StrCat(field, ".", name),
                         "a name is 1 to 64 characters of A-Z, a-z, 0-9, '.', '_', '/' and '-'");
        }
        if (!commit.is_string() || commit.get<std::string>().empty() ||
            commit.get<std::string>().size() > kMaxVersionBytes) {
          return Invalid(source, util::StrCat(field, ".", name),
                         util::StrCat("must be a string of 1 to ", kMaxVersionBytes, " bytes"));
        }
      }
    } else {
      return Invalid(source, field,
                     "not a summary field (fingerprint, layer, fix_kind, workarounds, root_cause, "
                     "result, version, pins)");
    }
    if (!st.ok()) return st;
  }
  if (s.fingerprint().empty()) return Invalid(source, "fingerprint", "missing");
  return s;
}

SummaryProvenance ProvenanceOfSummary(std::string_view text) {
  SummaryProvenance out;
  if (!ParseSummary(text, "summary").ok()) return out;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.contains("version")) out.version = j["version"].get<std::string>();
  if (j.contains("pins")) {
    for (const auto& [name, commit] : j["pins"].items()) out.pins[name] = commit.get<std::string>();
  }
  return out;
}

}  // namespace triage::command
