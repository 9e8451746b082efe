// The metric catalogue (common/metrics/metric_catalog.h) is the one list of metric names: they
// follow Prometheus' conventions, docs/farm.md#metrics documents each entry, the dashboards and
// alert rules name nothing else, and the two exporters register exactly their entries.

#include "common/metrics/metric_catalog.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/metrics/prometheus_agent_metrics.h"
#include "coordinator/metrics/prometheus_metrics.h"
#include "gtest/gtest.h"
#include "prometheus/client_metric.h"
#include "prometheus/metric_family.h"
#include "prometheus/metric_type.h"
#include "prometheus/registry.h"
#include "tests/support/test_support.h"

namespace triage::metrics {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kCatalogueFile = "common/metrics/metric_catalog.h";

std::vector<const MetricDef*> AllMetrics() {
  std::vector<const MetricDef*> all(catalog::kCoordinatorMetrics.begin(),
                                    catalog::kCoordinatorMetrics.end());
  all.insert(all.end(), catalog::kAgentMetrics.begin(), catalog::kAgentMetrics.end());
  return all;
}

const MetricDef* Find(std::string_view name) {
  for (const MetricDef* m : AllMetrics()) {
    if (m->name == name) return m;
  }
  return nullptr;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in{std::string(s)};
  while (std::getline(in, part, sep)) parts.push_back(part);
  return parts;
}

std::string Trim(std::string_view s) {
  const auto begin = s.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return "";
  const auto end = s.find_last_not_of(" \t");
  return std::string(s.substr(begin, end - begin + 1));
}

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out.empty() ? "(none)" : out;
}

std::vector<std::string> LabelList(const MetricDef& m) {
  return std::vector<std::string>(m.labels.begin(), m.labels.end());
}

std::set<std::string> LabelSet(const MetricDef& m) {
  return std::set<std::string>(m.labels.begin(), m.labels.end());
}

bool IsSnakeCase(std::string_view s) {
  static const std::regex kSnake("[a-z][a-z0-9]*(_[a-z0-9]+)*");
  return std::regex_match(s.begin(), s.end(), kSnake);
}

// ---- naming conventions ----------------------------------------------------------------------

TEST(MetricCatalogTest, NamesAreUnique) {
  std::map<std::string_view, int> seen;
  for (const MetricDef* m : AllMetrics()) ++seen[m->name];
  for (const auto& [name, count] : seen) {
    EXPECT_EQ(count, 1)
        << name << " is catalogued " << count << " times in " << kCatalogueFile
        << " (kCoordinatorMetrics and kAgentMetrics together name each metric once)";
  }
}

TEST(MetricCatalogTest, NamesFollowPrometheusConventions) {
  // Words that make a metric a duration or a point in time: its unit must be seconds.
  const std::set<std::string> time_words = {"age",  "duration", "elapsed",   "latency",
                                            "time", "wait",     "timestamp", "oldest"};
  // Units other than the base unit (seconds).
  const std::set<std::string> other_units = {
      "ms",          "msec", "millis", "milliseconds", "us",      "microseconds", "ns",
      "nanoseconds", "sec",  "secs",   "mins",         "minutes", "hours",        "days"};
  for (const MetricDef* m : AllMetrics()) {
    const std::string_view name = m->name;
    const std::string where = std::string(name) + " (" + std::string(kCatalogueFile) + ")";
    EXPECT_TRUE(name.starts_with("triage_")) << where << ": metric names start with triage_";
    EXPECT_TRUE(IsSnakeCase(name)) << where << ": metric names are snake_case ([a-z0-9_])";
    if (m->type == MetricType::kCounter) {
      EXPECT_TRUE(EndsWith(name, "_total")) << where << ": a counter's name ends in _total";
    } else {
      EXPECT_FALSE(EndsWith(name, "_total"))
          << where << ": only counters end in _total (this is a " << MetricTypeName(m->type) << ")";
    }
    if (m->type == MetricType::kHistogram) {
      for (std::string_view suffix : {"_bucket", "_sum", "_count"}) {
        EXPECT_FALSE(EndsWith(name, suffix))
            << where << ": a histogram's name may not end in " << suffix
            << " (Prometheus adds _bucket, _sum and _count to it)";
      }
    }
    // The unit comes last (before _total for a counter): ..._seconds or ..._seconds_total.
    std::string_view base = name;
    if (m->type == MetricType::kCounter && EndsWith(base, "_total")) {
      base.remove_suffix(std::string_view("_total").size());
    }
    bool timed = false;
    for (const std::string& word : Split(name, '_')) {
      EXPECT_EQ(other_units.count(word), 0u)
          << where << ": durations and times are in seconds (_seconds), not " << word;
      timed = timed || time_words.count(word) > 0 || word == "seconds";
    }
    if (timed) {
      EXPECT_TRUE(EndsWith(base, "_seconds"))
          << where << ": a duration or time ends in _seconds"
          << (m->type == MetricType::kCounter ? " (then _total)" : "");
    }
  }
}

