#include "coordinator/planning/input_hash.h"

#include <openssl/evp.h>

#include "common/util/strings.h"

namespace triage::coord {
namespace {

bool Below(std::string_view path, std::string_view dir) {
  return path.size() > dir.size() && path.starts_with(dir) && path[dir.size()] == '/';
}

constexpr std::string_view kTestConfig = "tests/runner/test_config";

// Each length-prefixed, so no two different inputs read the same.
void Field(std::string& out, std::string_view name, std::string_view value) {
  util::StrAppend(&out, name, " ", value.size(), ":", value, "\n");
}

}  // namespace

std::string Sha256Hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(size * 2);
  for (unsigned int i = 0; i < size; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 0xf]);
  }
  return hex;
}

InputTrees InputTreesFrom(const std::map<std::string, git::Git::TreeObject>& ttxla,
                          const std::map<std::string, git::Git::TreeObject>& forge) {
  InputTrees trees;
  const std::string forge_root(git::kForgeSubmodulePath);
  auto line = [&](std::string_view path, const git::Git::TreeObject& object) {
    trees.shared_lines.push_back(util::StrCat(path, " ", object.id));
  };
  // tt-xla: every object below a shared path, the test-config YAML aside (whose entries are
  // hashed one by one). A path is listed with its own id when it is a file.
  for (std::string_view shared : kSharedTtxlaInputs) {
    for (auto it = ttxla.lower_bound(std::string(shared)); it != ttxla.end(); ++it) {
      const std::string& path = it->first;
      if (path != shared && !Below(path, shared)) {
        if (path > shared && !path.starts_with(shared)) break;
        continue;
      }
      if (path == kTestConfig || Below(path, kTestConfig)) continue;
      // A directory's id covers its test-config folder: list what is below it instead.
      if (it->second.type == "tree" && (path == shared || Below(kTestConfig, path))) continue;
      line(path, it->second);
    }
  }
  for (const auto& [path, object] : forge) {
    if (path.empty()) continue;
    const bool at_root = path.find('/') == std::string::npos;
    if ((at_root && object.type != "tree") || path == "tools") {
      line(util::StrCat(forge_root, "/", path), object);
    }
    if (object.type == "tree") trees.forge_dirs[util::StrCat(forge_root, "/", path)] = object.id;
  }
  trees.shared = Sha256Hex(util::StrJoin(trees.shared_lines, "\n"));
  return trees;
}

absl::StatusOr<InputTrees> ReadInputTrees(const git::Git& ttxla, std::string_view ttxla_commit,
                                          const git::Git& forge, std::string_view forge_commit) {
  auto ttxla_ids = ttxla.ObjectIds(ttxla_commit);
  if (!ttxla_ids.ok()) return ttxla_ids.status();
  auto forge_ids = forge.ObjectIds(forge_commit);
  if (!forge_ids.ok()) return forge_ids.status();
  return InputTreesFrom(*ttxla_ids, *forge_ids);
}

std::string EntryInputHash(const InputTrees& trees, const v1::ShardEntry& entry,
                           const EntryInputs& inputs) {
  std::string text = "triage-farm entry inputs v1\n";
  Field(text, "file", entry.file());
  Field(text, "key", entry.key());
  Field(text, "yaml", inputs.entry_yaml);
  Field(text, "flavor", entry.flavor());
  Field(text, "reason", entry.reason());
  Field(text, "status", entry.status());
  Field(text, "bringup_status", entry.bringup_status());
  Field(text, "override_arch", entry.override_arch());
  for (const auto& c : entry.captures()) Field(text, "capture", c);
  const std::string loader_dir(inputs.loader.substr(0, inputs.loader.rfind('/') + 1));
  std::string dir = loader_dir.empty() ? "" : loader_dir.substr(0, loader_dir.size() - 1);
  auto tree = trees.forge_dirs.find(dir);
  Field(text, "loader", dir);
  Field(text, "loader_tree", tree == trees.forge_dirs.end() ? "absent" : tree->second);
  Field(text, "shared", trees.shared);
  Field(text, "playbook", inputs.playbook);
  Field(text, "playbook_version", inputs.playbook_version);
  Field(text, "executor", inputs.executor);
  if (inputs.params != nullptr) {
    for (const auto& [k, v] : *inputs.params) Field(text, "param", util::StrCat(k, "=", v));
  }
  if (inputs.archs != nullptr) {
    for (const auto& a : *inputs.archs) Field(text, "arch", a);
  }
  return Sha256Hex(text);
}

}  // namespace triage::coord
