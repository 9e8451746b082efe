#include "common/command/guards.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "nlohmann/json.hpp"
#include "re2/re2.h"

#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::command {
namespace {

struct Added {
  int line = 0;      // in the new file
  std::string code;  // comment stripped, trimmed
};

struct Hunk {
  std::string path;
  std::vector<Added> added;
  std::vector<std::string> removed;  // comment stripped, trimmed
};

// The code of a Python (or configuration) line: from a '#' outside quotes on is a comment.
std::string Code(std::string_view line) {
  char quote = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote != 0) {
      if (c == '\\') {
        ++i;
      } else if (c == quote) {
        quote = 0;
      }
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#') {
      return std::string(util::TrimWhitespace(line.substr(0, i)));
    }
  }
  return std::string(util::TrimWhitespace(line));
}

// "@@ -a,b +c,d @@": b and d (1 when left out) and c.
bool HunkHeader(std::string_view line, int& old_n, int& new_start, int& new_n) {
  static const RE2 re(R"(^@@ -\d+(?:,(\d+))? \+(\d+)(?:,(\d+))? @@)");
  std::string b, c, d;
  if (!RE2::PartialMatch(line, re, &b, &c, &d)) return false;
  old_n = b.empty() ? 1 : std::atoi(b.c_str());
  new_start = std::atoi(c.c_str());
  new_n = d.empty() ? 1 : std::atoi(d.c_str());
  return true;
}

std::vector<Hunk> Hunks(std::string_view diff) {
  std::vector<Hunk> out;
  std::string path;
  std::vector<std::string_view> lines;
  for (std::size_t start = 0; start < diff.size();) {
    std::size_t end = diff.find('\n', start);
    if (end == std::string_view::npos) end = diff.size();
    lines.push_back(diff.substr(start, end - start));
    start = end + 1;
  }
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string_view l = lines[i];
    if (l.starts_with("+++ ")) {
      std::string p(util::TrimWhitespace(l.substr(4)));
      if (auto tab = p.find('\t'); tab != std::string::npos) p.resize(tab);
      if (p.starts_with("b/")) p.erase(0, 2);
      path = p;
      continue;
    }
    int old_n = 0, new_line = 0, new_n = 0;
    if (!HunkHeader(l, old_n, new_line, new_n)) continue;
    Hunk h;
    h.path = path;
    while ((old_n > 0 || new_n > 0) && i + 1 < lines.size()) {
      const std::string_view body = lines[++i];
      const char kind = body.empty() ? ' ' : body[0];
      const std::string_view text = body.empty() ? body : body.substr(1);
      if (kind == '+') {
        if (std::string code = Code(text); !code.empty()) h.added.push_back({new_line, code});
        ++new_line;
        --new_n;
      } else if (kind == '-') {
        if (std::string code = Code(text); !code.empty()) h.removed.push_back(code);
        --old_n;
      } else if (kind == '\\') {
        continue;  // "\ No newline at end of file"
      } else {
        ++new_line;
        --old_n;
        --new_n;
      }
    }
    out.push_back(std::move(h));
  }
  return out;
}

bool Any(const std::string& code, std::initializer_list<const RE2*> res) {
  return std::any_of(res.begin(), res.end(),
                     [&](const RE2* re) { return RE2::PartialMatch(code, *re); });
}

// name -> the number a line sets it to ("max_length=128", "required_pcc: 0.95").
std::optional<double> Setting(const std::string& code, const RE2& re, std::string* name) {
  std::string n, v;
  if (!RE2::PartialMatch(code, re, &n, &v)) return std::nullopt;
  if (name != nullptr) *name = n;
  return std::atof(v.c_str());
}

}  // namespace