TEST(MetricCatalogTest, HelpAndLabelsAreSet) {
  // docs/farm.md#metrics: no label ever carries a test, shard, sweep or agent id; the one
  // exception is the running sweeps' gauge, whose exporter keeps at most 20 sweeps' series and
  // drops a sweep's when it ends (docs/farm.md, "Which sweep"; tested below).
  const std::set<std::string> id_labels = {"id",    "test",  "shard", "sweep",
                                           "agent", "lease", "entry", "loader"};
  for (const MetricDef* m : AllMetrics()) {
    if (m == &catalog::kRunningSweepEntries) continue;
    const std::string where = std::string(m->name) + " (" + std::string(kCatalogueFile) + ")";
    EXPECT_FALSE(m->help.empty()) << where << ": help text is empty";
    std::set<std::string_view> seen;
    for (std::string_view label : m->labels) {
      EXPECT_TRUE(IsSnakeCase(label)) << where << ": label \"" << label << "\" is not snake_case";
      EXPECT_TRUE(seen.insert(label).second) << where << ": label \"" << label << "\" twice";
      EXPECT_FALSE(label == "le" || label == "quantile")
          << where << ": label \"" << label << "\" is reserved by Prometheus";
      EXPECT_FALSE(id_labels.count(std::string(label)) > 0 || EndsWith(label, "_id"))
          << where << ": label \"" << label
          << "\" would carry an id (docs/farm.md#metrics: no label carries a test, shard, "
             "sweep or agent id)";
    }
  }
}

// ---- the docs --------------------------------------------------------------------------------

// A row of a markdown table whose first cell is a metric name in backquotes.
struct DocRow {
  std::string name;
  int line = 0;
  std::optional<std::string> type;                 // when the table has a "type" column
  std::optional<std::vector<std::string>> labels;  // when the table has a "labels" column
};

// The "## Metrics" section of a doc, as (line number, text) pairs; fails when there is none.
std::vector<std::pair<int, std::string>> MetricsSection(const std::string& rel) {
  const std::string text = testing::ReadFileOrDie(fs::path(TRIAGE_SOURCE_DIR) / rel);
  std::vector<std::pair<int, std::string>> section;
  bool in = false;
  int n = 0;
  for (const std::string& line : Split(text, '\n')) {
    ++n;
    if (line.starts_with("## ")) {
      if (in) break;
      in = Trim(line) == "## Metrics";
      continue;
    }
    if (in) section.emplace_back(n, line);
  }
  EXPECT_FALSE(section.empty()) << rel << " has no \"## Metrics\" section";
  return section;
}

std::vector<DocRow> MetricRows(const std::string& rel) {
  std::vector<DocRow> rows;
  std::map<std::string, std::size_t> columns;  // of the current table's header
  for (const auto& [n, line] : MetricsSection(rel)) {
    if (!line.starts_with("|")) {
      columns.clear();
      continue;
    }
    std::vector<std::string> cells = Split(line, '|');
    cells.erase(cells.begin());  // before the first '|'
    for (std::string& c : cells) c = Trim(c);
    if (cells.empty()) continue;
    if (cells[0] == "metric") {
      columns.clear();
      for (std::size_t i = 0; i < cells.size(); ++i) columns[cells[i]] = i;
      continue;
    }
    if (cells[0].size() < 2 || cells[0].front() != '`' || cells[0].back() != '`') continue;
    DocRow row;
    row.name = cells[0].substr(1, cells[0].size() - 2);
    row.line = n;
    if (auto it = columns.find("type"); it != columns.end() && it->second < cells.size()) {
      row.type = cells[it->second];
    }
    if (auto it = columns.find("labels"); it != columns.end() && it->second < cells.size()) {
      std::vector<std::string> labels;
      const std::string& cell = cells[it->second];
      if (cell != "–" && cell != "-" && !cell.empty()) {
        for (const std::string& l : Split(cell, ',')) labels.push_back(Trim(l));
      }
      row.labels = labels;
    }
    rows.push_back(row);
  }
  return rows;
}

