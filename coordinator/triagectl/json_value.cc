#include "coordinator/triagectl/json_value.h"

#include <cstdint>

#include "common/util/strings.h"
#include "nlohmann/json.hpp"

namespace triage::ctl {

using inventory::Value;

namespace {

template <typename Json>
absl::StatusOr<Value> FromJson(const Json& j, const std::string& where) {
  switch (j.type()) {
    case nlohmann::json::value_t::string:
      return Value::String(j.template get<std::string>());
    case nlohmann::json::value_t::boolean:
      return Value::Bool(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value::Int(j.template get<std::int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      if (j.template get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
        return absl::InvalidArgumentError(
            util::StrCat(where, ": integer ", j.template get<std::uint64_t>(),
                         " is out of range (at most ", INT64_MAX, ")"));
      }
      return Value::Int(j.template get<std::int64_t>());
    case nlohmann::json::value_t::number_float:
      return Value::Float(j.template get<double>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      for (std::size_t i = 0; i < j.size(); ++i) {
        if (j[i].is_array() || j[i].is_object()) {
          return absl::InvalidArgumentError(
              util::StrCat(where, "[", i, "]: nested lists and objects are not field values"));
        }
        auto v = FromJson(j[i], util::StrCat(where, "[", i, "]"));
        if (!v.ok()) return v.status();
        items.push_back(std::move(*v));
      }
      return Value::List(std::move(items));
    }
    default:
      return absl::InvalidArgumentError(
          util::StrCat(where, ": expected a string, boolean, number or list, got ", j.type_name(),
                       j.is_null() ? " (to remove a field, list it under \"delete\")" : ""));
  }
}

}  // namespace

absl::StatusOr<Value> ValueFromJson(const nlohmann::json& j, const std::string& where) {
  return FromJson(j, where);
}

absl::StatusOr<Value> ValueFromJson(const nlohmann::ordered_json& j, const std::string& where) {
  return FromJson(j, where);
}

nlohmann::json ValueToJson(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kNull:
      return nullptr;
    case Value::Kind::kBool:
      return v.boolean;
    case Value::Kind::kInt:
      return v.integer;
    case Value::Kind::kFloat:
      return v.number;
    case Value::Kind::kString:
      return v.string;
    case Value::Kind::kList: {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& item : v.list) a.push_back(ValueToJson(item));
      return a;
    }
    case Value::Kind::kMap: {
      nlohmann::json o = nlohmann::json::object();
      for (const auto& item : v.map) o[item.key] = ValueToJson(item.value);
      return o;
    }
  }
  return nullptr;
}

}  // namespace triage::ctl
