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
#include "google/protobuf/util/json_util.h"

namespace triage::ctl::farm {
namespace {

std::string Duration(std::int64_t s) {
  if (s < 0) return "?";
  if (s < 60) return util::StrCat(s, "s");
  if (s < 3600) return util::StrCat(s / 60, "m", s % 60, "s");
  return util::StrCat(s / 3600, "h", (s % 3600) / 60, "m");
}

std::string Time(std::int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  std::time_t t = unix_ms / 1000;
  std::tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string Counts(const google::protobuf::Map<std::string, std::int32_t>& m) {
  std::vector<std::pair<std::string, int>> v(m.begin(), m.end());
  std::sort(v.begin(), v.end());
  std::string out;
  for (const auto& [k, n] : v) util::StrAppend(&out, out.empty() ? "" : " ", k, "=", n);
  return out.empty() ? "-" : out;
}

std::string Eta(std::int64_t seconds) { return seconds < 0 ? "unknown" : Duration(seconds); }

void PrintSweep(std::ostream& out, const v1::Sweep& s) {
  out << "sweep " << s.id() << "  " << s.state() << "\n";
  out << "  repo      " << s.repo() << "\n";
  out << "  commits   tt-xla " << s.ttxla_commit().substr(0, 12) << ", tt_forge_models "
      << s.forge_commit().substr(0, 12);
  if (!s.forge_gitlink_commit().empty() && s.forge_gitlink_commit() != s.forge_commit()) {
    out << " (" << (s.forge_source() == "ref" ? "--forge-ref" : "checked out")
        << "; tt-xla records " << s.forge_gitlink_commit().substr(0, 12) << ")";
  }
  out << "\n";
  for (const auto& n : s.notes()) out << "  note      " << n << "\n";
  out << "  playbooks " << util::StrJoin(s.playbooks(), ", ") << "   archs "
      << util::StrJoin(s.archs(), ", ") << "   executor " << s.executor() << "\n";
  const auto& e = s.entries();
  out << "  entries   " << e.decided() << "/" << e.total() << " decided, " << e.running()
      << " running, " << e.queued() << " queued   " << Counts(e.by_outcome())
      << "   review=" << e.review();
  if (e.conflicts() > 0) out << " conflicts=" << e.conflicts();
  out << "\n";
  out << "  shards    " << Counts(s.shards_by_state());
  if (s.max_failed_shards() > 0) {
    out << "   failed " << s.failed_shards() << " of a budget of " << s.max_failed_shards()
        << (s.over_budget() ? " (spent: not leasing)" : "");
  }
  out << "\n";
  if (s.has_carry()) {
    const auto& c = s.carry();
    if (c.base().empty()) {
      out << "  carried   nothing (no earlier succeeded sweep of this repository)\n";
    } else {
      out << "  carried   " << c.entries() << " entries, " << c.shards() << " shards of "
          << c.loaders() << " loaders from " << c.base() << "; " << c.rerun_loaders()
          << " loaders run\n";
    }
  }
  if (s.has_nightly()) {
    const auto& n = s.nightly();
    out << "  nightly   " << n.runs() << " runs on " << util::StrJoin(n.archs(), ", ") << ": "
        << n.records() << " records, " << n.mapped() << " mapped, " << n.unmapped() << " unmapped, "
        << n.duplicates() << " duplicates, " << n.contradictory() << " contradictory\n";
    out << "  candidates " << Counts(n.candidates()) << "   already=" << n.already()
        << " flagged=" << n.flagged() << " unconfirmed=" << n.unconfirmed() << "\n";
  }
  if (s.has_recheck()) {
    const auto& r = s.recheck();
    out << "  recheck   " << r.selected() << " of " << r.skipped()
        << " skipped entry-archs this sweep; " << r.checked_before()
        << " checked by earlier sweeps, " << r.never_checked() << " never checked, " << r.left()
        << " left for later";
    if (r.oldest_check_unix_ms() > 0) {
      out << "; oldest check left " << Time(r.oldest_check_unix_ms());
    }
    out << "\n";
  }
  if (!s.request_id().empty()) {
    out << "  request   " << s.request_id()
        << (s.existing() ? " (already started: this is the sweep it started)" : "") << "\n";
  }
  out << "  started   " << Time(s.created_unix_ms()) << " by " << s.created_by();
  if (s.finished_unix_ms() > 0) out << ", finished " << Time(s.finished_unix_ms());
  if (s.state() == "running") out << ", ETA " << Eta(s.eta_seconds());
  out << "\n";
  if (!s.error().empty()) out << "  error     " << s.error() << "\n";
  for (const auto& p : s.problems()) out << "  problem   " << p << "\n";
}

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

std::string ProgressLine(const v1::Sweep& s) {
  const auto& e = s.entries();
  const int width = 30;
  const int decided = e.decided();
  const int filled = e.total() > 0 ? decided * width / e.total() : 0;
  std::string bar =
      util::StrCat("[", std::string(filled, '#'), std::string(width - filled, '.'), "]");
  std::string line = util::StrCat(bar, " ", decided, "/", e.total(), " entries decided  ",
                                  Counts(e.by_outcome()), "  review=", e.review());
  if (e.conflicts() > 0) util::StrAppend(&line, " conflicts=", e.conflicts());
  util::StrAppend(&line, "  | shards ", Counts(s.shards_by_state()));
  if (s.state() == "running") {
    util::StrAppend(&line, "  | ETA ", Eta(s.eta_seconds()));
  } else if (s.over_budget()) {
    util::StrAppend(&line, "  | STOPPED: failure budget spent, needs a person (problems below)");
  } else if (s.state() == "blocked") {
    util::StrAppend(&line, "  | BLOCKED: needs a person (problems below)");
  } else {
    util::StrAppend(&line, "  | ", s.state());
  }
  return line;
}

// What `sweep watch` shows of each SweepEvent without -o json: progress lines, and the sweep's
// problems whenever they change.
class ProgressPrinter {
 public:
  ProgressPrinter(std::ostream& out, bool tty) : out_(out), tty_(tty) {}

  void Show(const v1::Sweep& s) {
    std::string line = ProgressLine(s);
    std::vector<std::string> problems(s.problems().begin(), s.problems().end());
    if (problems != shown_problems_) {
      if (tty_) out_ << "\r\033[K";
      for (const auto& p : problems) out_ << "problem: " << p << "\n";
      if (problems.empty() && !shown_problems_.empty()) out_ << "problems cleared\n";
      shown_problems_ = std::move(problems);
      last_key_.clear();
    }
    if (tty_) {
      out_ << "\r\033[K" << line << std::flush;
      return;
    }
    std::string key = util::StrCat(line.substr(0, line.find("  | shards")), " ", s.state());
    if (key != last_key_) out_ << line << "\n" << std::flush;
    last_key_ = std::move(key);
  }

 private:
  std::ostream& out_;
  const bool tty_;
  // Not a terminal (a log, CI): one line per change of entries or sweep state, not per shard move.
  std::string last_key_;
  std::vector<std::string> shown_problems_;
};

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
  for (const auto& s : r->sweeps()) {
    rows.push_back({s.id(), s.state(), Time(s.created_unix_ms()),
                    util::StrCat(s.entries().done(), "/", s.entries().total()),
                    util::StrJoin(s.playbooks(), ","), util::StrJoin(s.archs(), ","), s.repo()});
  }
  PrintTable(out, {"ID", "STATE", "STARTED", "DONE", "PLAYBOOKS", "ARCHS", "REPO"}, rows);
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
