#include "coordinator/triagectl/select_cmd.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string_view>

#include "CLI/CLI.hpp"
#include "agent/playbooks/catalog.h"
#include "common/inventory/inventory.h"
#include "common/util/file.h"
#include "common/util/strings.h"
#include "common/util/text.h"
#include "coordinator/planning/selection.h"
#include "nlohmann/json.hpp"

namespace triage::ctl {
namespace {

// Keys files of a few MiB hold every key tt-xla has many times over.
constexpr std::size_t kMaxKeysFileBytes = 16 << 20;

// KEY from a pytest node id `...::test_fn[KEY]`, else the line itself.
std::string_view KeyOfLine(std::string_view line) {
  if (line.find("::") != std::string_view::npos && line.ends_with(']')) {
    if (auto open = line.find('['); open != std::string_view::npos) {
      return line.substr(open + 1, line.size() - open - 2);
    }
  }
  return line;
}

absl::Status AddKeys(const std::string& value, v1::Selection& sel) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(value, ec)) {
    auto text = util::ReadFile(value, kMaxKeysFileBytes);
    if (!text.ok()) return text.status();
    int line_no = 0;
    for (std::string_view line : util::SplitLines(*text)) {
      ++line_no;
      line = util::TrimWhitespace(line);
      if (line.empty() || line.starts_with('#')) continue;
      const std::string_view key = util::TrimWhitespace(KeyOfLine(line));
      if (key.empty()) {
        return absl::InvalidArgumentError(
            util::StrCat("--keys ", value, ":", line_no, ": no key in '", line, "'"));
      }
      sel.add_keys(std::string(key));
    }
    return absl::OkStatus();
  }
  std::string_view rest = value;
  while (true) {
    const auto comma = rest.find(',');
    const std::string_view key = util::TrimWhitespace(rest.substr(0, comma));
    if (key.empty()) {
      return absl::InvalidArgumentError(util::StrCat(
          "--keys '", value, "': an empty key (give a file of keys, or keys separated by ',')"));
    }
    sel.add_keys(std::string(key));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return absl::OkStatus();
}

std::string Upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

// Rows of left-aligned columns, the last one unpadded.
void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  if (rows.empty()) return;
  std::vector<std::size_t> w(rows[0].size(), 0);
  for (const auto& r : rows) {
    for (std::size_t i = 0; i + 1 < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
  }
  for (const auto& r : rows) {
    for (std::size_t i = 0; i + 1 < r.size(); ++i) {
      out << r[i] << std::string(w[i] - r[i].size() + 2, ' ');
    }
    out << r.back() << "\n";
  }
}

void PrintJson(std::ostream& out, const coord::Selection& s) {
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& e : s.entries) {
    const v1::ShardEntry& se = e.shard_entry;
    entries.push_back(
        {{"file", se.file()},
         {"key", se.key()},
         {"status", se.status()},
         {"override_arch", se.override_arch()},
         {"reason", se.reason()},
         {"cluster", se.cluster().empty() ? nlohmann::json() : nlohmann::json(se.cluster())},
         {"playbook", e.playbook},
         {"loader", e.entry->loader}});
  }
  nlohmann::json clusters = nlohmann::json::array();
  for (const auto& c : s.clusters) {
    clusters.push_back({{"id", c.id},
                        {"signature", c.signature},
                        {"example", c.example},
                        {"matched", c.matched},
                        {"taken", c.taken}});
  }
  out << nlohmann::json{{"matched", s.matched},
                        {"selected", s.entries.size()},
                        {"without_reason", s.without_reason},
                        {"entries", entries},
                        {"clusters", clusters},
                        {"problems", s.problems}}
             .dump(2)
      << "\n";
}

}  // namespace

void AddSelectFlags(CLI::App* cmd, SelectFlags& flags) {
  cmd->add_flag("--failing", flags.failing,
                "Every KNOWN_FAILURE_XFAIL / NOT_SUPPORTED_SKIP entry on a target arch, with or "
                "without a reason, instead of the playbooks' classified entries (for "
                "--executor command)");
  cmd->add_option("--keys", flags.keys,
                  "Only these keys: a file of keys or pytest node ids (one per line), else a "
                  "comma-separated list (repeatable)");
  cmd->add_option("--status", flags.statuses,
                  "Only entries with this status on the target arch, e.g. KNOWN_FAILURE_XFAIL "
                  "(comma-separated)")
      ->delimiter(',');
  cmd->add_option("--file", flags.files,
                  "Only entries of this test-config file, relative to the tt-xla root "
                  "(comma-separated)")
      ->delimiter(',');
  cmd->add_option("--reason-regex", flags.reason_regex,
                  "Only entries whose reason (on the target arch) this RE2 pattern finds");
  cmd->add_option("--cluster", flags.clusters,
                  "Only entries of this failure cluster (c-xxxxxxxx, as `inventory select "
                  "--clusters` and report.json show them; comma-separated)")
      ->delimiter(',');
  cmd->add_option("--limit", flags.limit,
                  "At most N entries, those of the largest clusters first (0: all)")
      ->check(CLI::NonNegativeNumber);
}

