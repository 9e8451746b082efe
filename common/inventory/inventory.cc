#include "common/inventory/inventory.h"

#include <algorithm>
#include <map>
#include <set>
#include <system_error>

#include "common/util/file.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::inventory {

namespace {

namespace fs = std::filesystem;

bool IsInside(const fs::path& root, const fs::path& path) {
  const fs::path rel = path.lexically_relative(root);
  return !rel.empty() && *rel.begin() != "..";
}

std::string_view TypeName(fs::file_type type) {
  switch (type) {
    case fs::file_type::fifo:
      return "a FIFO";
    case fs::file_type::socket:
      return "a socket";
    case fs::file_type::block:
      return "a block device";
    case fs::file_type::character:
      return "a character device";
    case fs::file_type::directory:
      return "a folder";
    default:
      return "of an unknown type";
  }
}

// Walks a folder without ever opening anything but folders: every entry's type comes from
// lstat (symlink_status), and a link is resolved and checked before it is followed.
class Walker {
 public:
  Walker(fs::path root, std::string_view suffix) : root_(std::move(root)), suffix_(suffix) {}

  absl::Status Walk(const fs::path& dir, const std::string& rel) {
    std::error_code ec;
    const fs::path canon = fs::canonical(dir, ec);
    if (ec)
      return absl::InternalError(util::StrCat("cannot read ", dir.string(), ": ", ec.message()));
    std::vector<fs::directory_entry> children;
    for (fs::directory_iterator it(dir, ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
      children.push_back(*it);
    }
    if (ec)
      return absl::InternalError(util::StrCat("cannot list ", dir.string(), ": ", ec.message()));
    std::sort(children.begin(), children.end());
    ancestors_.insert(canon);
    absl::Status status = WalkChildren(children, rel);
    ancestors_.erase(canon);
    return status;
  }

  std::vector<std::string> files;
  std::vector<std::pair<std::string, std::string>> refused;

 private:
  absl::Status WalkChildren(const std::vector<fs::directory_entry>& children,
                            const std::string& rel) {
    std::error_code ec;
    for (const fs::directory_entry& child : children) {
      const std::string name = child.path().filename().string();
      const std::string child_rel = util::StrCat(rel, "/", name);
      const bool wanted = std::string_view(name).ends_with(suffix_);
      const fs::file_status st = child.symlink_status(ec);
      if (ec) {
        refused.emplace_back(child_rel, util::StrCat("cannot stat: ", ec.message()));
        ec.clear();
        continue;
      }
      if (fs::is_symlink(st)) {
        if (auto s = Link(child.path(), child_rel, wanted); !s.ok()) return s;
      } else if (fs::is_directory(st)) {
        if (auto s = Walk(child.path(), child_rel); !s.ok()) return s;
      } else if (wanted && fs::is_regular_file(st)) {
        files.push_back(child_rel);
      } else if (wanted) {
        refused.emplace_back(
            child_rel, util::StrCat("is ", TypeName(st.type()), ", not a regular file; not read"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Link(const fs::path& path, const std::string& rel, bool wanted) {
    std::error_code ec;
    const std::string to = fs::read_symlink(path, ec).string();
    const fs::path target = fs::canonical(path, ec);
    if (ec) {
      // Where a file to read is expected; a dangling link named otherwise reads nothing.
      if (wanted) {
        refused.emplace_back(rel, util::StrCat("dangling symbolic link (to '", to, "'); not read"));
      }
      return absl::OkStatus();
    }
    const fs::file_status st = fs::status(target, ec);
    if (!wanted && !fs::is_directory(st)) return absl::OkStatus();
    if (!IsInside(root_, target)) {
      refused.emplace_back(
          rel, util::StrCat("symbolic link to '", to, "', outside the repository; not read"));
      return absl::OkStatus();
    }
    if (fs::is_directory(st)) {
      if (ancestors_.count(target)) {
        refused.emplace_back(rel, util::StrCat("symbolic link to '", to,
                                               "', a folder that holds it (a loop); not followed"));
        return absl::OkStatus();
      }
      return Walk(path, rel);
    }
    if (fs::is_regular_file(st)) {
      files.push_back(rel);
    } else {
      refused.emplace_back(
          rel, util::StrCat("symbolic link to '", to, "', which is ", TypeName(st.type()),
                            ", not a regular file; not read"));
    }
    return absl::OkStatus();
  }

  fs::path root_;
  std::string_view suffix_;
  std::set<fs::path> ancestors_;  // the folders being walked, resolved
};

// A warning about the runner from ReadKeyGrammar's "<path>:<line>: why" (or "<path>: why").
util::Diagnostic RunnerWarning(std::string_view message) {
  util::Diagnostic d{std::string(kRunnerPath), 0, 0, util::Severity::kWarning,
                     std::string(message)};
  std::string_view rest = message;
  if (rest.starts_with(kRunnerPath) && rest.size() > kRunnerPath.size() &&
      rest[kRunnerPath.size()] == ':') {
    rest.remove_prefix(kRunnerPath.size() + 1);
    int line = 0;
    std::size_t digits = 0;
    while (digits < rest.size() && digits < 9 && rest[digits] >= '0' && rest[digits] <= '9') {
      line = line * 10 + (rest[digits++] - '0');
    }
    if (digits > 0 && digits < rest.size() && rest[digits] == ':') {
      d.line = line;
      rest.remove_prefix(digits + 1);
    }
    d.message = std::string(util::TrimWhitespace(rest));
  }
  util::StrAppend(&d.message, "; keys are read with the built-in grammar (",
                  DefaultKeyGrammar().Pattern(), ")");
  return d;
}

// inv.grammar from the source's runner: the default when there is none, and when its grammar
// cannot be read (a warning). Fails only when the runner cannot be read for another reason.
absl::Status ReadGrammar(const FileSource& source, const LoadOptions& options, Inventory& inv) {
  inv.grammar = DefaultKeyGrammar();
  auto runner = source.Read(kRunnerPath, options.max_file_bytes);
  if (absl::IsNotFound(runner.status())) return absl::OkStatus();
  if (!runner.ok()) {
    if (!absl::IsFailedPrecondition(runner.status()) &&
        !absl::IsResourceExhausted(runner.status())) {
      return runner.status();
    }
    inv.diagnostics.push_back(RunnerWarning(
        util::StrCat(kRunnerPath, ": cannot read it: ", util::MessageOf(runner.status()))));
    return absl::OkStatus();
  }
  auto grammar = ReadKeyGrammar(*runner, kRunnerPath);
  if (!grammar.ok()) {
    inv.diagnostics.push_back(RunnerWarning(util::MessageOf(grammar.status())));
    return absl::OkStatus();
  }
  inv.grammar = std::move(*grammar);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Listing> WorkTreeSource::List(std::string_view dir, std::string_view suffix) const {
  const fs::path base = root_ / fs::path(std::string(dir));
  std::error_code ec;
  if (!fs::is_directory(base, ec)) {
    return absl::NotFoundError(
        util::StrCat("no ", dir, "/ under ", root_.string(), " (is this a tt-xla checkout?)"));
  }
  const fs::path root = fs::canonical(root_, ec);
  if (ec)
    return absl::InternalError(util::StrCat("cannot read ", root_.string(), ": ", ec.message()));
  Listing out;
  const fs::path canon = fs::canonical(base, ec);
  if (ec || !IsInside(root, canon)) {
    out.refused.emplace_back(std::string(dir), util::StrCat("resolves to '", canon.string(),
                                                            "', outside the repository; not read"));
    return out;
  }
  Walker walker(root, suffix);
  if (auto s = walker.Walk(base, std::string(dir)); !s.ok()) return s;
  out.files = std::move(walker.files);
  out.refused = std::move(walker.refused);
  std::sort(out.files.begin(), out.files.end());
  return out;
}

absl::StatusOr<std::string> WorkTreeSource::Read(std::string_view path,
                                                 std::size_t max_bytes) const {
  // Checked again when read: the tree may have changed since it was listed, and a FIFO must
  // never be opened (it would block).
  const fs::path full = root_ / fs::path(std::string(path));
  std::error_code ec;
  if (fs::symlink_status(full, ec).type() == fs::file_type::not_found) {
    return absl::NotFoundError(util::StrCat(path, " does not exist in ", root_.string()));
  }
  const fs::path root = fs::canonical(root_, ec);
  const fs::path target = ec ? fs::path() : fs::canonical(full, ec);
  if (ec || !IsInside(root, target)) {
    return absl::FailedPreconditionError("not inside the repository (any more); not read");
  }
  const fs::file_status st = fs::status(target, ec);
  if (!fs::is_regular_file(st)) {
    return absl::FailedPreconditionError(
        util::StrCat("is ", TypeName(st.type()), ", not a regular file; not read"));
  }
  return util::ReadFile(target, max_bytes);
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
  auto listing = source.List(kTestConfigDir, ".yaml");
  if (!listing.ok()) return listing.status();
  Inventory inv;
  if (auto s = ReadGrammar(source, options, inv); !s.ok()) return s;
  for (auto& [path, why] : listing->refused) {
    inv.diagnostics.push_back({path, 0, 0, util::Severity::kError, std::move(why)});
  }
  inv.documents.reserve(listing->files.size());
  for (const std::string& path : listing->files) {
    auto bytes = source.Read(path, options.max_file_bytes);
    if (!bytes.ok()) {
      // A listed file gone since (NotFound) or no longer a regular file inside the repository.
      if (absl::IsFailedPrecondition(bytes.status()) || absl::IsNotFound(bytes.status())) {
        inv.diagnostics.push_back(
            {path, 0, 0, util::Severity::kError, std::string(bytes.status().message())});
        continue;
      }
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
    parse.grammar = &inv.grammar;
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
                        " (tt-xla would silently use the later file)"),
           e.key});
    }
  }
  util::SortDiagnostics(inv.diagnostics);
  return inv;
}

}  // namespace triage::inventory
