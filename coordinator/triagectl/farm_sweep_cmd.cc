#include "coordinator/triagectl/farm_sweep_cmd.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/util/file.h"
#include "common/util/strings.h"
#include "coordinator/triagectl/farm_nightly.h"
#include "coordinator/triagectl/inventory_cmd.h"
#include "coordinator/triagectl/sweep_view.h"
#include "google/protobuf/util/json_util.h"

namespace triage::ctl::farm {
namespace {

// The sweep as JSON or as PrintSweep shows it.
int ShowSweep(const absl::StatusOr<v1::Sweep>& r, const FarmOptions& o, std::ostream& out,
              std::ostream& err) {
  if (!r.ok()) return Error(err, r.status());
  if (o.output == "json") {
    out << Json(*r) << "\n";
  } else {
    PrintSweep(out, *r);
  }
  return kExitOk;
}

// Follows a sweep until it ends: 0 succeeded, 1 failed or cancelled.
// With json, one SweepEvent object per line (JSON lines) instead of progress lines.
int Watch(Client& client, const std::string& id, bool json, std::ostream& out, std::ostream& err) {
  const bool tty = !json && isatty(STDOUT_FILENO) && &out == &std::cout;
  grpc::ClientContext ctx;
  rpc::AddBearer(ctx, client.token());
  v1::WatchSweepRequest req;
  req.set_sweep_id(id);
  auto reader = client.stub()->WatchSweep(&ctx, req);
  v1::SweepEvent ev;
  v1::Sweep last;
  ProgressPrinter progress(out, tty);
  while (reader->Read(&ev)) {
    last = ev.sweep();
    if (json) {
      std::string one;
      google::protobuf::util::JsonPrintOptions options;
      options.preserve_proto_field_names = true;
      options.always_print_primitive_fields = true;
      (void)google::protobuf::util::MessageToJsonString(ev, &one, options);
      out << one << "\n" << std::flush;
    } else {
      progress.Show(last);
    }
    if (last.over_budget()) break;
  }
  if (last.over_budget()) {
    // Nothing moves until a person acts: a waiting job ends here, failed.
    ctx.TryCancel();
    (void)reader->Finish();
    if (tty) out << "\n";
    (json ? err : out) << "sweep " << id << " stopped at its failure budget ("
                       << last.failed_shards() << " shards failed, max " << last.max_failed_shards()
                       << "): `triagectl sweep resume " << id << " --max-failed-shards "
                       << last.failed_shards() + std::max(1, last.max_failed_shards())
                       << " --reason \"agents checked\"` or `triagectl sweep cancel " << id
                       << " --reason \"failure budget spent\"`\n";
    return kExitProblems;
  }
  grpc::Status st = reader->Finish();
  if (tty) out << "\n";
  if (!st.ok()) return Error(err, client.Describe(st));
  if (last.state() == "succeeded") {
    if (!json) out << "sweep " << id << " succeeded\n";
    return kExitOk;
  }
  (json ? err : out) << "sweep " << id << " " << last.state()
                     << (last.error().empty() ? "" : util::StrCat(": ", last.error())) << "\n";
  return kExitProblems;
}

// Fills req from `sweep start`'s flags, reading the files they name. The exit code when a flag
// is wrong or a file cannot be read (said on err); nullopt when req is ready.
std::optional<int> BuildStartRequest(const FarmOptions& o, v1::StartSweepRequest& req,
                                     std::ostream& err) {
  if (o.repo.empty() == o.git_url.empty()) {
    err << "triagectl: give exactly one of --repo or --git-url\n";
    return kExitUsage;
  }
  if (!o.repo.empty()) {
    std::error_code ec;
    req.set_repo_path(std::filesystem::absolute(o.repo, ec).string());
  }
  req.set_git_url(o.git_url);
  req.set_git_ref(o.git_ref);
  for (const auto& p : o.playbooks) req.add_playbooks(p);
  for (const auto& a : o.archs) req.add_archs(a);
  if (!o.durations.empty()) {
    auto d = util::ReadFile(o.durations, 64 << 20);
    if (!d.ok()) return Error(err, d.status());
    req.set_durations_json(*d);
  }
  req.set_executor(o.executor);
  if (!o.command.empty()) (*req.mutable_params())["command"] = o.command;
  if (!o.per.empty()) (*req.mutable_params())["per"] = o.per;
  for (const auto& kv : o.params) {
    auto eq = kv.find('=');
    if (eq == std::string::npos) {
      err << "triagectl: --param must be key=value, got '" << kv << "'\n";
      return kExitUsage;
    }
    (*req.mutable_params())[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  req.set_priority(o.priority);
  req.set_max_attempts(o.max_attempts);
  req.set_reason(o.reason);
  req.set_agent_repo_url(o.agent_repo_url);
  req.set_forge_ref(o.forge_ref);
  req.set_allow_dirty(o.allow_dirty);
  req.set_request_id(o.request_id);
  req.set_max_failed_shards(o.max_failed_shards);
  req.set_incremental(o.incremental);
  req.set_since(o.since);
  if (o.allow_dirty && o.repo.empty()) {
    err << "triagectl: --allow-dirty is for --repo (a --git-url sweep reads commits only)\n";
    return kExitUsage;
  }
  if (!o.rules.empty()) {
    auto r = util::ReadFile(o.rules, 1 << 20);
    if (!r.ok()) return Error(err, r.status());
    req.set_rules_yaml(*r);
  }
  return AddNightly(o, req, err);
}

}  // namespace

int RunSweepStart(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err) {
  v1::StartSweepRequest req;
  if (auto rc = BuildStartRequest(o, req, err)) return *rc;
  auto sweep = client.Call<v1::StartSweepRequest, v1::Sweep>(&Stub::StartSweep, req,
                                                             std::chrono::seconds(600));
  if (int rc = ShowSweep(sweep, o, out, err); rc != kExitOk) return rc;
  if (o.watch) return Watch(client, sweep->id(), o.output == "json", out, err);
  return kExitOk;
}

int RunSweepList(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err) {
  auto r = client.Call<v1::ListSweepsRequest, v1::ListSweepsResponse>(&Stub::ListSweeps, {});
  if (!r.ok()) return Error(err, r.status());
  if (o.output == "json") {
    out << Json(*r) << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : r->sweeps()) rows.push_back(SweepListRow(s));
  PrintTable(out, SweepListHeader(), rows);
  return kExitOk;
}

int RunSweepStatus(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err) {
  v1::GetSweepRequest req;
  req.set_sweep_id(o.id);
  return ShowSweep(client.Call<v1::GetSweepRequest, v1::Sweep>(&Stub::GetSweep, req), o, out, err);
}

int RunSweepCancel(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err) {
  v1::CancelSweepRequest req;
  req.set_sweep_id(o.id);
  req.set_reason(o.reason);
  return ShowSweep(client.Call<v1::CancelSweepRequest, v1::Sweep>(&Stub::CancelSweep, req), o, out,
                   err);
}

int RunSweepResume(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err) {
  v1::ResumeSweepRequest req;
  req.set_sweep_id(o.id);
  req.set_max_failed_shards(o.max_failed_shards);
  req.set_reason(o.reason);
  return ShowSweep(client.Call<v1::ResumeSweepRequest, v1::Sweep>(&Stub::ResumeSweep, req), o, out,
                   err);
}

int RunSweepWatch(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err) {
  return Watch(client, o.id, o.output == "json", out, err);
}

}  // namespace triage::ctl::farm
