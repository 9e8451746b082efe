#include "coordinator/triagectl/inventory_cmd.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "agent/playbooks/catalog.h"
#include "common/classify/classify.h"
#include "common/inventory/inventory.h"
#include "common/util/strings.h"
#include "nlohmann/json.hpp"

namespace triage::ctl {
namespace {

// One test entry as `inventory classify` shows it.
struct ClassifiedEntry {
  std::string file, key, status, bringup_status, reason, playbook, flavor, loader;
  bool matched;
};

// Every test entry of inv through rules (only the matched ones with matched_only), and how many
// entries each playbook handles (counting all of them).
std::vector<ClassifiedEntry> ClassifyEntries(const inventory::Inventory& inv,
                                             const classify::Classifier& rules, bool matched_only,
                                             std::map<std::string, int>& per_playbook) {
  std::vector<ClassifiedEntry> rows;
  for (const auto& ref : inv.TestEntries()) {
    auto c = rules.Classify(*ref.entry);
    ClassifiedEntry r;
    r.file = ref.document->path();
    r.key = ref.entry->key;
    r.status = std::string(ref.entry->Status());
    r.bringup_status = std::string(ref.entry->StringField("bringup_status"));
    r.reason = c.reason;
    r.matched = c.match.has_value();
    if (c.match) {
      r.playbook = c.match->playbook;
      r.flavor = c.match->flavor;
      per_playbook[r.playbook]++;
    }
    r.loader = ref.entry->loader;
    if (matched_only && !r.matched) continue;
    rows.push_back(std::move(r));
  }
  return rows;
}

void PrintClassifiedJson(std::ostream& out, const std::vector<ClassifiedEntry>& rows) {
  nlohmann::json a = nlohmann::json::array();
  for (const ClassifiedEntry& r : rows) {
    nlohmann::json o;
    o["file"] = r.file;
    o["key"] = r.key;
    o["status"] = r.status;
    o["bringup_status"] =
        r.bringup_status.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.bringup_status);
    o["reason"] = r.reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.reason);
    o["playbook"] = r.matched ? nlohmann::json(r.playbook) : nlohmann::json(nullptr);
    o["flavor"] = r.matched ? nlohmann::json(r.flavor) : nlohmann::json(nullptr);
    o["loader"] = r.loader;
    a.push_back(std::move(o));
  }
  out << a.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

void PrintClassifiedTable(std::ostream& out, const std::vector<ClassifiedEntry>& rows) {
  const char* header[] = {"FILE",     "KEY",    "STATUS", "BRINGUP_STATUS",
                          "PLAYBOOK", "FLAVOR", "REASON"};
  std::size_t w[6] = {4, 3, 6, 14, 8, 6};
  auto cells = [](const ClassifiedEntry& r) {
    return std::vector<std::string>{r.file,
                                    r.key,
                                    r.status,
                                    r.bringup_status,
                                    r.playbook.empty() ? "-" : r.playbook,
                                    r.flavor.empty() ? "-" : r.flavor,
                                    ClipCell(r.reason, 70)};
  };
  for (const ClassifiedEntry& r : rows) {
    auto c = cells(r);
    for (int i = 0; i < 6; ++i) w[i] = std::max(w[i], c[i].size());
  }
  auto print = [&](const std::vector<std::string>& c) {
    for (int i = 0; i < 6; ++i) out << c[i] << std::string(w[i] - c[i].size() + 2, ' ');
    out << c[6] << "\n";
  };
  print(std::vector<std::string>(std::begin(header), std::end(header)));
  for (const ClassifiedEntry& r : rows) print(cells(r));
}

// Placeholder entries (PLACEHOLDER_MODELS of test_config_placeholders.yaml: models planned but
// not yet tested, for tt-xla's dashboard) and the files that hold them.
std::pair<std::size_t, std::vector<std::string>> Placeholders(const inventory::Inventory& inv) {
  std::size_t n = 0;
  std::vector<std::string> files;
  for (const auto& doc : inv.documents) {
    if (!doc.is_placeholders()) continue;
    n += doc.entries().size();
    files.push_back(doc.path());
  }
  return {n, files};
}

// " (T test entries and P placeholders of FILE ...)" when there are placeholders, else "".
std::string PlaceholderNote(const inventory::Inventory& inv) {
  const auto [n, files] = Placeholders(inv);
  if (n == 0) return "";
  return util::StrCat(" (", inv.TestEntries().size(), " test entries and ", n, " placeholders of ",
                      util::StrJoin(files, ", "),
                      ": models planned but not yet tested, which classify and sweeps leave out)");
}

}  // namespace