// The section's lines without the first cell of metric rows (CheckRow checks those).
std::vector<std::pair<int, std::string>> ProseOf(std::vector<std::pair<int, std::string>> lines) {
  for (auto& [n, line] : lines) {
    if (line.starts_with("| `triage_")) line.erase(0, line.find('|', 1));
  }
  return lines;
}

// Checks a documented row against the catalogue; where: "docs/farm.md:12".
void CheckRow(const DocRow& row, const std::string& where) {
  const MetricDef* m = Find(row.name);
  if (m == nullptr) {
    ADD_FAILURE() << where << ": " << row.name << " is documented but not in the catalogue ("
                  << kCatalogueFile << ")";
    return;
  }
  if (row.type) {
    EXPECT_EQ(*row.type, MetricTypeName(m->type))
        << where << ": " << row.name << " is documented as a " << *row.type << ", catalogued as a "
        << MetricTypeName(m->type);
  }
  if (row.labels) {
    EXPECT_EQ(std::set<std::string>(row.labels->begin(), row.labels->end()), LabelSet(*m))
        << where << ": " << row.name << " is documented with labels " << Join(*row.labels)
        << ", catalogued with " << Join(LabelList(*m));
  }
}

// The catalogue entry a name in a query or doc refers to: the name itself, or the _bucket, _sum
// or _count series of a histogram. Sets *why when there is none.
const MetricDef* Resolve(const std::string& token, std::string* why) {
  if (const MetricDef* m = Find(token)) {
    if (m->type == MetricType::kHistogram) {
      *why = "is a histogram: its series are " + token + "_bucket, _sum and _count";
      return nullptr;
    }
    return m;
  }
  for (std::string_view suffix : {"_bucket", "_sum", "_count"}) {
    if (!EndsWith(token, suffix)) continue;
    const MetricDef* m = Find(std::string_view(token).substr(0, token.size() - suffix.size()));
    if (m != nullptr && m->type == MetricType::kHistogram) return m;
  }
  *why = "is not in the catalogue (" + std::string(kCatalogueFile) + ")";
  return nullptr;
}

// Every triage_ name in lines (of file rel) must name a catalogued series. A doc may name a
// histogram itself; a query names its series.
void CheckNamesIn(const std::string& rel, const std::vector<std::pair<int, std::string>>& lines,
                  bool allow_bare_histograms) {
  static const std::regex kName(R"(\btriage_[a-z0-9_]*[a-z0-9]\b)");
  for (const auto& [n, line] : lines) {
    for (auto it = std::sregex_iterator(line.begin(), line.end(), kName);
         it != std::sregex_iterator(); ++it) {
      const std::string token = it->str();
      std::string why;
      if (allow_bare_histograms && Find(token) != nullptr) continue;
      if (Resolve(token, &why) == nullptr) {
        ADD_FAILURE() << rel << ":" << n << ": metric " << token << " " << why;
      }
    }
  }
}

TEST(MetricCatalogDocsTest, FarmMdDocumentsEveryEntry) {
  const std::string doc = "docs/farm.md";
  std::map<std::string, int> documented;  // name -> first line
  for (const DocRow& row : MetricRows(doc)) {
    const std::string where = doc + ":" + std::to_string(row.line);
    EXPECT_TRUE(row.type.has_value() && row.labels.has_value())
        << where << ": the metrics table needs \"type\" and \"labels\" columns";
    if (auto [it, fresh] = documented.emplace(row.name, row.line); !fresh) {
      ADD_FAILURE() << where << ": " << row.name << " is documented twice (first on line "
                    << it->second << ")";
    }
    CheckRow(row, where);
  }
  for (const MetricDef* m : AllMetrics()) {
    EXPECT_TRUE(documented.count(std::string(m->name)) > 0)
        << m->name << " (" << kCatalogueFile << ") is missing from " << doc
        << ": add its row to the table of section \"## Metrics\"";
  }
  CheckNamesIn(doc, ProseOf(MetricsSection(doc)), /*allow_bare_histograms=*/true);
}

TEST(MetricCatalogDocsTest, ObservabilityMdNamesCataloguedMetrics) {
  const std::string doc = "docs/observability.md";
  for (const DocRow& row : MetricRows(doc)) CheckRow(row, doc + ":" + std::to_string(row.line));
  CheckNamesIn(doc, ProseOf(MetricsSection(doc)), /*allow_bare_histograms=*/true);
}

