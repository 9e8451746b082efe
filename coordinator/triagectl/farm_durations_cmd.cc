#include "coordinator/triagectl/farm_durations_cmd.h"

#include <cmath>
#include <filesystem>
#include <optional>
#include <utility>
#include <vector>

#include "common/util/file.h"
#include "common/util/strings.h"
#include "coordinator/triagectl/inventory_cmd.h"
#include "nlohmann/json.hpp"

namespace triage::ctl::farm {
namespace {

using nlohmann::json;

// A durations file holds one number per test: far below this.
constexpr std::size_t kMaxDurationsBytes = 64 << 20;

// A sweep whose shards are still running has not measured everything yet.
bool StillRunning(const std::string& state) { return state == "running" || state == "blocked"; }

// "n150 (12 entries), p150 (11 entries)", or "none" when no arch measured anything.
std::string MeasuredArchs(const DurationsByArch& by_arch) {
  std::vector<std::string> parts;
  for (const auto& [arch, seconds] : by_arch) {
    if (seconds.empty()) continue;
    parts.push_back(
        util::StrCat(arch, " (", seconds.size(), " entr", seconds.size() == 1 ? "y" : "ies", ")"));
  }
  return parts.empty() ? "none" : util::StrJoin(parts, ", ");
}

// What the command checks before it asks the coordinator: --out can be written as a file and
// --merge reads as a durations file (its text goes to base). The exit code when a file will not
// do (said on err).
std::optional<int> CheckFiles(const FarmOptions& o, std::string* base, std::ostream& err) {
  std::error_code ec;
  if (!o.durations_out.empty() && std::filesystem::is_directory(o.durations_out, ec)) {
    err << "triagectl: --out " << o.durations_out << ": is a directory, not a file\n";
    return kExitUsage;
  }
  if (o.durations_merge.empty()) return std::nullopt;
  auto text = util::ReadFile(o.durations_merge, kMaxDurationsBytes);
  if (!text.ok()) {
    err << "triagectl: --merge " << o.durations_merge << ": " << util::MessageOf(text.status())
        << "\n";
    return kExitUsage;
  }
  // Checked now, so that a bad file costs no call.
  if (auto checked = DurationsFileText({}, *text, "--merge " + o.durations_merge); !checked.ok()) {
    err << "triagectl: " << util::MessageOf(checked.status()) << "\n";
    return kExitUsage;
  }
  *base = std::move(*text);
  return std::nullopt;
}

// The sweep, once its shards ended: a running (or blocked) one has not measured everything yet
// (FailedPrecondition, saying how to follow it).
absl::StatusOr<v1::Sweep> FinishedSweep(Client& client, const std::string& id) {
  v1::GetSweepRequest req;
  req.set_sweep_id(id);
  auto sweep = client.Call<v1::GetSweepRequest, v1::Sweep>(&Stub::GetSweep, req);
  if (!sweep.ok()) return sweep.status();
  if (StillRunning(sweep->state())) {
    return absl::FailedPreconditionError(util::StrCat(
        "sweep ", id, " is still ", sweep->state(),
        ": its durations are complete when it ends (follow it with `triagectl sweep watch ", id,
        "`)"));
  }
  return sweep;
}

}  // namespace

absl::StatusOr<DurationsByArch> MeasuredDurations(std::string_view report_json) {
  const json report = json::parse(report_json, nullptr, /*allow_exceptions=*/false);
  if (!report.is_object() || !report.contains("entries") || !report["entries"].is_array()) {
    return absl::InvalidArgumentError("the sweep's report.json has no entries array");
  }
  DurationsByArch out;
  for (const auto& e : report["entries"]) {
    if (!e.is_object() || !e.contains("node_id") || !e["node_id"].is_string() ||
        !e.contains("durations") || !e["durations"].is_object()) {
      continue;  // a report built before durations were measured
    }
    const std::string node = e["node_id"].get<std::string>();
    for (const auto& [arch, seconds] : e["durations"].items()) {
      if (seconds.is_number() && seconds.get<double>() > 0) {
        out[arch][node] = seconds.get<double>();
      }
    }
  }
  return out;
}

absl::StatusOr<std::string> DurationsFileText(const std::map<std::string, double>& measured,
                                              std::string_view base, std::string_view base_name) {
  json out = json::object();
  if (!base.empty()) {
    out = json::parse(base, nullptr, /*allow_exceptions=*/false);
    if (!out.is_object()) {
      return absl::InvalidArgumentError(
          util::StrCat(base_name, ": not a durations file (a JSON object of node id -> seconds)"));
    }
  }
  for (const auto& [node, seconds] : measured) out[node] = std::round(seconds * 1000) / 1000;
  // nlohmann's objects keep their keys sorted, as sort_keys=True does; ASCII only, as json.dump.
  return out.dump(4, ' ', /*ensure_ascii=*/true, json::error_handler_t::replace);
}

int RunSweepDurations(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err) {
  std::string base;
  if (auto rc = CheckFiles(o, &base, err)) return *rc;
  auto sweep = FinishedSweep(client, o.id);
  if (!sweep.ok()) return Error(err, sweep.status());
  v1::GetReportRequest req;
  req.set_sweep_id(o.id);
  auto report = client.Call<v1::GetReportRequest, v1::Report>(&Stub::GetReport, req);
  if (!report.ok()) return Error(err, report.status());
  auto by_arch = MeasuredDurations(report->json());
  if (!by_arch.ok()) return Error(err, by_arch.status());
  const std::string arch = !o.durations_arch.empty()
                               ? o.durations_arch
                               : (sweep->archs().empty() ? "n150" : sweep->archs(0));
  const auto measured = by_arch->find(arch);
  if (measured == by_arch->end() || measured->second.empty()) {
    err << "triagectl: sweep " << o.id << " measured no entry on " << arch
        << " (archs with measured entries: " << MeasuredArchs(*by_arch) << ")\n";
    return kExitProblems;
  }
  auto text = DurationsFileText(measured->second, base, "--merge " + o.durations_merge);
  if (!text.ok()) return Error(err, text.status());
  if (sweep->state() == "cancelled" || sweep->state() == "failed") {
    err << "triagectl: warning: sweep " << o.id << " " << sweep->state()
        << ": only the entries measured before it ended are written\n";
  }
  if (o.durations_out.empty()) {
    out << *text << "\n";
    return kExitOk;
  }
  if (auto st = util::WriteFileAtomic(o.durations_out, *text); !st.ok()) return Error(err, st);
  const std::size_t entries = measured->second.size();
  if (o.output == "json") {
    out << json{{"sweep", o.id},
                {"state", sweep->state()},
                {"arch", arch},
                {"measured", entries},
                {"written", o.durations_out},
                {"merged_from",
                 o.durations_merge.empty() ? json(nullptr) : json(o.durations_merge)}}
               .dump(2)
        << "\n";
  } else {
    out << o.durations_out << " (" << entries << " measured on " << arch
        << (o.durations_merge.empty() ? "" : util::StrCat(", over ", o.durations_merge)) << ")\n";
  }
  return kExitOk;
}

}  // namespace triage::ctl::farm
