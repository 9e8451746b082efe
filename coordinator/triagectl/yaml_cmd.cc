#include "coordinator/triagectl/yaml_cmd.h"

#include <iostream>
#include <sstream>

#include "common/diff/unified_diff.h"
#include "common/inventory/editor.h"
#include "common/inventory/inventory.h"
#include "common/inventory/key_grammar.h"
#include "common/util/file.h"
#include "common/util/strings.h"
#include "coordinator/triagectl/inventory_cmd.h"
#include "coordinator/triagectl/json_value.h"
#include "nlohmann/json.hpp"

namespace triage::ctl {

absl::StatusOr<std::vector<inventory::EntryEdit>> ParseEdits(const std::string& text,
                                                             const std::string& source) {
  // Members in the order written: a created entry's fields are written in the order of "set".
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // Syntax errors, and values the parser cannot hold (a number such as 1e400).
    return absl::InvalidArgumentError(util::StrCat(source, ": invalid JSON: ", e.what()));
  }
  if (!j.is_array()) {
    return absl::InvalidArgumentError(util::StrCat(source, ": expected a JSON array of edits"));
  }
  std::vector<inventory::EntryEdit> edits;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const auto& e = j[i];
    const std::string where = util::StrCat(source, ": [", i, "]");
    if (!e.is_object())
      return absl::InvalidArgumentError(util::StrCat(where, ": expected an object"));
    for (auto it = e.begin(); it != e.end(); ++it) {
      if (it.key() != "key" && it.key() != "arch" && it.key() != "set" && it.key() != "delete" &&
          it.key() != "comments" && it.key() != "create") {
        return absl::InvalidArgumentError(
            util::StrCat(where, ": unknown member '", it.key(),
                         "' (expected key, arch, set, delete, comments, create)"));
      }
    }
    inventory::EntryEdit edit;
    if (!e.contains("key") || !e["key"].is_string()) {
      return absl::InvalidArgumentError(util::StrCat(where, ".key: expected a string"));
    }
    edit.key = e["key"].get<std::string>();
    if (e.contains("arch") && !e["arch"].is_null()) {
      if (!e["arch"].is_string()) {
        return absl::InvalidArgumentError(util::StrCat(where, ".arch: expected a string or null"));
      }
      edit.arch = e["arch"].get<std::string>();
    }
    if (e.contains("set")) {
      if (!e["set"].is_object()) {
        return absl::InvalidArgumentError(util::StrCat(where, ".set: expected an object"));
      }
      for (auto it = e["set"].begin(); it != e["set"].end(); ++it) {
        auto v = ValueFromJson(it.value(), util::StrCat(where, ".set.", it.key()));
        if (!v.ok()) return v.status();
        edit.set.emplace_back(it.key(), std::move(*v));
      }
    }
    if (e.contains("delete")) {
      if (!e["delete"].is_array()) {
        return absl::InvalidArgumentError(
            util::StrCat(where, ".delete: expected a list of fields"));
      }
      for (const auto& f : e["delete"]) {
        if (!f.is_string()) {
          return absl::InvalidArgumentError(util::StrCat(where, ".delete: expected field names"));
        }
        edit.del.push_back(f.get<std::string>());
      }
    }
    if (e.contains("comments")) {
      if (!e["comments"].is_object()) {
        return absl::InvalidArgumentError(
            util::StrCat(where, ".comments: expected an object of field: text"));
      }
      for (auto it = e["comments"].begin(); it != e["comments"].end(); ++it) {
        if (!it.value().is_string()) {
          return absl::InvalidArgumentError(
              util::StrCat(where, ".comments.", it.key(), ": expected a string"));
        }
        edit.comments.emplace_back(it.key(), it.value().get<std::string>());
      }
    }
    if (e.contains("create")) {
      if (!e["create"].is_boolean()) {
        return absl::InvalidArgumentError(util::StrCat(where, ".create: expected true or false"));
      }
      edit.create = e["create"].get<bool>();
    }
    edits.push_back(std::move(edit));
  }
  return edits;
}

int RunYamlEdit(const YamlEditOptions& options, std::istream& in, std::ostream& out,
                std::ostream& err) {
  std::string edits_text;
  if (options.edits == "-") {
    std::stringstream ss;
    ss << in.rdbuf();
    edits_text = ss.str();
  } else {
    auto read = util::ReadFile(options.edits, 64 * 1024 * 1024);
    if (!read.ok()) {
      err << "triagectl: " << read.status().message() << "\n";
      return kExitUsage;
    }
    edits_text = std::move(*read);
  }
  const std::string edits_source = options.edits == "-" ? "<stdin>" : options.edits;
  absl::StatusOr<std::vector<inventory::EntryEdit>> edits = absl::UnknownError("unset");
  try {
    edits = ParseEdits(edits_text, edits_source);
  } catch (const std::exception& e) {
    // Whatever the JSON library throws past the checks above: still an error about this file.
    edits = absl::InvalidArgumentError(util::StrCat(edits_source, ": invalid edits: ", e.what()));
  }
  if (!edits.ok()) {
    err << "triagectl: " << edits.status().message() << "\n";
    return kExitProblems;
  }
  auto bytes = util::ReadFile(options.file, inventory::kDefaultMaxYamlBytes);
  if (!bytes.ok()) {
    err << "triagectl: " << bytes.status().message() << "\n";
    return kExitUsage;
  }
  const std::string original = *bytes;
  // A file inside a checkout is read with the key grammar of that checkout's runner.
  const std::string& file = options.file;
  const std::size_t dir = file.rfind(util::StrCat(inventory::kTestConfigDir, "/"));
  const inventory::KeyGrammar grammar =
      dir == std::string::npos || (dir > 0 && file[dir - 1] != '/')
          ? inventory::DefaultKeyGrammar()
          : inventory::GrammarOrDefault(
                util::ReadFile(util::StrCat(file.substr(0, dir), inventory::kRunnerPath),
                               inventory::kDefaultMaxYamlBytes));
  inventory::Document doc =
      inventory::Document::Parse(options.file, std::move(*bytes), {.grammar = &grammar});
  for (const auto& d : doc.diagnostics()) err << d.ToString() << "\n";
  auto edited = inventory::ApplyEdits(doc, *edits);
  if (!edited.ok()) {
    err << "triagectl: " << edited.status().message() << "\n";
    return kExitProblems;
  }
  if (options.diff) {
    out << diff::UnifiedDiff(options.file, original, *edited);
    return kExitOk;
  }
  if (*edited == original) {
    err << options.file << ": unchanged\n";
    return kExitOk;
  }
  if (auto st = util::WriteFileAtomic(options.file, *edited); !st.ok()) {
    err << "triagectl: " << st.message() << "\n";
    return kExitProblems;
  }
  err << options.file << ": " << edits->size() << " edit(s) applied\n";
  return kExitOk;
}

}  // namespace triage::ctl