// ---- dashboards and alert rules --------------------------------------------------------------

// The files of dir (relative to the source tree) ending in one of extensions, sorted; fails when
// there is none (a moved folder must not turn the check into a no-op).
std::vector<std::string> FilesIn(const std::string& dir,
                                 const std::vector<std::string>& extensions) {
  std::vector<std::string> files;
  const fs::path root(TRIAGE_SOURCE_DIR);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root / dir, ec)) {
    const std::string ext = entry.path().extension().string();
    if (entry.is_regular_file() &&
        std::find(extensions.begin(), extensions.end(), ext) != extensions.end()) {
      files.push_back(fs::relative(entry.path(), root).string());
    }
  }
  std::sort(files.begin(), files.end());
  EXPECT_FALSE(files.empty()) << "no " << Join(extensions) << " files in " << dir;
  return files;
}

void CheckFile(const std::string& rel) {
  const std::string text = testing::ReadFileOrDie(fs::path(TRIAGE_SOURCE_DIR) / rel);
  std::vector<std::pair<int, std::string>> lines;
  int n = 0;
  for (const std::string& line : Split(text, '\n')) lines.emplace_back(++n, line);
  CheckNamesIn(rel, lines, /*allow_bare_histograms=*/false);
}

TEST(MetricCatalogUsersTest, DashboardsNameCataloguedMetrics) {
  for (const char* dir : {"dashboards", "charts/triage-farm/dashboards"}) {
    for (const std::string& file : FilesIn(dir, {".json"})) CheckFile(file);
  }
}

TEST(MetricCatalogUsersTest, AlertRulesNameCataloguedMetrics) {
  // dashboards/alerts.yaml (and its rule tests), and the chart's PrometheusRule copy.
  for (const char* dir : {"dashboards", "charts/triage-farm/rules"}) {
    for (const std::string& file : FilesIn(dir, {".yaml", ".yml"})) CheckFile(file);
  }
}

// ---- the exporters ---------------------------------------------------------------------------

std::string_view TypeName(prometheus::MetricType type) {
  switch (type) {
    case prometheus::MetricType::Counter:
      return "counter";
    case prometheus::MetricType::Gauge:
      return "gauge";
    case prometheus::MetricType::Histogram:
      return "histogram";
    default:
      return "other";
  }
}

// Compares what an exporter registered with its catalogue list. The hooks were called with the
// value "v-<label>" for every label, so a value passed to the wrong label shows.
template <std::size_t N>
void ExpectRegistryMatches(prometheus::Registry& registry,
                           const std::array<const MetricDef*, N>& entries, const std::string& who,
                           const std::string& list) {
  std::set<std::string> registered;
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    if (!family.name.starts_with("triage_")) continue;
    registered.insert(family.name);
    const auto it = std::find_if(entries.begin(), entries.end(),
                                 [&](const MetricDef* m) { return m->name == family.name; });
    if (it == entries.end()) {
      ADD_FAILURE() << "the " << who << " registers " << family.name << ", which is not in " << list
                    << " (" << kCatalogueFile << ")";
      continue;
    }
    const MetricDef& m = **it;
    EXPECT_EQ(TypeName(family.type), MetricTypeName(m.type)) << family.name << ": type";
    EXPECT_EQ(family.help, m.help) << family.name << ": help";
    EXPECT_FALSE(family.metric.empty()) << family.name << ": no series after every hook ran";
    for (const prometheus::ClientMetric& series : family.metric) {
      std::set<std::string> names;
      for (const auto& label : series.label) {
        names.insert(label.name);
        if (label.value.starts_with("v-")) {
          EXPECT_EQ(label.value, "v-" + label.name)
              << family.name << ": the value meant for label " << label.value.substr(2)
              << " went to label " << label.name
              << " (values are passed in the order of the entry's labels)";
        }
      }
      EXPECT_EQ(names, LabelSet(m)) << family.name << ": a series' labels are not the entry's";
    }
  }
  for (const MetricDef* m : entries) {
    EXPECT_TRUE(registered.count(std::string(m->name)) > 0)
        << m->name << " is in " << list << " but the " << who << " does not register it";
  }
}