void AddRemediationFlags(CLI::App* cmd, SelectFlags& flags) {
  cmd->add_option("--shared-path", flags.shared_paths,
                  "--failing: a path outside the loader directories the commands may change, as "
                  "tt-xla:<prefix> or tt_forge_models:<prefix> (a prefix ending in / is a "
                  "directory; repeatable; default: tt-xla:python_package/, "
                  "tt_forge_models:tools/, tt_forge_models:base.py, tt_forge_models:config.py; "
                  "'none': no shared scope)")
      ->needs("--failing");
  cmd->add_flag("--no-fan-out", flags.no_fan_out,
                "--failing: run every entry's command at once instead of one lead per failure "
                "cluster first, its fix then verified on the cluster's other entries")
      ->needs("--failing");
}

absl::StatusOr<v1::Selection> BuildSelection(const SelectFlags& flags) {
  v1::Selection sel;
  sel.set_failing(flags.failing);
  for (const std::string& k : flags.keys) {
    if (auto st = AddKeys(k, sel); !st.ok()) return st;
  }
  for (const std::string& s : flags.statuses) sel.add_statuses(Upper(s));
  for (const std::string& f : flags.files) sel.add_files(f);
  sel.set_reason_regex(flags.reason_regex);
  for (const std::string& c : flags.clusters) sel.add_clusters(c);
  sel.set_limit(flags.limit);
  for (const std::string& p : flags.shared_paths) sel.add_shared_paths(p);
  sel.set_no_fan_out(flags.no_fan_out);
  return sel;
}

int RunInventorySelect(const InventoryOptions& inventory, const SelectFlags& flags,
                       const SelectPreviewOptions& options, std::ostream& out, std::ostream& err) {
  if (inventory.output != "table" && inventory.output != "json") {
    err << "triagectl: -o must be table or json, got '" << inventory.output << "'\n";
    return kExitUsage;
  }
  auto sel = BuildSelection(flags);
  if (!sel.ok()) {
    err << "triagectl: " << sel.status().message() << "\n";
    return kExitUsage;
  }
  if (flags.failing && !options.playbooks.empty()) {
    err << "triagectl: --failing takes every failing entry: --playbooks does not apply\n";
    return kExitUsage;
  }
  auto selector = coord::Selector::Compile(*sel);
  if (!selector.ok()) {
    // The request's field names, as the flags that set them.
    std::string text(selector.status().message());
    for (auto [field, flag] :
         {std::pair{"selection.statuses", "--status"}, std::pair{"selection.clusters", "--cluster"},
          std::pair{"selection.reason_regex", "--reason-regex"},
          std::pair{"selection.keys", "--keys"}, std::pair{"selection.files", "--file"}}) {
      if (text.starts_with(field)) text.replace(0, std::string_view(field).size(), flag);
    }
    err << "triagectl: " << text << "\n";
    return kExitUsage;
  }
  auto inv = LoadWorkTree(inventory);
  if (!inv.ok()) {
    err << "triagectl: " << inv.status().message() << "\n";
    return kExitUsage;
  }
  coord::SelectOptions select;
  select.rules = &playbooks::DefaultClassifier();
  select.playbooks = options.playbooks;
  select.archs = options.archs.empty() ? std::vector<std::string>{"n150"} : options.archs;
  const coord::Selection s = coord::SelectEntries(*inv, *selector, select);

  if (inventory.output == "json") {
    PrintJson(out, s);
  } else if (options.clusters_only) {
    std::vector<std::vector<std::string>> rows = {{"CLUSTER", "ENTRIES", "TAKEN", "SIGNATURE"}};
    for (const auto& c : s.clusters) {
      rows.push_back(
          {c.id, std::to_string(c.matched), std::to_string(c.taken), ClipCell(c.signature, 100)});
    }
    PrintTable(out, rows);
  } else {
    std::vector<std::vector<std::string>> rows = {{"FILE", "KEY", "STATUS", "CLUSTER", "REASON"}};
    for (const auto& e : s.entries) {
      const v1::ShardEntry& se = e.shard_entry;
      std::string status = se.status();
      if (!se.override_arch().empty()) util::StrAppend(&status, " (", se.override_arch(), ")");
      rows.push_back({se.file(), se.key(), status, se.cluster().empty() ? "-" : se.cluster(),
                      ClipCell(se.reason(), 70)});
    }
    PrintTable(out, rows);
  }
  for (const std::string& p : s.problems) err << p << "\n";
  int largest = s.clusters.empty() ? 0 : s.clusters.front().matched;
  err << "selected " << s.entries.size() << " of " << s.matched << " matching "
      << (flags.failing ? "failing" : "classified") << " entries on "
      << util::StrJoin(select.archs, ",") << "; " << s.clusters.size() << " clusters"
      << (largest > 0 ? util::StrCat(" (largest ", s.clusters.front().id, ": ", largest, ")") : "")
      << ", " << s.without_reason << " without a reason";
  if (!s.problems.empty()) err << "; " << s.problems.size() << " left out for errors";
  err << "\n";
  return kExitOk;
}

}  // namespace triage::ctl
