#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "common/lift/lift.h"

namespace triage::testing {

// Pinned files held in memory, by path relative to each repository's root (lift and merge tests).
class MemoryPinnedFiles : public lift::PinnedFiles {
 public:
  std::map<std::string, std::string> ttxla;
  std::map<std::string, std::string> forge;

  absl::StatusOr<std::string> ReadTtXla(const std::string& path) override {
    return Find(ttxla, path);
  }
  absl::StatusOr<std::string> ReadForge(const std::string& path) override {
    return Find(forge, path);
  }

 private:
  static absl::StatusOr<std::string> Find(const std::map<std::string, std::string>& files,
                                          const std::string& path) {
    auto it = files.find(path);
    if (it == files.end()) return absl::NotFoundError("no " + path);
    return it->second;
  }
};

}  // namespace triage::testing
