#include "coordinator/triagectl/farm_sweep_cmd.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
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
int Watch(Client& client, const std::string& id, bool json, std::chrono::seconds blocked_timeout,
          std::ostream& out, std::ostream& err) {
  const bool tty = !json && isatty(STDOUT_FILENO) && &out == &std::cout;
  {
    // The sweep is asked for first: an unknown id is said at once, and the stream below opens
    // on a channel that has connected (Client::Invoke's second attempt covers a slow connect).
    v1::GetSweepRequest get;
    get.set_sweep_id(id);
    auto known = client.Call<v1::GetSweepRequest, v1::Sweep>(&Stub::GetSweep, get);
    if (!known.ok()) return Error(err, known.status());
  }
  grpc::ClientContext ctx;
  rpc::AddBearer(ctx, client.token());
  v1::WatchSweepRequest req;
  req.set_sweep_id(id);
  auto reader = client.stub()->WatchSweep(&ctx, req);
  v1::SweepEvent ev;
  v1::Sweep last;
  ProgressPrinter progress(out, tty);
  // A sweep that stays blocked (no agent can take its work) ends the watch after
  // blocked_timeout: nothing moves until a person acts, and no event may come meanwhile.
  std::mutex mu;
  std::condition_variable cv;
  bool ended = false, gave_up = false;
  std::optional<std::chrono::steady_clock::time_point> blocked_since;
  std::thread timer([&] {
    std::unique_lock lock(mu);
    while (!ended) {
      if (blocked_since && std::chrono::steady_clock::now() - *blocked_since >= blocked_timeout) {
        gave_up = true;
        ctx.TryCancel();
        return;
      }
      cv.wait_for(lock, std::chrono::milliseconds(200));
    }
  });
  const auto stop_timer = [&] {
    {
      std::lock_guard lock(mu);
      ended = true;
    }
    cv.notify_all();
    timer.join();
  };
  while (reader->Read(&ev)) {
    last = ev.sweep();
    {
      std::lock_guard lock(mu);
      if (last.state() != "blocked" || last.over_budget()) {
        blocked_since.reset();
      } else if (!blocked_since) {
        blocked_since = std::chrono::steady_clock::now();
      }
    }
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
  stop_timer();
  if (gave_up) {
    // The sweep itself goes on: an agent of the needed arch, or a person, unblocks it.
    (void)reader->Finish();
    if (tty) out << "\n";
    (json ? err : out) << "sweep " << id << " has been blocked for " << blocked_timeout.count()
                       << " s: "
                       << (last.problems().empty()
                               ? std::string("see `triagectl sweep status " + id + "`")
                               : util::StrJoin(last.problems(), "; "))
                       << ". It goes on once that is fixed: `triagectl sweep watch " << id
                       << "` to follow it again\n";
    return kExitProblems;
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
  auto selection = BuildSelection(o.select);
  if (!selection.ok()) return Error(err, selection.status());
  if (selection->ByteSizeLong() > 0) *req.mutable_selection() = std::move(*selection);
  if (o.allow_dirty && o.repo.empty()) {
    err << "triagectl: --allow-dirty is for --repo (a --git-url sweep reads commits only)\n";
    return kExitUsage;
  }
  if (!o.rules.empty()) {
    auto r = util::ReadFile(o.rules, 1 << 20);
    if (!r.ok()) return Error(err, r.status());
    req.set_rules_yaml(*r);
  }
  return AddNightlyOptions(o, req, err);
}

bool FieldChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }

// text with every whole `from` (not part of a longer field name such as a.from or from_b)
// replaced by `to`.
std::string ReplaceField(const std::string& text, std::string_view from, std::string_view to) {
  std::string out;
  std::size_t pos = 0;
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, pos)) {
    const std::size_t end = at + from.size();
    const bool after_field =
        end < text.size() && (FieldChar(text[end]) || (text[end] == '.' && end + 1 < text.size() &&
                                                       FieldChar(text[end + 1])));
    const bool whole =
        (at == 0 || !(FieldChar(text[at - 1]) || text[at - 1] == '.')) && !after_field;
    out.append(text, pos, at - pos);
    out.append(whole ? to : from);
    pos = end;
  }
  out.append(text, pos);
  return out;
}

