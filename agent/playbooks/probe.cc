#include "agent/playbooks/probe.h"

#include <cstdint>
#include <limits>

#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::playbooks {
namespace {

// Members read without throwing and without the undefined lookup of a missing key through a
// const json: a member that is absent or of another type reads as the default.
std::string Str(const nlohmann::json& obj, const char* name, std::string fallback = "") {
  if (!obj.is_object()) return fallback;
  auto it = obj.find(name);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : fallback;
}

bool Bool(const nlohmann::json& obj, const char* name) {
  if (!obj.is_object()) return false;
  auto it = obj.find(name);
  return it != obj.end() && it->is_boolean() && it->get<bool>();
}

const nlohmann::json& Member(const nlohmann::json& obj, const char* name) {
  static const nlohmann::json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(name);
  return it != obj.end() ? *it : kNull;
}

}  // namespace

std::string ProbeDoc::Error::Line() const {
  std::string_view first = message;
  if (auto nl = first.find('\n'); nl != std::string_view::npos) first = first.substr(0, nl);
  return util::StrCat(type, type.empty() ? "" : ": ", util::TrimWhitespace(first));
}

absl::StatusOr<ProbeDoc> ParseProbeDoc(const nlohmann::json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("probe document is not an object");
  const nlohmann::json& schema = Member(j, "schema");
  if (!schema.is_number() || schema.get<double>() != 1) {
    return absl::InvalidArgumentError(
        util::StrCat("probe schema ", schema.is_null() ? "0" : schema.dump(), " is not 1"));
  }
  ProbeDoc d;
  d.raw = j;
  d.key = Str(j, "key");
  d.loader = Str(j, "loader");
  d.phase = Str(j, "phase");
  d.ok = Bool(j, "ok");
  const nlohmann::json& seq = Member(j, "seq");
  if (seq.is_number_integer() && seq.get<std::int64_t>() >= 0 &&
      seq.get<std::int64_t>() <= std::numeric_limits<int>::max()) {
    d.seq = seq.get<int>();
  }
  if (d.key.empty() || d.phase.empty()) {
    return absl::InvalidArgumentError("probe document without key or phase");
  }
  if (const auto& error = Member(j, "error"); error.is_object()) {
    ProbeDoc::Error e;
    e.type = Str(error, "type");
    e.message = Str(error, "message");
    e.traceback = Str(error, "traceback");
    d.error = e;
  }
  if (const auto& inputs = Member(j, "inputs"); inputs.is_array()) {
    for (const auto& in : inputs) {
      ProbeDoc::Input i;
      i.name = Str(in, "name");
      i.dtype = Str(in, "dtype");
      i.kind = Str(in, "kind");
      d.inputs.push_back(std::move(i));
    }
  }
  if (const auto& info = Member(j, "model_info"); info.is_object()) {
    d.model_info = ProbeDoc::ModelInfo{Str(info, "model"), Str(info, "variant"), Str(info, "task"),
                                       Str(info, "source")};
  }
  if (const auto& output = Member(j, "output"); output.is_object()) {
    d.has_output = true;
    d.output_class = Str(output, "class");
    d.output_module = Str(output, "module");
    d.tree = Member(output, "tree");
  }
  if (const auto& unpacked = Member(j, "unpacked"); unpacked.is_object()) {
    d.has_unpacked = true;
    d.unpacked_ok = Bool(unpacked, "ok");
    d.unpacked_kind = Str(unpacked, "kind");
    d.unpacked_error = Str(unpacked, "error");
  }
  d.backward = Str(j, "backward", "skipped");
  return d;
}

absl::StatusOr<std::vector<ProbeDoc>> ParseProbeOutput(const std::string& text) {
  std::vector<ProbeDoc> out;
  int n = 0;
  for (auto line : util::SplitLines(text)) {
    ++n;
    if (util::TrimWhitespace(line).empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      return absl::InvalidArgumentError(
          util::StrCat("probe output line ", n, " is not JSON: ", e.what()));
    }
    auto d = ParseProbeDoc(j);
    if (!d.ok()) return d.status();
    out.push_back(std::move(*d));
  }
  return out;
}

absl::StatusOr<std::vector<ProbeDoc>> ParseProbeFile(const std::string& text,
                                                     const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(util::StrCat(source, ": not JSON: ", e.what()));
  }
  std::vector<ProbeDoc> out;
  auto add = [&](const nlohmann::json& doc) -> absl::Status {
    auto d = ParseProbeDoc(doc);
    if (!d.ok())
      return absl::InvalidArgumentError(util::StrCat(source, ": ", d.status().message()));
    out.push_back(std::move(*d));
    return absl::OkStatus();
  };
  if (j.is_array()) {
    for (const auto& doc : j) {
      if (auto st = add(doc); !st.ok()) return st;
    }
  } else if (auto st = add(j); !st.ok()) {
    return st;
  }
  return out;
}

std::string DescribeTree(const nlohmann::json& node, int depth) {
  if (!node.is_object()) return "?";
  const std::string type = Str(node, "type");
  auto shape = [](const nlohmann::json& n) {
    std::string s = "(";
    bool first = true;
    const nlohmann::json& dims = Member(n, "shape");
    if (dims.is_array()) {
      for (const auto& d : dims) {
        if (!first) s += ", ";
        s += d.dump();
        first = false;
      }
    }
    return s + ")";
  };
  if (type == "tensor") {
    return util::StrCat("Tensor", shape(node), " ", Str(node, "dtype"));
  }
  if (depth > 3) return type;
  if (type == "list" || type == "tuple") {
    const auto& items = Member(node, "items");
    const std::size_t n = items.is_array() ? items.size() : 0;
    std::string s = util::StrCat(type, "[", n, "]: [");
    for (std::size_t i = 0; i < n && i < 8; ++i) {
      if (i) s += ", ";
      s += DescribeTree(items[i], depth + 1);
    }
    if (n > 8) s += ", ...";
    return s + "]";
  }
  if (type == "dict" || type == "object") {
    const auto& items = Member(node, type == "dict" ? "items" : "attrs");
    std::string s = type == "dict" ? "dict{" : util::StrCat(Str(node, "class", "object"), "{");
    bool first = true;
    if (items.is_object()) {
      for (auto it = items.begin(); it != items.end(); ++it) {
        if (!first) s += ", ";
        first = false;
        s += util::StrCat(it.key(), ": ", DescribeTree(it.value(), depth + 1));
      }
    }
    return s + "}";
  }
  return type;
}

}  // namespace triage::playbooks