std::vector<Workaround> ScanFileDiff(std::string_view repo, std::string_view diff) {
  static const RE2 layer_count(
      R"(\b(?:num_hidden_layers|num_layers|n_layers?|num_(?:encoder|decoder)_layers|(?:encoder|decoder)_layers)\s*[=:]\s*\d+)");
  static const RE2 layer_slice(R"((?:\.|\b)(?:layers|blocks|block|layer|h)\[\s*:\s*-?\d+\s*\])");
  static const RE2 cpu_to(R"(\.to\(\s*["']cpu["'])");
  static const RE2 cpu_call(R"(\.cpu\(\s*\))");
  static const RE2 cpu_device(R"(\bdevice\s*=\s*(?:torch\.device\(\s*)?["']cpu["'])");
  static const RE2 device_map(R"(\bdevice_map\s*=)");
  static const RE2 length(
      R"(\b(max_length|max_new_tokens|seq_len|seq_length|sequence_length|max_seq_len|max_seq_length)\s*[=:]\s*(\d+))");
  static const RE2 last_dim_slice(R"(\[\s*(?:\.\.\.|:)\s*,\s*:\s*\d+\s*\])");
  static const RE2 truncation(R"(\btruncation\s*=\s*True\b)");
  static const RE2 modality(R"(\b(pixel_values|pixel_mask|images?|audio|video|input_features)\b)");
  static const RE2 pad_call(
      R"(\bF\.pad\(|functional\.pad\(|\b(?:Zero|Constant|Reflection)Pad\dd\()");
  static const RE2 pad_arg(
      R"(\bpad_to_multiple_of\b|\bpadding\s*=\s*["'](?:max_length|longest)["'])");
  static const RE2 except_bare(R"(^except\s*:)");
  static const RE2 except_broad(R"(^except\s*\(?\s*(?:Exception|BaseException)\b)");
  static const RE2 except_pass(R"(^except\b[^:]*:\s*(?:pass|\.\.\.)\s*$)");
  static const RE2 except_open(R"(^except\b[^:]*:\s*$)");
  static const RE2 suppress(R"(\bsuppress\(\s*\w)");
  static const RE2 warnings_ignore(
      R"(warnings\.(?:filterwarnings|simplefilter)\(\s*["']ignore|\blogging\.disable\(|warnings\.catch_warnings\(|-W\s*ignore|-p\s+no:warnings|\bignore::)");
  static const RE2 marker(R"(pytest\.mark\.(?:skip|skipif|xfail)\b|pytest\.(?:skip|xfail)\()");
  static const RE2 deselect(
      R"(--deselect\b|\bcollect_ignore\b|\bpytest_collection_modifyitems\b|-k\s+["']?not\b)");
  static const RE2 pcc(R"(\b(required_pcc)\s*[=:]\s*([0-9]*\.?[0-9]+))");
  static const RE2 pcc_off(R"(\bassert_pcc\s*[=:]\s*(?:False|false)\b)");

  std::vector<Workaround> out;
  for (const Hunk& h : Hunks(diff)) {
    const bool python = h.path.ends_with(".py");
    const bool config = python || h.path.ends_with("pytest.ini") || h.path.ends_with(".cfg") ||
                        h.path.ends_with(".toml") || h.path.ends_with("tox.ini");
    if (!config) continue;
    const std::set<std::string> removed(h.removed.begin(), h.removed.end());
    auto add = [&](const char* guard, int line, const std::string& what) {
      out.push_back({guard, util::StrCat(repo, "/", h.path, ":", line), what});
    };
    for (std::size_t k = 0; k < h.added.size(); ++k) {
      const Added& a = h.added[k];
      if (removed.count(a.code)) continue;  // moved, not new
      if (Any(a.code, {&marker})) add("marker_added", a.line, a.code);
      if (Any(a.code, {&deselect})) add("test_deselected", a.line, a.code);
      if (Any(a.code, {&warnings_ignore})) add("warning_suppressed", a.line, a.code);
      if (!python) continue;
      if (Any(a.code, {&layer_count, &layer_slice})) add("layers_trimmed", a.line, a.code);
      if (Any(a.code, {&cpu_to, &cpu_call, &cpu_device, &device_map})) {
        add("cpu_offload", a.line, a.code);
      }
      if (Any(a.code, {&pad_call, &pad_arg})) add("shape_padding", a.line, a.code);
      const bool passes_next =
          k + 1 < h.added.size() && (h.added[k + 1].code == "pass" || h.added[k + 1].code == "...");
      if (Any(a.code, {&except_bare, &except_broad, &except_pass, &suppress}) ||
          (passes_next && Any(a.code, {&except_open}))) {
        add("exception_suppressed", a.line, a.code);
      }
      if (Any(a.code, {&last_dim_slice})) add("inputs_shortened", a.line, a.code);
      if (Any(a.code, {&truncation}) &&
          std::none_of(h.removed.begin(), h.removed.end(),
                       [&](const std::string& r) { return RE2::PartialMatch(r, truncation); })) {
        add("inputs_shortened", a.line, a.code);
      }
      std::string name;
      if (auto v = Setting(a.code, length, &name)) {
        for (const auto& r : h.removed) {
          std::string was_name;
          auto was = Setting(r, length, &was_name);
          if (was && was_name == name && *v < *was) {
            add("inputs_shortened", a.line, a.code);
            break;
          }
        }
      }
      if (auto v = Setting(a.code, pcc, nullptr)) {
        std::optional<double> was;
        for (const auto& r : h.removed) {
          if (auto w = Setting(r, pcc, nullptr)) was = w;
        }
        if (*v < was.value_or(kDefaultRequiredPcc)) add("pcc_lowered", a.line, a.code);
      }
      if (Any(a.code, {&pcc_off})) add("pcc_disabled", a.line, a.code);
    }
    // An input the hunk no longer passes: in a removed line, in no added one.
    std::set<std::string> dropped;
    for (const auto& r : h.removed) {
      re2::StringPiece in(r);
      std::string word;
      while (RE2::FindAndConsume(&in, modality, &word)) dropped.insert(word);
    }
    for (const auto& a : h.added) {
      re2::StringPiece in(a.code);
      std::string word;
      while (RE2::FindAndConsume(&in, modality, &word)) dropped.erase(word);
    }
    if (python && !dropped.empty()) {
      const int line = h.added.empty() ? 0 : h.added.front().line;
      add("modality_dropped", line,
          util::StrCat("no longer passes ", util::StrJoin(dropped, ", ")));
    }
  }
  return out;
}

std::vector<Workaround> ScanEntryEdit(const v1::EntryEdit& edit, std::optional<double> before_pcc,
                                      std::optional<double> floor) {
  std::vector<Workaround> out;
  const std::string where =
      util::StrCat(edit.file(), ": ", edit.key(),
                   edit.arch().empty() ? "" : util::StrCat(" (arch_overrides.", edit.arch(), ")"));
  for (const auto& f : edit.set()) {
    const v1::YamlValue& v = f.value();
    if (f.name() == "required_pcc") {
      std::optional<double> now;
      if (v.has_float_value()) now = v.float_value();
      if (v.has_int_value()) now = static_cast<double>(v.int_value());
      if (v.has_string_value()) {
        char* end = nullptr;
        const double parsed = std::strtod(v.string_value().c_str(), &end);
        if (end != v.string_value().c_str()) now = parsed;
      }
      const double was = before_pcc.value_or(kDefaultRequiredPcc);
      if (!now || *now >= was) continue;
      if (floor && *now >= *floor - kFloorMargin) continue;  // justified by the measured floor
      out.push_back(
          {"pcc_lowered", where,
           util::StrCat("required_pcc ", util::StrCat(was), " -> ", util::StrCat(*now),
                        floor ? util::StrCat(" (below the farm's measured CPU bfloat16 floor ",
                                             util::StrCat(*floor), ")")
                              : std::string(" (no measured PCC floor)"))});
    } else if (f.name() == "assert_pcc") {
      const bool off =
          (v.has_bool_value() && !v.bool_value()) ||
          (v.has_string_value() && (v.string_value() == "false" || v.string_value() == "False"));
      if (off) out.push_back({"pcc_disabled", where, "assert_pcc false"});
    }
  }
  return out;
}

std::map<std::pair<std::string, std::string>, double> PccFloors(const v1::ShardResult& result) {
  std::map<std::pair<std::string, std::string>, double> out;
  for (const auto& ev : result.evidence()) {
    if (ev.kind() != kPccFloorEvidence) continue;
    const auto j = nlohmann::json::parse(ev.content(), nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("floors") || !j["floors"].is_array()) continue;
    for (const auto& f : j["floors"]) {
      if (!f.is_object() || !f.contains("pcc") || !f["pcc"].is_number()) continue;
      if (!f.contains("file") || !f["file"].is_string()) continue;
      if (!f.contains("key") || !f["key"].is_string()) continue;
      out[{f["file"].get<std::string>(), f["key"].get<std::string>()}] = f["pcc"].get<double>();
    }
  }
  return out;
}

std::string Describe(const Workaround& w) {
  return util::StrCat("workaround ", w.guard, ": ", w.where, ": ", w.what);
}

}  // namespace triage::command