// The coordinator's refusal of a start request worded with the flags the user gave: it speaks
// of the request's fields (repo_path, max_failed_shards, nightly_options.pcc_step), triagectl of
// its flags (--repo as given, --max-failed-shards, --pcc-step).
absl::Status InFlags(const absl::Status& st, const FarmOptions& o, const v1::StartSweepRequest& req,
                     const std::string& address) {
  switch (st.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kAlreadyExists:
      break;
    default:
      return st;
  }
  std::string text(st.message());
  if (!req.repo_path().empty()) {
    // The coordinator sees the absolute path triagectl sent; the user gave o.repo.
    const std::string field = util::StrCat("repo_path ", req.repo_path());
    if (text.starts_with(field)) {
      text.replace(0, field.size(), util::StrCat("--repo ", o.repo));
      if (text.ends_with(": not a directory on the coordinator's machine")) {
        util::StrAppend(&text, " (", address, " resolves --repo paths there)");
      }
    }
  }
  static const std::pair<std::string_view, std::string_view> kFlags[] = {
      {"nightly_options.max_device_hours", "--max-device-hours"},
      {"nightly_options.pcc_margin", "--pcc-margin"},
      {"nightly_options.pcc_step", "--pcc-step"},
      {"nightly_options.pcc_far_below", "--pcc-far-below"},
      {"nightly_options.regression_runs", "--regression-runs"},
      {"nightly_options.promote_runs", "--promote-runs"},
      {"nightly_options.confirm", "--confirm"},
      {"repo_path", "--repo"},
      {"git_url", "--git-url"},
      {"git_ref", "--ref"},
      {"request_id", "--request-id"},
      {"max_attempts", "--max-attempts"},
      {"max_failed_shards", "--max-failed-shards"},
      {"agent_repo_url", "--agent-repo-url"},
      {"forge_ref", "--forge-ref"},
      {"allow_dirty", "--allow-dirty"},
      {"recheck_skipped", "--recheck-skipped"},
      {"selection.failing", "--failing"},
      {"selection.keys", "--keys"},
      {"selection.statuses", "--status"},
      {"selection.files", "--file"},
      {"selection.reason_regex", "--reason-regex"},
      {"selection.clusters", "--cluster"},
      {"selection.limit", "--limit"},
      {"selection.shared_paths", "--shared-path"},
      {"selection.no_fan_out", "--no-fan-out"},
      {"executor command", "--executor command"},
      {"playbooks", "--playbooks"},
      {"rules_yaml", "--rules"},
      {"durations_json", "--durations"},
      {"no_confirm", "--no-confirm"},
      {"max_device_hours", "--max-device-hours"},
  };
  for (const auto& [field, flag] : kFlags) text = ReplaceField(text, field, flag);
  return absl::Status(st.code(), text);
}

// A nightly sweep's request, checked before any run is read (a wrong --repo is said at once),
// then its runs uploaded: the exit code when either fails; nullopt when req names the upload.
std::optional<int> CheckAndUpload(Client& client, const FarmOptions& o, v1::StartSweepRequest& req,
                                  std::ostream& err) {
  v1::CheckSweepRequest check;
  *check.mutable_sweep() = req;
  check.set_nightly_to_come(true);
  v1::Sweep checked;
  grpc::Status st = client.Invoke(
      [&](grpc::ClientContext& ctx) { return client.stub()->CheckSweep(&ctx, check, &checked); },
      std::chrono::seconds(600));
  if (st.error_code() == grpc::StatusCode::UNIMPLEMENTED && st.error_message().empty()) {
    // No such method: an older coordinator, or not the control port at all.
    auto list = client.Call<v1::ListSweepsRequest, v1::ListSweepsResponse>(&Stub::ListSweeps, {});
    if (!list.ok()) return Error(err, list.status());
    err << "triagectl: the coordinator at " << o.conn.coordinator
        << " cannot take nightly runs in chunks (no CheckSweep, UploadNightly): it is older than "
           "this triagectl; upgrade it\n";
    return kExitUsage;
  }
  if (!st.ok()) return Error(err, InFlags(client.Describe(st), o, req, o.conn.coordinator));
  return UploadNightlyRuns(client, o, req, err);
}

}  // namespace

int RunSweepStart(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err) {
  v1::StartSweepRequest req;
  if (auto rc = BuildStartRequest(o, req, err)) return *rc;
  if (!o.nightly.empty() && !o.select.failing) {
    if (auto rc = CheckAndUpload(client, o, req, err)) return *rc;
  }
  auto sweep = client.Call<v1::StartSweepRequest, v1::Sweep>(&Stub::StartSweep, req,
                                                             std::chrono::seconds(600));
  if (!sweep.ok()) return Error(err, InFlags(sweep.status(), o, req, o.conn.coordinator));
  if (int rc = ShowSweep(sweep, o, out, err); rc != kExitOk) return rc;
  if (o.watch) {
    return Watch(client, sweep->id(), o.output == "json",
                 std::chrono::seconds(o.blocked_timeout_seconds), out, err);
  }
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
  return Watch(client, o.id, o.output == "json", std::chrono::seconds(o.blocked_timeout_seconds),
               out, err);
}

}  // namespace triage::ctl::farm
