#include "coordinator/merge/report_text.h"

#include "nlohmann/json.hpp"

namespace triage::merge {
namespace report_text {

using nlohmann::json;

std::string Str(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return "";
  return j[key].get<std::string>();
}

std::string Short(std::string s, std::size_t n) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  if (s.size() > n) s = s.substr(0, n) + "...";
  return s;
}

std::string Code(std::string s) {
  for (char& c : s) {
    if (c == '`') c = '\'';
  }
  return "`" + s + "`";
}

std::string EvidenceLink(const json& e, const std::string& evidence_url) {
  if (!e.contains("evidence") || !e["evidence"].is_array()) return "";
  std::string first;
  for (const auto& f : e["evidence"]) {
    const std::string path = f.is_string() ? f.get<std::string>() : "";
    if (path.find("/junit/") != std::string::npos) {
      first = path;
      break;
    }
    if (first.empty()) first = path;
  }
  if (first.empty()) return "";
  if (evidence_url.empty()) return " (evidence: " + Code(first) + ")";
  std::string base = evidence_url;
  if (!base.ends_with("/")) base += "/";
  return " ([evidence](" + base + first + "))";
}

}  // namespace report_text

}  // namespace triage::merge
