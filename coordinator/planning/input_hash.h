#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/git/git.h"
#include "triage/v1/types.pb.h"

namespace triage::coord {

// What an entry's result depends on besides its own YAML text, read once per sweep from its
// pinned commits (docs/farm.md, "Incremental sweeps").
struct InputTrees {
  // Object ids of tt_forge_models' directories at the forge commit, keyed by their path
  // relative to the tt-xla root ("third_party/tt_forge_models/bert/pytorch").
  std::map<std::string, std::string> forge_dirs;
  // SHA-256 (hex) over the inputs every entry shares: kSharedTtxlaInputs at the tt-xla commit
  // (tests/runner without its test-config YAML) and, in tt_forge_models, the files at its root
  // (training_utils.py with the registry, base.py, config.py, ...) and its tools/ tree.
  std::string shared;
  // What went into `shared`, one "<path> <object id>" line each (absent paths are left out):
  // for `sweep show` and for tests.
  std::vector<std::string> shared_lines;
};

// The tt-xla paths whose content decides how a test runs besides its entry and its loader: the
// runner (minus test_config/, hashed per entry), its helpers and pytest's configuration, and the
// compiler pin. A change below any of them re-runs every entry.
inline constexpr std::string_view kSharedTtxlaInputs[] = {
    "tests/runner", "tests/infra",    "tests/conftest.py",         "conftest.py",
    "pytest.ini",   "pyproject.toml", "third_party/CMakeLists.txt"};

// The shared part of the hash and the forge directory ids, from both repositories' object ids
// (Git::ObjectIds of the pinned commits).
InputTrees InputTreesFrom(const std::map<std::string, git::Git::TreeObject>& ttxla,
                          const std::map<std::string, git::Git::TreeObject>& forge);
// The same, read through git.
absl::StatusOr<InputTrees> ReadInputTrees(const git::Git& ttxla, std::string_view ttxla_commit,
                                          const git::Git& forge, std::string_view forge_commit);

// What an entry's hash covers besides the trees (docs/farm.md, "Incremental sweeps").
struct EntryInputs {
  std::string_view entry_yaml;  // the entry's lines in its file, as committed
  std::string_view loader;      // loader path relative to the tt-xla root ("" = unknown)
  std::string_view playbook;
  std::string_view playbook_version;
  std::string_view executor;
  const std::map<std::string, std::string>* params = nullptr;
  const std::vector<std::string>* archs = nullptr;  // where its shards verify, in order
};

// The hex SHA-256 an incremental sweep compares: the entry as its shard carries it (key, file,
// reason, status, captures, ...), its YAML text, its loader directory's tree id, the shared
// inputs, the playbook and its version, the executor with its parameters, and the archs.
std::string EntryInputHash(const InputTrees& trees, const v1::ShardEntry& entry,
                           const EntryInputs& inputs);

// Hex SHA-256 of bytes.
std::string Sha256Hex(std::string_view bytes);

}  // namespace triage::coord
