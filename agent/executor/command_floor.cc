#include "agent/executor/command_floor.h"

#include <set>
#include <string>
#include <utility>

#include "nlohmann/json.hpp"

#include "agent/executor/native_executor.h"
#include "agent/executor/native_tools.h"
#include "agent/playbooks/tools.h"
#include "common/command/guards.h"
#include "common/util/file.h"
#include "common/util/strings.h"

namespace triage::agent {

absl::Status MeasurePccFloors(ExecContext& ctx, const std::filesystem::path& scripts_dir,
                              v1::ShardResult& result) {
  std::set<std::pair<std::string, std::string>> wanted;  // (file, key)
  for (const auto& o : result.entries()) {
    if (!o.changed()) continue;
    for (const auto& f : o.edit().set()) {
      if (f.name() == "required_pcc") wanted.insert({o.file(), o.key()});
    }
  }
  if (wanted.empty()) return absl::OkStatus();
  NativeTools tools(NativeExecutor::ToolsOptionsFor(ctx, scripts_dir));
  nlohmann::json floors = nlohmann::json::array();
  std::set<std::string> measured;  // keys probed (a key in two files is probed once)
  std::map<std::string, nlohmann::json> by_key;
  for (const auto& [file, key] : wanted) {
    if (ctx.cancelled && ctx.cancelled()) return absl::CancelledError("lease revoked");
    if (!measured.insert(key).second) continue;
    if (ctx.progress) ctx.progress("floor", key, {"measuring the CPU bfloat16 PCC floor"});
    nlohmann::json f = {{"pcc", nullptr}, {"error", ""}};
    auto docs = tools.Probe(key, "floor");
    if (docs.status().code() == absl::StatusCode::kCancelled) return docs.status();
    if (!docs.ok()) {
      f["error"] = std::string(docs.status().message());
    } else if (docs->empty()) {
      f["error"] = "the probe wrote no floor document";
    } else {
      const nlohmann::json& raw = docs->front().raw;
      if (raw.contains("pcc") && raw["pcc"].is_number()) {
        f["pcc"] = raw["pcc"].get<double>();
      } else {
        f["error"] = docs->front().error ? docs->front().error->Line() : "no PCC measured";
      }
    }
    by_key[key] = std::move(f);
  }
  for (const auto& [file, key] : wanted) {
    nlohmann::json f = by_key[key];
    f["file"] = file;
    f["key"] = key;
    floors.push_back(std::move(f));
  }
  const std::string text = nlohmann::json{{"floors", floors}}.dump(2) + "\n";
  (void)util::WriteFileAtomic(ctx.shard_dir / "floors.json", text);
  v1::Evidence* ev = result.add_evidence();
  ev->set_name("floors.json");
  ev->set_kind(std::string(command::kPccFloorEvidence));
  ev->set_content(text);
  // The probe's documents and logs, named on the outcomes of their keys.
  playbooks::AttachEvidence(tools, result);
  for (auto& o : *result.mutable_entries()) {
    if (wanted.count({o.file(), o.key()})) o.add_evidence("floors.json");
  }
  return absl::OkStatus();
}

}  // namespace triage::agent