TEST(MetricCatalogExportersTest, CoordinatorRegistersItsEntries) {
  auto registry = std::make_shared<prometheus::Registry>();
  coord::PrometheusMetrics metrics(registry, "v-version");
  metrics.SweepStateChanged("", "v-state");
  metrics.SweepSucceeded(1);
  metrics.EntryStateChanged("v-playbook", "", "v-state");
  metrics.EntryDecided("v-playbook", "v-outcome", "v-stage");
  metrics.EntryDone("v-playbook");
  metrics.ShardStateChanged("v-arch", "", "v-state");
  metrics.ShardCompleted("v-arch", "v-playbook", "v-outcome");
  metrics.ShardQueueWait("v-arch", "v-playbook", 1);
  metrics.ShardRunTime("v-arch", "v-playbook", 1);
  metrics.ShardAttempts("v-playbook", 1);
  metrics.VerifyBatch("v-arch", 2);
  metrics.LeaseExpired("v-arch", "v-reason");
  metrics.Requeued("v-arch", "v-source");
  metrics.StaleResultRejected("v-reason");
  metrics.AgentStateChanged("v-arch", "", "v-state");
  metrics.HeartbeatAge("v-arch", 1);
  metrics.MergeDone(1);
  metrics.MergeConflict("v-kind");
  metrics.OnCallAges("v-arch", 1, 1);
  metrics.UnservableShards("v-arch", "v-reason", 1);
  metrics.BlockedSweeps(1);
  metrics.RunningSweeps({{"v-sweep", 1, 1, 1}});
  metrics.StoreCommit(0.001, 1, true);
  metrics.StoreCommit(0.001, 1, false);
  metrics.Rpc("v-method", "v-code", 1);
  metrics.FailureClusters({{"v-cluster", "v-signature", 1}});
  metrics.RemediationClusters({{"v-cluster", 1, 1}});
  ExpectRegistryMatches(*registry, catalog::kCoordinatorMetrics, "coordinator",
                        "kCoordinatorMetrics");
}

// triage_running_sweep_entries: the latest tick's running sweeps only, at most 20 of them.
TEST(MetricCatalogExportersTest, CoordinatorExportsAtMostTwentyRunningSweeps) {
  auto registry = std::make_shared<prometheus::Registry>();
  coord::PrometheusMetrics metrics(registry, "v-version");
  const auto series = [&] {
    std::map<std::string, double> out;  // "sweep/state" -> entries
    for (const prometheus::MetricFamily& family : registry->Collect()) {
      if (family.name != catalog::kRunningSweepEntries.name) continue;
      for (const prometheus::ClientMetric& m : family.metric) {
        std::map<std::string, std::string> labels;
        for (const auto& l : m.label) labels[l.name] = l.value;
        out[labels["sweep"] + "/" + labels["state"]] = m.gauge.value;
      }
    }
    return out;
  };
  std::vector<coord::SweepProgress> many;
  for (int i = 1; i <= 25; ++i) many.push_back({"sw-" + std::to_string(100 + i), i, 1, 2});
  metrics.RunningSweeps(many);
  auto got = series();
  EXPECT_EQ(got.size(), 60u) << "20 sweeps, three states each";
  EXPECT_EQ(got["sw-101/queued"], 1);
  EXPECT_EQ(got["sw-120/done"], 2);
  EXPECT_EQ(got.count("sw-121/queued"), 0u);
  metrics.RunningSweeps({{"sw-125", 4, 0, 7}});
  got = series();
  EXPECT_EQ(got.size(), 3u) << "the ended sweeps' series are gone";
  EXPECT_EQ(got["sw-125/done"], 7);
  metrics.RunningSweeps({});
  EXPECT_TRUE(series().empty());
}