absl::StatusOr<inventory::Inventory> LoadWorkTree(const InventoryOptions& options) {
  inventory::WorkTreeSource source(options.repo);
  inventory::LoadOptions load;
  load.max_file_bytes = options.max_file_bytes;
  return inventory::LoadInventory(source, load);
}

std::string ClipCell(std::string_view s, std::size_t n) {
  if (s.size() <= n) return std::string(s);
  std::size_t cut = n - 3;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return util::StrCat(s.substr(0, cut), "...");
}

int RunInventoryCheck(const InventoryOptions& options, std::ostream& out, std::ostream& err) {
  auto inv = LoadWorkTree(options);
  if (!inv.ok()) {
    err << "triagectl: " << inv.status().message() << "\n";
    return kExitUsage;
  }
  int errors = 0, warnings = 0;
  for (const auto& d : inv->diagnostics) {
    out << d.ToString() << "\n";
    (d.severity == util::Severity::kError ? errors : warnings)++;
  }
  std::size_t entries = 0;
  for (const auto& doc : inv->documents) entries += doc.entries().size();
  err << inv->documents.size() << " files, " << entries << " entries" << PlaceholderNote(*inv)
      << ": " << errors << " error(s), " << warnings << " warning(s)\n";
  return errors > 0 ? kExitProblems : kExitOk;
}

int RunInventoryClassify(const InventoryOptions& options, std::ostream& out, std::ostream& err) {
  if (options.output != "table" && options.output != "json") {
    err << "triagectl: -o must be table or json, got '" << options.output << "'\n";
    return kExitUsage;
  }
  const classify::Classifier* rules = &playbooks::DefaultClassifier();
  absl::StatusOr<classify::Classifier> custom = absl::UnknownError("unused");
  if (!options.rules.empty()) {
    custom = classify::Classifier::FromFile(options.rules);
    if (!custom.ok()) {
      err << "triagectl: " << custom.status().message() << "\n";
      return kExitUsage;
    }
    rules = &*custom;
  }
  auto inv = LoadWorkTree(options);
  if (!inv.ok()) {
    err << "triagectl: " << inv.status().message() << "\n";
    return kExitUsage;
  }
  if (!inv->ok()) {
    err << "warning: " << util::CountErrors(inv->diagnostics)
        << " validation error(s); run `triagectl inventory check --repo " << options.repo
        << "` (files with errors are never edited)\n";
  }
  std::map<std::string, int> per_playbook;
  const std::vector<ClassifiedEntry> rows =
      ClassifyEntries(*inv, *rules, options.matched_only, per_playbook);
  if (options.output == "json") {
    PrintClassifiedJson(out, rows);
  } else {
    PrintClassifiedTable(out, rows);
  }
  std::string summary;
  for (const auto& [pb, n] : per_playbook) util::StrAppend(&summary, ", ", pb, ": ", n);
  int matched = 0;
  for (const auto& [pb, n] : per_playbook) matched += n;
  const auto [placeholders, placeholder_files] = Placeholders(*inv);
  err << inv->TestEntries().size() << " entries";
  if (placeholders > 0) {
    err << " (" << placeholders << " placeholders of " << util::StrJoin(placeholder_files, ", ")
        << " left out: models planned but not yet tested)";
  }
  err << ", " << matched << " handled by a playbook" << summary << "\n";
  return kExitOk;
}

int RunInventoryRules(std::ostream& out) {
  out << playbooks::CatalogRulesYaml();
  return kExitOk;
}

}  // namespace triage::ctl
