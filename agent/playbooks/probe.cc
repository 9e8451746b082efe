#include "agent/playbooks/probe.h"

#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::playbooks {

std::string ProbeDoc::Error::Line() const {
  std::string_view first = message;
  if (auto nl = first.find('\n'); nl != std::string_view::npos) first = first.substr(0, nl);
  return util::StrCat(type, type.empty() ? "" : ": ", util::TrimWhitespace(first));
}

namespace {

// The string at j[name] when j is an object that has one, else "" (never throws).
std::string StringAt(const nlohmann::json& j, const char* name) {
  if (!j.is_object()) return "";
  auto it = j.find(name);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

absl::StatusOr<ProbeDoc> ParseProbeDocUnchecked(const nlohmann::json& j);

}  // namespace

// A document of the wrong shape is an error naming the member, never an exception: probe
// documents come from files (recorded evidence) as well as from the probe.
absl::StatusOr<ProbeDoc> ParseProbeDoc(const nlohmann::json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("probe document is not an object");
  for (const char* name : {"schema", "seq"}) {
    if (j.contains(name) && !j[name].is_number_integer()) {
      return absl::InvalidArgumentError(
          util::StrCat("probe document: '", name, "' must be an integer, got ", j[name].dump()));
    }
  }
  for (const char* name : {"key", "loader", "phase", "backward"}) {
    if (j.contains(name) && !j[name].is_string()) {
      return absl::InvalidArgumentError(
          util::StrCat("probe document: '", name, "' must be a string, got ", j[name].dump()));
    }
  }
  if (j.contains("ok") && !j["ok"].is_boolean()) {
    return absl::InvalidArgumentError(
        util::StrCat("probe document: 'ok' must be true or false, got ", j["ok"].dump()));
  }
  try {
    return ParseProbeDocUnchecked(j);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        util::StrCat("probe document '", StringAt(j, "key"), "': ", e.what()));
  }
}

namespace {

absl::StatusOr<ProbeDoc> ParseProbeDocUnchecked(const nlohmann::json& j) {
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
    e.type = StringAt(j["error"], "type");
    e.message = StringAt(j["error"], "message");
    e.traceback = StringAt(j["error"], "traceback");
    d.error = e;
  }
  if (j.contains("inputs") && j["inputs"].is_array()) {
    for (const auto& in : j["inputs"]) {
      ProbeDoc::Input i;
      i.name = StringAt(in, "name");
      i.dtype = StringAt(in, "dtype");
      i.kind = StringAt(in, "kind");
      d.inputs.push_back(std::move(i));
    }
  }
  if (j.contains("output") && j["output"].is_object()) {
    d.has_output = true;
    d.output_class = StringAt(j["output"], "class");
    d.output_module = StringAt(j["output"], "module");
    d.tree = j["output"].value("tree", nlohmann::json());
  }
  if (j.contains("unpacked") && j["unpacked"].is_object()) {
    d.has_unpacked = true;
    const auto& u = j["unpacked"];
    d.unpacked_ok = u.contains("ok") && u["ok"].is_boolean() && u["ok"].get<bool>();
    d.unpacked_kind = StringAt(u, "kind");
    d.unpacked_error = StringAt(u, "error");
  }
  d.backward = j.value("backward", "skipped");
  return d;
}

}  // namespace

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

namespace {

// node[name], or null when node has no such member (a const operator[] must not be used for a
// member that may be missing).
const nlohmann::json& Member(const nlohmann::json& node, const char* name) {
  static const nlohmann::json kNull;
  auto it = node.find(name);
  return it != node.end() ? *it : kNull;
}

std::string DescribeTreeUnchecked(const nlohmann::json& node, int depth);

}  // namespace

// A tree of the wrong shape (recorded evidence is read from files) is described as "?".
std::string DescribeTree(const nlohmann::json& node, int depth) {
  try {
    return DescribeTreeUnchecked(node, depth);
  } catch (const nlohmann::json::exception&) {
    return "?";
  }
}

namespace {

std::string DescribeTreeUnchecked(const nlohmann::json& node, int depth) {
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
    const auto& items = Member(node, "items");
    std::string s = util::StrCat(type, "[", items.size(), "]: [");
    for (std::size_t i = 0; i < items.size() && i < 8; ++i) {
      if (i) s += ", ";
      s += DescribeTreeUnchecked(items[i], depth + 1);
    }
    if (items.size() > 8) s += ", ...";
    return s + "]";
  }
  if (type == "dict" || type == "object") {
    const auto& items = Member(node, type == "dict" ? "items" : "attrs");
    std::string s = type == "dict" ? "dict{" : util::StrCat(node.value("class", "object"), "{");
    bool first = true;
    for (auto it = items.begin(); it != items.end(); ++it) {
      if (!first) s += ", ";
      first = false;
      s += util::StrCat(it.key(), ": ", DescribeTreeUnchecked(it.value(), depth + 1));
    }
    return s + "}";
  }
  return type;
}

}  // namespace

}  // namespace triage::playbooks
