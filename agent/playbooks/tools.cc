#include "agent/playbooks/tools.h"

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

}  // namespace triage::playbooks
