#include "agent/playbooks/probe.h"

#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::playbooks {

std::string ProbeDoc::Error::Line() const {
  std::string_view first = message;
  if (auto nl = first.find('\n'); nl != std::string_view::npos) first = first.substr(0, nl);
  return util::StrCat(type, type.empty() ? "" : ": ", util::TrimWhitespace(first));
}

absl::StatusOr<ProbeDoc> ParseProbeDoc(const nlohmann::json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("probe document is not an object");
  if (j.value("schema", 0) != 1) {
    return absl::InvalidArgumentError(
        util::StrCat("probe schema ", j.value("schema", 0), " is not 1"));
  }
  ProbeDoc d;
  d.raw = j;
  d.key = j.value("key", "");
  d.loader = j.value("loader", "");
  d.phase = j.value("phase", "");
  d.ok = j.value("ok", false);
  d.seq = j.value("seq", 0);
  if (d.key.empty() || d.phase.empty()) {
    return absl::InvalidArgumentError("probe document without key or phase");
  }
  if (j.contains("error") && j["error"].is_object()) {
    ProbeDoc::Error e;
    e.type = j["error"].value("type", "");
    e.message = j["error"].value("message", "");
    e.traceback = j["error"].value("traceback", "");
    d.error = e;
  }
  if (j.contains("inputs") && j["inputs"].is_array()) {
    for (const auto& in : j["inputs"]) {
      ProbeDoc::Input i;
      i.name = in.value("name", "");
      i.dtype = in["dtype"].is_string() ? in["dtype"].get<std::string>() : "";
      i.kind = in.value("kind", "");
      d.inputs.push_back(std::move(i));
    }
  }
  if (j.contains("output") && j["output"].is_object()) {
    d.has_output = true;
    d.output_class = j["output"].value("class", "");
    d.output_module = j["output"].value("module", "");
    d.tree = j["output"].value("tree", nlohmann::json());
  }
  if (j.contains("unpacked") && j["unpacked"].is_object()) {
    d.has_unpacked = true;
    d.unpacked_ok = j["unpacked"].value("ok", false);
    d.unpacked_kind = j["unpacked"].value("kind", "");
    d.unpacked_error =
        j["unpacked"]["error"].is_string() ? j["unpacked"]["error"].get<std::string>() : "";
  }
  d.backward = j.value("backward", "skipped");
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
  const std::string type = node.value("type", "");
  auto shape = [](const nlohmann::json& n) {
    std::string s = "(";
    bool first = true;
    for (const auto& d : n.value("shape", nlohmann::json::array())) {
      if (!first) s += ", ";
      s += d.dump();
      first = false;
    }
    return s + ")";
  };
  if (type == "tensor") {
    return util::StrCat("Tensor", shape(node), " ", node.value("dtype", ""));
  }
  if (depth > 3) return type;
  if (type == "list" || type == "tuple") {
    const auto& items = node["items"];
    std::string s = util::StrCat(type, "[", items.size(), "]: [");
    for (std::size_t i = 0; i < items.size() && i < 8; ++i) {
      if (i) s += ", ";
      s += DescribeTree(items[i], depth + 1);
    }
    if (items.size() > 8) s += ", ...";
    return s + "]";
  }
  if (type == "dict" || type == "object") {
    const auto& items = type == "dict" ? node["items"] : node["attrs"];
    std::string s = type == "dict" ? "dict{" : util::StrCat(node.value("class", "object"), "{");
    bool first = true;
    for (auto it = items.begin(); it != items.end(); ++it) {
      if (!first) s += ", ";
      first = false;
      s += util::StrCat(it.key(), ": ", DescribeTree(it.value(), depth + 1));
    }
    return s + "}";
  }
  return type;
}

}  // namespace triage::playbooks
