#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "gtest/gtest.h"

namespace triage::testing {

// ../shared/data/tt-xla beside the project (real tt-xla YAML); empty path when absent.
std::filesystem::path SharedTtXlaDir();

// Skips the current test with a message that names the missing folder. Use as
//   TRIAGE_REQUIRE_SHARED_DATA(dir);
#define TRIAGE_REQUIRE_SHARED_DATA(dir)                                  \
  const std::filesystem::path dir = ::triage::testing::SharedTtXlaDir(); \
  if (dir.empty()) {                                                     \
    GTEST_SKIP() << "real tt-xla data not found at " TRIAGE_SHARED_DIR   \
                    "/data/tt-xla "                                      \
                    "(the shared folder must sit beside the project)";   \
  }

// A fresh directory under the test temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

std::string ReadFileOrDie(const std::filesystem::path& path);
void WriteFileOrDie(const std::filesystem::path& path, std::string_view contents);

// Runs argv (no shell) with cwd; returns the exit code and fills output (stdout+stderr).
int RunCommand(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
               std::string* output);

}  // namespace triage::testing
