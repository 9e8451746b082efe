#include "common/inventory/schema.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "common/util/strings.h"

namespace triage::inventory {
namespace {

constexpr FieldSpec kFields[] = {
    {"required_pcc", FieldType::kFraction},
    {"assert_pcc", FieldType::kBool},
    {"assert_atol", FieldType::kBool},
    {"required_atol", FieldType::kNonNegativeNumber},
    {"assert_allclose", FieldType::kBool},
    {"allclose_rtol", FieldType::kNonNegativeNumber},
    {"allclose_atol", FieldType::kNonNegativeNumber},
    {"status", FieldType::kStatus},
    {"reason", FieldType::kString},
    {"bringup_status", FieldType::kBringupStatus},
    {"markers", FieldType::kStringList},
    {"supported_archs", FieldType::kArchList},
    {"batch_size", FieldType::kPositiveInt},
    {"arch_overrides", FieldType::kArchOverrides},
    {"execution_pass", FieldType::kExecutionPass},
    {"filechecks", FieldType::kStringList},
    {"enable_weight_bfp8_conversion", FieldType::kBool},
    {"optimization_level", FieldType::kOptimizationLevel},
    {"inject_custom_moe", FieldType::kBool},
    {"emitpy_assert_exact", FieldType::kBool},
};

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

SourcePos PosOr(const Value& v, SourcePos fallback) { return v.pos.known() ? v.pos : fallback; }

void CheckEnum(std::string_view field, std::span<const std::string_view> names, const Value& v,
               std::vector<ValueProblem>& problems) {
  if (!v.is_string()) {
    problems.push_back({v.pos, util::StrCat(field, ": expected one of ", util::StrJoin(names, ", "),
                                            ", got ", v.KindName(), " ", v.DebugString())});
    return;
  }
  if (!CanonicalEnum(names, v.string)) {
    problems.push_back(
        {v.pos, util::StrCat(field, ": invalid value '", v.string, "' (expected one of ",
                             util::StrJoin(names, ", "), ", or their lower-case values)")});
  }
}

void CheckStringList(std::string_view field, const Value& v, bool archs,
                     std::vector<ValueProblem>& problems) {
  if (!v.is_list()) {
    problems.push_back({v.pos, util::StrCat(field, ": expected a list, got ", v.KindName(), " ",
                                            v.DebugString())});
    return;
  }
  for (const Value& item : v.list) {
    if (!item.is_string()) {
      problems.push_back(
          {PosOr(item, v.pos), util::StrCat(field, ": expected a list of strings, ", "got ",
                                            item.KindName(), " ", item.DebugString())});
    } else if (archs && !IsKnownArch(item.string)) {
      problems.push_back(
          {PosOr(item, v.pos), util::StrCat(field, ": unknown arch '", item.string,
                                            "' (known: ", util::StrJoin(kArchNames, ", "), ")")});
    }
  }
}

}  // namespace

std::span<const FieldSpec> AllFields() { return kFields; }

const FieldSpec* FindField(std::string_view name) {
  for (const auto& f : kFields) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

bool IsKnownArch(std::string_view arch) {
  return std::find(std::begin(kArchNames), std::end(kArchNames), arch) != std::end(kArchNames);
}

std::optional<std::string_view> CanonicalEnum(std::span<const std::string_view> names,
                                              std::string_view text) {
  for (auto name : names) {
    if (text == name || text == Lower(name)) return name;
  }
  return std::nullopt;
}

std::optional<std::string_view> CanonicalStatus(std::string_view text) {
  return CanonicalEnum(kStatusNames, text);
}

std::optional<std::string_view> CanonicalBringupStatus(std::string_view text) {
  return CanonicalEnum(kBringupStatusNames, text);
}

void CheckField(std::string_view name, const Value& v, bool in_override,
                std::vector<ValueProblem>& problems) {
  const FieldSpec* spec = FindField(name);
  if (spec == nullptr) {
    problems.push_back({{}, util::StrCat("unknown field '", name, "'")});
    return;
  }
  auto type_error = [&](std::string_view expected) {
    problems.push_back({v.pos, util::StrCat(name, ": expected ", expected, ", got ", v.KindName(),
                                            " ", v.DebugString())});
  };
  switch (spec->type) {
    case FieldType::kNumber:
      if (!v.is_number()) type_error("a number");
      break;
    case FieldType::kFraction:
    case FieldType::kNonNegativeNumber: {
      if (!v.is_number()) {
        type_error("a number");
        break;
      }
      const double x = v.kind == Value::Kind::kInt ? static_cast<double>(v.integer) : v.number;
      const bool fraction = spec->type == FieldType::kFraction;
      // NaN fails both comparisons; infinity is no tolerance either.
      if (!(x >= 0) || !std::isfinite(x) || (fraction && !(x <= 1))) {
        problems.push_back({v.pos, util::StrCat(name, ": ", v.DebugString(),
                                                " is out of range (expected a number ",
                                                fraction ? "from 0 to 1" : ">= 0", ")")});
      }
      break;
    }
    case FieldType::kBool:
      if (v.kind != Value::Kind::kBool) type_error("true or false");
      break;
    case FieldType::kString:
      if (!v.is_string()) type_error("a string");
      break;
    case FieldType::kStatus:
      CheckEnum(name, kStatusNames, v, problems);
      break;
    case FieldType::kBringupStatus:
      CheckEnum(name, kBringupStatusNames, v, problems);
      break;
    case FieldType::kExecutionPass:
      CheckEnum(name, kExecutionPassNames, v, problems);
      break;
    case FieldType::kStringList:
      CheckStringList(name, v, /*archs=*/false, problems);
      break;
    case FieldType::kArchList:
      CheckStringList(name, v, /*archs=*/true, problems);
      break;
    case FieldType::kPositiveInt:
      if (v.kind != Value::Kind::kInt || v.integer <= 0) type_error("a positive integer");
      break;
    case FieldType::kOptimizationLevel:
      if (v.kind != Value::Kind::kInt || v.integer < 0 || v.integer > 2) type_error("0, 1 or 2");
      break;
    case FieldType::kArchOverrides:
      if (in_override) {
        problems.push_back({v.pos, "arch_overrides: not allowed inside arch_overrides"});
        break;
      }
      if (!v.is_map()) {
        type_error("a mapping of arch names to fields");
        break;
      }
      for (const MapItem& arch : v.map) {
        if (!IsKnownArch(arch.key)) {
          problems.push_back(
              {arch.key_pos, util::StrCat("arch_overrides: unknown arch '", arch.key,
                                          "' (known: ", util::StrJoin(kArchNames, ", "), ")")});
        }
        if (!arch.value.is_map()) {
          problems.push_back(
              {PosOr(arch.value, arch.key_pos),
               util::StrCat("arch_overrides.", arch.key, ": expected a mapping of fields, got ",
                            arch.value.KindName())});
          continue;
        }
        for (const MapItem& field : arch.value.map) {
          if (FindField(field.key) == nullptr) {
            problems.push_back({field.key_pos, util::StrCat("unknown field '", field.key,
                                                            "' in arch_overrides.", arch.key)});
            continue;
          }
          std::vector<ValueProblem> inner;
          CheckField(field.key, field.value, /*in_override=*/true, inner);
          for (auto& p : inner) {
            if (!p.pos.known()) p.pos = field.key_pos;
            p.message = util::StrCat("arch_overrides.", arch.key, ".", p.message);
            problems.push_back(std::move(p));
          }
        }
      }
      break;
  }
}

}  // namespace triage::inventory
