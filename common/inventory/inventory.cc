#include "common/inventory/inventory.h"

#include <algorithm>
#include <map>
#include <system_error>

#include "common/util/file.h"
#include "common/util/strings.h"

namespace triage::inventory {

absl::StatusOr<std::vector<std::string>> WorkTreeSource::List(std::string_view dir,
                                                              std::string_view suffix) const {
  const std::filesystem::path base = root_ / std::filesystem::path(std::string(dir));
  std::error_code ec;
  if (!std::filesystem::is_directory(base, ec)) {
    return absl::NotFoundError(
        util::StrCat("no ", dir, "/ under ", root_.string(), " (is this a tt-xla checkout?)"));
  }
  std::vector<std::string> out;
  for (auto it = std::filesystem::recursive_directory_iterator(base, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    std::string rel = std::filesystem::relative(it->path(), root_, ec).generic_string();
    if (std::string_view(rel).ends_with(suffix)) out.push_back(std::move(rel));
  }
  if (ec)
    return absl::InternalError(util::StrCat("cannot list ", base.string(), ": ", ec.message()));
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<std::string> WorkTreeSource::Read(std::string_view path,
                                                 std::size_t max_bytes) const {
  return util::ReadFile(root_ / std::filesystem::path(std::string(path)), max_bytes);
}

std::vector<Inventory::EntryRef> Inventory::TestEntries() const {
  std::vector<EntryRef> out;
  for (const Document& doc : documents) {
    if (doc.is_placeholders()) continue;
    for (const Entry& e : doc.entries()) out.push_back({&doc, &e});
  }
  return out;
}

const Document* Inventory::FindDocument(std::string_view path) const {
  for (const Document& doc : documents) {
    if (doc.path() == path) return &doc;
  }
  return nullptr;
}

absl::StatusOr<Inventory> LoadInventory(const FileSource& source, const LoadOptions& options) {
  auto paths = source.List(kTestConfigDir, ".yaml");
  if (!paths.ok()) return paths.status();
  Inventory inv;
  inv.documents.reserve(paths->size());
  for (const std::string& path : *paths) {
    auto bytes = source.Read(path, options.max_file_bytes);
    if (!bytes.ok()) {
      if (absl::IsResourceExhausted(bytes.status())) {
        inv.diagnostics.push_back(
            {path, 0, 0, util::Severity::kError,
             util::StrCat("file is over the size limit of ", options.max_file_bytes, " bytes")});
        continue;
      }
      return bytes.status();
    }
    ParseOptions parse;
    parse.max_bytes = options.max_file_bytes;
    inv.documents.push_back(Document::Parse(path, std::move(*bytes), parse));
    const auto& d = inv.documents.back().diagnostics();
    inv.diagnostics.insert(inv.diagnostics.end(), d.begin(), d.end());
  }

  // A key defined in two files of one framework.
  std::map<std::pair<std::string, std::string>, std::pair<const Document*, const Entry*>> seen;
  for (const Document& doc : inv.documents) {
    if (doc.is_placeholders()) continue;
    for (const Entry& e : doc.entries()) {
      auto [it, inserted] =
          seen.emplace(std::make_pair(doc.framework(), e.key), std::make_pair(&doc, &e));
      if (inserted || it->second.first == &doc) continue;  // same-file duplicates: reported
      inv.diagnostics.push_back(
          {doc.path(), e.pos.line + 1, e.pos.col + 1, util::Severity::kError,
           util::StrCat("duplicate key '", e.key, "' also defined in ", it->second.first->path(),
                        ":", it->second.second->pos.line + 1,
                        " (tt-xla would silently use the later file)")});
    }
  }
  util::SortDiagnostics(inv.diagnostics);
  return inv;
}

}  // namespace triage::inventory
