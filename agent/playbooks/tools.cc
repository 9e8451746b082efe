#include "agent/playbooks/tools.h"

#include "common/util/file.h"

namespace triage::playbooks {

std::string KeyFileName(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '/') {
      out += "__";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

void AttachEvidence(const PlaybookTools& tools, v1::ShardResult& result) {
  for (const auto& [name, path] : tools.Evidence()) {
    const bool log = std::string_view(name).starts_with("logs/");
    auto content = util::ReadFile(path, log ? (64 << 20) : (8 << 20));
    if (!content.ok()) continue;
    v1::Evidence* ev = result.add_evidence();
    ev->set_name(name);
    ev->set_kind(log ? "log" : std::string_view(name).starts_with("junit/") ? "junit" : "probe");
    // Logs can be long: keep their end, where the error is.
    if (log && content->size() > (256u << 10)) content->erase(0, content->size() - (256u << 10));
    ev->set_content(*content);
    for (auto& out : *result.mutable_entries()) {
      const std::string k = KeyFileName(out.key());
      if (name.find(k) != std::string::npos || name.find(out.key()) != std::string::npos ||
          std::string_view(name).starts_with("junit/")) {
        out.add_evidence(name);
      }
    }
  }
}

}  // namespace triage::playbooks
