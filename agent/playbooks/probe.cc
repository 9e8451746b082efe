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

std::int64_t Int(const nlohmann::json& obj, const char* name) {
  const nlohmann::json& v = Member(obj, name);
  return v.is_number_integer() ? v.get<std::int64_t>() : 0;
}

std::vector<ProbeDoc::Param> ParamsOf(const nlohmann::json& list) {
  std::vector<ProbeDoc::Param> out;
  if (!list.is_array()) return out;
  for (const auto& p : list) {
    ProbeDoc::Param param;
    param.name = Str(p, "name");
    param.kind = Str(p, "kind", "positional");
    param.has_default = Bool(p, "has_default");
    param.default_repr = Str(p, "default");
    if (!param.name.empty()) out.push_back(std::move(param));
  }
  return out;
}

// Reads the members of the inputs mode (docs/probe.md); absent members leave the defaults.
void ParseInputsMode(const nlohmann::json& j, ProbeDoc& d) {
  d.variant_member = Str(j, "variant_member");
  d.container = Str(j, "container");
  if (const auto& f = Member(j, "forward"); f.is_object()) {
    ProbeDoc::Forward fwd;
    fwd.model_class = Str(f, "class");
    fwd.model_module = Str(f, "module");
    fwd.qualname = Str(f, "qualname");
    fwd.file = Str(f, "file");
    fwd.in_loader_dir = Bool(f, "in_loader_dir");
    fwd.params = ParamsOf(Member(f, "params"));
    d.forward = std::move(fwd);
  }
  if (const auto& li = Member(j, "load_inputs"); li.is_object()) {
    d.load_inputs_params = ParamsOf(Member(li, "params"));
    if (const auto& passed = Member(li, "passed"); passed.is_array()) {
      for (const auto& p : passed) {
        if (p.is_string()) d.load_inputs_passed.push_back(p.get<std::string>());
      }
    }
  }
  if (const auto& b = Member(j, "binding"); b.is_object()) {
    d.has_binding = true;
    d.binding_ok = Bool(b, "ok");
    d.binding_error = Str(b, "error");
    if (const auto& pairs = Member(b, "params"); pairs.is_array()) {
      for (const auto& p : pairs) {
        std::string input = Str(p, "input"), param = Str(p, "param");
        if (!input.empty() && !param.empty()) d.binding.emplace_back(input, param);
      }
    }
  }
  if (const auto& c = Member(j, "config"); c.is_object()) {
    ProbeDoc::Config config;
    if (const auto& v = Member(c, "is_encoder_decoder"); v.is_boolean()) {
      config.is_encoder_decoder = v.get<bool>();
    }
    if (const auto& v = Member(c, "decoder_start_token_id"); v.is_number_integer()) {
      config.decoder_start_token_id = v.get<std::int64_t>();
    }
    if (const auto& v = Member(c, "pad_token_id"); v.is_number_integer()) {
      config.pad_token_id = v.get<std::int64_t>();
    }
    d.config = config;
  }
  if (const auto& reqs = Member(j, "requirements"); reqs.is_array()) {
    for (const auto& r : reqs) {
      ProbeDoc::Requirements req;
      req.file = Str(r, "file");
      if (const auto& pk = Member(r, "packages"); pk.is_array()) {
        for (const auto& p : pk) {
          if (p.is_string()) req.packages.push_back(p.get<std::string>());
        }
      }
      if (!req.file.empty()) d.requirements.push_back(std::move(req));
    }
  }
}

}  // namespace

std::vector<std::string> ProbePhases(std::string_view mode) {
  if (mode == "structure") return {"structure"};
  if (mode == "dtype") return {"bfloat16", "float32"};
  if (mode == "inputs") return {"train", "eval"};
  if (mode == "floor") return {"floor"};
  return {};
}

bool ProbeDoc::Forward::Has(std::string_view name) const {
  for (const auto& p : params) {
    if (p.name == name) return true;
  }
  return false;
}

int ProbeDoc::Forward::PositionOf(std::string_view name) const {
  int pos = 0;
  for (const auto& p : params) {
    if (p.kind != "positional") return -1;
    if (p.name == name) return pos;
    ++pos;
  }
  return -1;
}

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
    e.module = Str(error, "module");
    if (const auto& site = Member(error, "site"); site.is_object()) {
      e.site_file = Str(site, "file");
      e.site_function = Str(site, "function");
      const std::int64_t line = Int(site, "line");
      e.site_line =
          line > 0 && line <= std::numeric_limits<int>::max() ? static_cast<int>(line) : 0;
      e.site_in_loader_dir = Bool(site, "in_loader_dir");
    }
    d.error = e;
  }
  if (const auto& inputs = Member(j, "inputs"); inputs.is_array()) {
    for (const auto& in : inputs) {
      ProbeDoc::Input i;
      i.name = Str(in, "name");
      i.dtype = Str(in, "dtype");
      i.kind = Str(in, "kind");
      if (const auto& shape = Member(in, "shape"); shape.is_array()) {
        for (const auto& dim : shape) {
          if (dim.is_number_integer()) i.shape.push_back(dim.get<std::int64_t>());
        }
      }
      i.tree = Member(in, "tree");
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
  ParseInputsMode(j, d);
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