// triage_failure_cluster_entries: the latest sweep's ten largest clusters, each by its stable id;
// triage_failure_cluster_info carries each one's whole signature. The previous sweep's series
// are gone.
TEST(MetricCatalogExportersTest, CoordinatorExportsTheLatestSweepsTenLargestClusters) {
  auto registry = std::make_shared<prometheus::Registry>();
  coord::PrometheusMetrics metrics(registry, "v-version");
  // rank -> cluster, entries; cluster -> signature.
  using Sizes = std::map<std::string, std::pair<std::string, double>>;
  const auto series = [&] {
    Sizes sizes;
    std::map<std::string, std::string> info;
    for (const prometheus::MetricFamily& family : registry->Collect()) {
      const bool is_sizes = family.name == catalog::kFailureClusterEntries.name;
      if (!is_sizes && family.name != catalog::kFailureClusterInfo.name) continue;
      for (const prometheus::ClientMetric& m : family.metric) {
        std::map<std::string, std::string> labels;
        for (const auto& l : m.label) labels[l.name] = l.value;
        if (is_sizes) {
          sizes[labels["rank"]] = {labels["cluster"], m.gauge.value};
        } else {
          EXPECT_EQ(m.gauge.value, 1.0);
          EXPECT_EQ(info.count(labels["cluster"]), 0u) << "one info series per cluster";
          info[labels["cluster"]] = labels["signature"];
        }
      }
    }
    return std::pair{sizes, info};
  };
  std::vector<coord::ClusterSize> many;
  for (int i = 0; i < 12; ++i) {
    many.push_back({"c-0000000" + std::to_string(i % 10) + (i >= 10 ? "x" : ""),
                    "cluster " + std::to_string(i), 20 - i});
  }
  // Three signatures alike for their first 100 bytes stay three series.
  const std::string oom(120, 'o');
  many[0].signature = oom + " 1";
  many[1].signature = oom + " 2";
  many[2].signature = oom + " 3";
  metrics.FailureClusters(many);
  auto [first, first_info] = series();
  ASSERT_EQ(first.size(), 10u) << "only the ten largest are exported";
  ASSERT_EQ(first_info.size(), 10u);
  EXPECT_EQ(first["1"], std::pair(std::string("c-00000000"), 20.0));
  EXPECT_EQ(first["10"], std::pair(std::string("c-00000009"), 11.0));
  EXPECT_EQ(first_info["c-00000000"], oom + " 1") << "the whole signature";
  EXPECT_EQ(first_info["c-00000002"], oom + " 3");
  metrics.FailureClusters({{"c-12345678", "only one now", 3}});
  auto [second, second_info] = series();
  ASSERT_EQ(second.size(), 1u) << "the previous sweep's clusters are removed";
  EXPECT_EQ(second["1"], std::pair(std::string("c-12345678"), 3.0));
  EXPECT_EQ(second_info, (std::map<std::string, std::string>{{"c-12345678", "only one now"}}));
  metrics.FailureClusters({});
  EXPECT_TRUE(series().first.empty());
  EXPECT_TRUE(series().second.empty());
}

// triage_remediation_cluster_entries: the latest command sweep's ten largest remediation
// clusters, fixed and failing per cluster; the previous sweep's series are gone.
TEST(MetricCatalogExportersTest, CoordinatorExportsTheLatestCommandSweepsRemediationClusters) {
  auto registry = std::make_shared<prometheus::Registry>();
  coord::PrometheusMetrics metrics(registry, "v-version");
  const auto series = [&] {
    std::map<std::string, double> out;  // "rank/cluster/state" -> entries
    for (const prometheus::MetricFamily& family : registry->Collect()) {
      if (family.name != catalog::kRemediationClusterEntries.name) continue;
      for (const prometheus::ClientMetric& m : family.metric) {
        std::map<std::string, std::string> labels;
        for (const auto& l : m.label) labels[l.name] = l.value;
        out[labels["rank"] + "/" + labels["cluster"] + "/" + labels["state"]] = m.gauge.value;
      }
    }
    return out;
  };
  std::vector<coord::RemediationClusterSize> many;
  for (int i = 0; i < 12; ++i) many.push_back({"fp-" + std::to_string(i), 20 - i, i});
  metrics.RemediationClusters(many);
  auto got = series();
  EXPECT_EQ(got.size(), 20u) << "ten clusters, two states each";
  EXPECT_EQ(got["1/fp-0/fixed"], 20);
  EXPECT_EQ(got["10/fp-9/failing"], 9);
  EXPECT_EQ(got.count("11/fp-10/fixed"), 0u);
  metrics.RemediationClusters({{"c-12345678", 0, 3}});
  got = series();
  EXPECT_EQ(
      got, (std::map<std::string, double>{{"1/c-12345678/fixed", 0}, {"1/c-12345678/failing", 3}}));
}

TEST(MetricCatalogExportersTest, AgentRegistersItsEntries) {
  auto registry = std::make_shared<prometheus::Registry>();
  agent::PrometheusAgentMetrics metrics(registry, "v-version", "v-arch");
  metrics.Step("v-playbook", "v-step", "v-outcome", 1);
  metrics.SubprocessTimeout("v-step");
  metrics.WorkspaceReset(1);
  ExpectRegistryMatches(*registry, catalog::kAgentMetrics, "agent", "kAgentMetrics");
}

}  // namespace
}  // namespace triage::metrics
