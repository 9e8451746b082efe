// The probe's output tree as candidates: its top-level members and every tensor under them
// (loss_internal.h).

#include <algorithm>
#include <cctype>

#include "agent/playbooks/unpack_forward_output/loss_internal.h"
#include "common/util/strings.h"

namespace triage::playbooks::loss_internal {

// Members read without throwing: absent or of another type reads as null / "".
const json& Member(const json& obj, const char* name) {
  static const json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(name);
  return it != obj.end() ? *it : kNull;
}

std::string Str(const json& obj, const char* name) {
  const json& m = Member(obj, name);
  return m.is_string() ? m.get<std::string>() : "";
}

bool IsTensor(const json& n) { return Str(n, "type") == "tensor"; }

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool Has(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

bool IsIdentifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::vector<std::int64_t> DimsOf(const json& n) {
  std::vector<std::int64_t> dims;
  const json& s = Member(n, "shape");
  if (!s.is_array()) return dims;
  for (const auto& d : s) dims.push_back(d.is_number_integer() ? d.get<std::int64_t>() : -1);
  return dims;
}

std::string ShapeText(const std::vector<std::int64_t>& dims) {
  return util::StrCat("(", util::StrJoin(dims, ", "), ")");
}

// Names of outputs no training loss reads: attention weights, per-layer hidden states, caches,
// auxiliary heads and their outputs, intermediate and encoder-side states, anchors and reference
// points, losses the model computed itself, nested sub-model outputs.
bool IsAuxName(std::string_view raw) {
  const std::string n = Lower(raw);
  if (n == "aux" || n.starts_with("aux_") || n.starts_with("auxiliary") || Has(n, "_aux")) {
    return true;
  }
  for (std::string_view s :
       {"attention", "hidden_states", "past_key_values", "cache", "loss", "intermediate", "debug",
        "anchor", "reference_points", "model_output"}) {
    if (Has(n, s)) return true;
  }
  if (n == "mems" || n.starts_with("encoder_") || n.starts_with("enc_")) return true;
  // A sub-module's final state (pixel_decoder_last_hidden_state, ...), not the model's own.
  return n != "last_hidden_state" && n.ends_with("last_hidden_state");
}

// Features rather than predictions.
bool IsHiddenName(std::string_view raw) {
  const std::string n = Lower(raw);
  return Has(n, "hidden_state") || Has(n, "embed") || Has(n, "feature") || Has(n, "pooled") ||
         n == "pooler_output";
}

// Names a model's prediction usually has.
bool IsHeadName(std::string_view raw) {
  const std::string n = Lower(raw);
  if (Has(n, "logits") || n.starts_with("pred")) return true;
  for (std::string_view s : {"out", "output", "outputs", "scores", "sample", "reconstruction",
                             "spectrogram", "waveform"}) {
    if (n == s) return true;
  }
  return false;
}

std::string Suffix(const std::string& container_kind, const std::string& key, std::size_t index) {
  if (container_kind == "object") return util::StrCat(".", key);
  if (container_kind == "dict") {
    return util::StrCat("[", json(key).dump(-1, ' ', false, json::error_handler_t::replace), "]");
  }
  return util::StrCat("[", index, "]");
}

void Walk(const json& node, const std::string& expr, const std::string& name,
          const std::string& last, bool aux, int depth, std::size_t member, const std::string& key,
          Output& out) {
  if (out.leaves.size() >= kMaxLeaves) return;
  if (IsTensor(node)) {
    out.leaves.push_back({expr, name, key, last, member, depth, aux, DimsOf(node)});
    out.members[member].leaves.push_back(out.leaves.size() - 1);
    return;
  }
  if (depth >= kMaxDepth) return;
  const std::string type = Str(node, "type");
  auto child = [&](const json& n, const std::string& k, std::size_t i, bool is_attr) {
    const std::string suffix = Suffix(type, k, i);
    const bool expressible = !expr.empty() && (!is_attr || IsIdentifier(k));
    const std::string child_name =
        name.empty() && suffix.starts_with(".") ? suffix.substr(1) : name + suffix;
    const bool named = is_attr || type == "dict";
    Walk(n, expressible ? expr + suffix : "", child_name, named ? k : last,
         aux || (named && IsAuxName(k)), depth + 1, member, key, out);
  };
  if (type == "object" || type == "dict") {
    const json& items = Member(node, type == "object" ? "attrs" : "items");
    if (!items.is_object()) return;
    for (auto it = items.begin(); it != items.end(); ++it) {
      child(it.value(), it.key(), 0, type == "object");
    }
  } else if (type == "list" || type == "tuple") {
    const json& items = Member(node, "items");
    if (!items.is_array()) return;
    for (std::size_t i = 0; i < items.size(); ++i) child(items[i], "", i, false);
  }
}

Output Collect(const json& tree) {
  Output out;
  out.kind = Str(tree, "type");
  if (out.kind == "tensor") {
    out.members.push_back({"", "", "forward_output", &tree, false, {}});
    out.leaves.push_back({"forward_output", "", "", "", 0, 0, false, DimsOf(tree)});
    out.members[0].leaves.push_back(0);
    return out;
  }
  auto add = [&](const json& node, const std::string& key, std::size_t index) {
    const std::string suffix = Suffix(out.kind, key, index);
    TopMember m;
    m.name = suffix.starts_with(".") ? suffix.substr(1) : suffix;
    m.key = key;
    const bool expressible = out.kind != "object" || IsIdentifier(key);
    m.expr = expressible ? "forward_output" + suffix : "";
    m.node = &node;
    m.aux = !key.empty() && IsAuxName(key);
    out.members.push_back(std::move(m));
    const TopMember& added = out.members.back();
    const std::size_t member = out.members.size() - 1;
    if (IsTensor(node)) {
      if (out.leaves.size() >= kMaxLeaves) return;
      out.leaves.push_back({added.expr, added.name, key, key, member, 0, added.aux, DimsOf(node)});
      out.members[member].leaves.push_back(out.leaves.size() - 1);
    } else {
      Walk(node, added.expr, added.name, key, added.aux, 0, member, key, out);
    }
  };
  if (out.Named()) {
    const json& items = Member(tree, out.kind == "object" ? "attrs" : "items");
    if (items.is_object()) {
      for (auto it = items.begin(); it != items.end(); ++it) add(it.value(), it.key(), 0);
    }
  } else if (out.Sequence()) {
    const json& items = Member(tree, "items");
    if (items.is_array()) {
      for (std::size_t i = 0; i < items.size(); ++i) add(items[i], "", i);
    }
  }
  return out;
}

// The top-level tensor named key (not auxiliary, expressible), or null.
const Leaf* TopTensor(const Output& o, std::string_view key) {
  for (const auto& l : o.leaves) {
    if (l.depth == 0 && !l.aux && !l.expr.empty() && l.key == key) return &l;
  }
  return nullptr;
}

std::size_t IndexOf(const Output& o, const Leaf* l) {
  return static_cast<std::size_t>(l - o.leaves.data());
}

}  // namespace triage::playbooks::loss_internal
