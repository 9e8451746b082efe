#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/inventory/value.h"

namespace triage::inventory {

// What tt-xla's test-config loader accepts, in one table (docs/inventory.md, "Validation").

enum class FieldType {
  kNumber,             // int or float
  kFraction,           // a number from 0 to 1 (a PCC)
  kNonNegativeNumber,  // a finite number >= 0 (a tolerance)
  kBool,
  kString,
  kStatus,         // ModelTestStatus
  kBringupStatus,  // BringupStatus
  kExecutionPass,  // FORWARD / BACKWARD
  kStringList,
  kArchList,  // list of arch names
  kPositiveInt,
  kOptimizationLevel,  // 0, 1 or 2
  kArchOverrides,      // mapping arch -> mapping of fields (top level only)
};

struct FieldSpec {
  std::string_view name;
  FieldType type;
};

// All fields, in the order tt-xla documents them.
std::span<const FieldSpec> AllFields();
const FieldSpec* FindField(std::string_view name);

inline constexpr std::string_view kStatusNames[] = {"EXPECTED_PASSING", "KNOWN_FAILURE_XFAIL",
                                                    "NOT_SUPPORTED_SKIP", "UNSPECIFIED",
                                                    "EXCLUDE_MODEL"};
inline constexpr std::string_view kBringupStatusNames[] = {"PASSED",
                                                           "INCORRECT_RESULT",
                                                           "FAILED_FE_COMPILATION",
                                                           "FAILED_TTMLIR_COMPILATION",
                                                           "FAILED_RUNTIME",
                                                           "NOT_STARTED",
                                                           "UNKNOWN"};
inline constexpr std::string_view kExecutionPassNames[] = {"FORWARD", "BACKWARD"};
inline constexpr std::string_view kArchNames[] = {"n150",          "p150",         "n300",
                                                  "n300-llmbox",   "galaxy-wh-6u", "galaxy-bh",
                                                  "qb2-blackhole", "lb-blackhole"};

bool IsKnownArch(std::string_view arch);

// Accepts an enum's NAME or its lower-case value ("EXPECTED_PASSING" or "expected_passing")
// and returns the NAME; nullopt for anything else.
std::optional<std::string_view> CanonicalEnum(std::span<const std::string_view> names,
                                              std::string_view text);
std::optional<std::string_view> CanonicalStatus(std::string_view text);
std::optional<std::string_view> CanonicalBringupStatus(std::string_view text);

// A problem with a field's value, at a position inside it when known.
struct ValueProblem {
  SourcePos pos;
  std::string message;
};

// Checks one field's value against its spec. in_override: the field sits inside
// arch_overrides.<arch> (where arch_overrides itself is not allowed).
void CheckField(std::string_view name, const Value& value, bool in_override,
                std::vector<ValueProblem>& problems);

}  // namespace triage::inventory
