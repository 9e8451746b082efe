#include "coordinator/triagectl/farm_cmd.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <iostream>

#include "CLI/CLI.hpp"
#include "common/config/config.h"
#include "common/git/git.h"
#include "common/rpc/rpc.h"
#include "common/util/file.h"
#include "common/util/strings.h"
#include "common/util/text.h"
#include "coordinator/triagectl/inventory_cmd.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "triage/v1/control.grpc.pb.h"

namespace triage::ctl {
namespace {

std::string Json(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, options);
  return out;
}

std::string Ago(std::int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  std::int64_t s = std::max<std::int64_t>(0, (now - unix_ms) / 1000);
  if (s < 120) return util::StrCat(s, "s");
  if (s < 7200) return util::StrCat(s / 60, "m");
  return util::StrCat(s / 3600, "h", (s % 3600) / 60, "m");
}

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

void PrintTable(std::ostream& out, const std::vector<std::string>& header,
                const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> w(header.size(), 0);
  for (std::size_t i = 0; i < header.size(); ++i) w[i] = header[i].size();
  for (const auto& r : rows) {
    for (std::size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], r[i].size());
  }
  auto line = [&](const std::vector<std::string>& r) {
    for (std::size_t i = 0; i < r.size(); ++i) {
      out << r[i];
      if (i + 1 < r.size()) out << std::string(w[i] - r[i].size() + 2, ' ');
    }
    out << "\n";
  };
  line(header);
  for (const auto& r : rows) line(r);
}

std::string Counts(const google::protobuf::Map<std::string, std::int32_t>& m) {
  std::vector<std::pair<std::string, int>> v(m.begin(), m.end());
  std::sort(v.begin(), v.end());
  std::string out;
  for (const auto& [k, n] : v) util::StrAppend(&out, out.empty() ? "" : " ", k, "=", n);
  return out.empty() ? "-" : out;
}

std::string PhaseName(v1::ShardPhase p) {
  switch (p) {
    case v1::PHASE_FULL:
      return "full";
    case v1::PHASE_PROBE:
      return "probe";
    case v1::PHASE_VERIFY:
      return "verify";
    default:
      return "-";
  }
}

// "diff --git" headers in a patch: the files it changes.
int CountPatchedFiles(std::string_view patch) {
  int n = 0;
  for (std::string_view line : util::SplitLines(patch)) n += line.starts_with("diff --git ");
  return n;
}

// Why path cannot be (or become) an output directory: it, or a directory above it, exists and
// is not a directory. "" when it can.
std::string OutDirProblem(const std::filesystem::path& path) {
  std::error_code ec;
  for (auto p = path; !p.empty(); p = p.parent_path()) {
    const auto st = std::filesystem::status(p, ec);
    if (std::filesystem::exists(st)) {
      if (std::filesystem::is_directory(st)) return "";
      const char* what = std::filesystem::is_regular_file(st) ? "is a file, not a directory"
                                                              : "is not a directory";
      return p == path ? std::string(what) : util::StrCat(p.string(), " ", what);
    }
    if (std::filesystem::is_symlink(std::filesystem::symlink_status(p, ec))) {
      return util::StrCat(p.string(), " is a dangling symbolic link");
    }
    if (p == p.parent_path()) break;
  }
  return "";
}

class Client {
 public:
  static absl::StatusOr<Client> Connect(const Connection& c) {
    Client client;
    client.token_ = c.token;
    if (!c.token_file.empty()) {
      auto t = util::ReadFile(c.token_file, 4096);
      if (!t.ok()) return t.status();
      client.token_ = std::string(util::TrimWhitespace(*t));
    }
    rpc::TlsClientConfig tls{c.tls_ca, c.tls_cert, c.tls_key, c.insecure};
    tls.ca_flag = "--tls-ca";
    tls.cert_flag = "--tls-cert";
    tls.key_flag = "--tls-key";
    auto channel = rpc::Connect(c.coordinator, tls);
    if (!channel.ok()) return channel.status();
    client.stub_ = v1::ControlService::NewStub(*channel);
    client.address_ = c.coordinator;
    client.insecure_ = c.insecure;
    return client;
  }

  template <typename Req, typename Resp, typename Method>
  absl::StatusOr<Resp> Call(Method method, const Req& req,
                            std::chrono::seconds timeout = std::chrono::seconds(60)) {
    grpc::ClientContext ctx;
    rpc::AddBearer(ctx, token_);
    ctx.set_deadline(std::chrono::system_clock::now() + timeout);
    Resp resp;
    grpc::Status st = (stub_.get()->*method)(&ctx, req, &resp);
    if (!st.ok()) return Describe(st);
    return resp;
  }

  // A failed call's status, with the likely cause (wrong port, TLS on one side only).
  absl::Status Describe(const grpc::Status& st) const {
    return rpc::DescribeCallError(rpc::FromGrpc(st), address_, rpc::Service::kControl, insecure_);
  }

  v1::ControlService::Stub* stub() { return stub_.get(); }
  const std::string& token() const { return token_; }

 private:
  std::unique_ptr<v1::ControlService::Stub> stub_;
  std::string token_;
  std::string address_;
  bool insecure_ = false;
};

int Error(std::ostream& err, const absl::Status& st) {
  err << "triagectl: " << st.message() << "\n";
  switch (st.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      return kExitProblems;
    default:
      return kExitUsage;
  }
}

std::string Eta(std::int64_t seconds) { return seconds < 0 ? "unknown" : Duration(seconds); }

// Entries with a decision (done ones that ended without a result do not fill the bar).
int Decided(const v1::EntryCounts& e) {
  auto none = e.by_outcome().find("no_result");
  return e.done() - (none == e.by_outcome().end() ? 0 : none->second);
}

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
  out << "  entries   " << Decided(e) << "/" << e.total() << " decided, " << e.running()
      << " running, " << e.queued() << " queued   " << Counts(e.by_outcome())
      << "   review=" << e.review();
  if (e.conflicts() > 0) out << " conflicts=" << e.conflicts();
  out << "\n";
  out << "  shards    " << Counts(s.shards_by_state()) << "\n";
  out << "  started   " << Time(s.created_unix_ms()) << " by " << s.created_by();
  if (s.finished_unix_ms() > 0) out << ", finished " << Time(s.finished_unix_ms());
  if (s.state() == "running") out << ", ETA " << Eta(s.eta_seconds());
  out << "\n";
  if (!s.error().empty()) out << "  error     " << s.error() << "\n";
  for (const auto& p : s.problems()) out << "  problem   " << p << "\n";
}

std::string ProgressLine(const v1::Sweep& s) {
  const auto& e = s.entries();
  const int width = 30;
  const int decided = Decided(e);
  const int filled = e.total() > 0 ? decided * width / e.total() : 0;
  std::string bar =
      util::StrCat("[", std::string(filled, '#'), std::string(width - filled, '.'), "]");
  std::string line = util::StrCat(bar, " ", decided, "/", e.total(), " entries decided  ",
                                  Counts(e.by_outcome()), "  review=", e.review());
  if (e.conflicts() > 0) util::StrAppend(&line, " conflicts=", e.conflicts());
  util::StrAppend(&line, "  | shards ", Counts(s.shards_by_state()));
  if (s.state() == "running") {
    util::StrAppend(&line, "  | ETA ", Eta(s.eta_seconds()));
  } else if (s.state() == "blocked") {
    util::StrAppend(&line, "  | BLOCKED: needs a person (problems below)");
  } else {
    util::StrAppend(&line, "  | ", s.state());
  }
  return line;
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
  // Not a terminal (a log, CI): one line per change of entries or sweep state, not per shard move.
  std::string last_key;
  std::vector<std::string> shown_problems;
  while (reader->Read(&ev)) {
    last = ev.sweep();
    if (json) {
      std::string one;
      google::protobuf::util::JsonPrintOptions options;
      options.preserve_proto_field_names = true;
      options.always_print_primitive_fields = true;
      (void)google::protobuf::util::MessageToJsonString(ev, &one, options);
      out << one << "\n" << std::flush;
      continue;
    }
    std::string line = ProgressLine(last);
    std::vector<std::string> problems(last.problems().begin(), last.problems().end());
    if (problems != shown_problems) {
      if (tty) out << "\r\033[K";
      for (const auto& p : problems) out << "problem: " << p << "\n";
      if (problems.empty() && !shown_problems.empty()) out << "problems cleared\n";
      shown_problems = std::move(problems);
      last_key.clear();
    }
    if (tty) {
      out << "\r\033[K" << line << std::flush;
      continue;
    }
    std::string key = util::StrCat(line.substr(0, line.find("  | shards")), " ", last.state());
    if (key != last_key) out << line << "\n" << std::flush;
    last_key = std::move(key);
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

// `sweep apply`: both patches onto a clean checkout at the sweep's commits; nothing committed.
int ApplyPatches(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err) {
  const bool json = o.output == "json";
  nlohmann::json applied = nlohmann::json::array();
  v1::GetPatchRequest req;
  req.set_sweep_id(o.id);
  auto p = client.Call<v1::GetPatchRequest, v1::Patch>(&v1::ControlService::Stub::GetPatch, req);
  if (!p.ok()) return Error(err, p.status());
  const std::filesystem::path repo = o.repo;
  const std::filesystem::path forge = repo / git::kForgeSubmodulePath;
  // Refuse anything but a clean checkout at exactly the sweep's commits. The submodule's
  // gitlink may differ from its HEAD (a sweep of a moved submodule leaves tt-xla showing
  // `M third_party/tt_forge_models`): what counts is that its HEAD is the sweep's commit.
  for (const auto& [dir, commit, name] :
       {std::tuple{repo, p->ttxla_commit(), "tt-xla"},
        std::tuple{forge, p->forge_commit(), "tt_forge_models"}}) {
    const git::Git g(dir);
    auto head = g.RevParse("HEAD");
    if (!head.ok()) {
      err << "triagectl: " << dir.string()
          << " is not a git checkout: " << util::MessageOf(head.status()) << "\n";
      return kExitProblems;
    }
    if (*head != commit) {
      err << "triagectl: " << name << " in " << dir.string() << " is at " << head->substr(0, 12)
          << ", the sweep read " << commit.substr(0, 12) << ": check out the sweep's commits first"
          << " (git -C " << dir.string() << " checkout " << commit << ")\n";
      return kExitProblems;
    }
    auto changes = g.WorkTreeChanges();
    if (!changes.ok()) return Error(err, changes.status());
    if (!changes->empty()) {
      err << "triagectl: " << name << " checkout " << dir.string()
          << " has local changes; apply needs a clean tree:\n";
      for (const auto& c : *changes) err << "  " << c << "\n";
      return kExitProblems;
    }
  }
  std::string tmpl = (std::filesystem::temp_directory_path() / "triage-apply-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    return Error(err, absl::FailedPreconditionError(
                          util::StrCat("cannot create a temporary directory: ", strerror(errno))));
  }
  const std::filesystem::path tmp = tmpl;
  struct Step {
    std::filesystem::path dir;
    std::string patch;
    std::string name;
  };
  const Step steps[] = {{repo, p->ttxla_patch(), "tt-xla.patch"},
                        {forge, p->forge_patch(), "tt-forge-models.patch"}};
  auto fail = [&](const std::string& message) {
    std::error_code ec;
    std::filesystem::remove_all(tmp, ec);
    err << "triagectl: " << message;
    return kExitProblems;
  };
  // Check both before changing either.
  for (const auto& s : steps) {
    if (s.patch.empty()) continue;
    if (auto st = util::WriteFileAtomic(tmp / s.name, s.patch); !st.ok()) {
      return fail(util::StrCat(util::MessageOf(st), "\n"));
    }
    if (auto r = git::Git(s.dir).Run({"apply", "--check", (tmp / s.name).string()}); !r.ok()) {
      return fail(util::StrCat(s.name, " does not apply to ", s.dir.string(), ":\n",
                               util::MessageOf(r.status()), "\n"));
    }
  }
  for (const auto& s : steps) {
    if (s.patch.empty()) continue;
    if (auto r = git::Git(s.dir).Run({"apply", (tmp / s.name).string()}); !r.ok()) {
      return fail(
          util::StrCat("applying ", s.name, " failed:\n", util::MessageOf(r.status()), "\n"));
    }
    if (!json) out << "applied " << s.name << " to " << s.dir.string() << "\n";
    applied.push_back({{"patch", s.name}, {"repo", s.dir.string()}});
  }
  std::error_code ec;
  std::filesystem::remove_all(tmp, ec);
  if (!p->partial().empty()) err << "triagectl: warning: partial patches: " << p->partial() << "\n";
  if (json) {
    out << nlohmann::json{{"sweep", p->sweep_id()},
                          {"applied", applied},
                          {"partial", p->partial().empty() ? nlohmann::json(nullptr)
                                                           : nlohmann::json(p->partial())},
                          {"committed", false}}
               .dump(2)
        << "\n";
  } else {
    out << "nothing was committed: review with `git diff` in both repositories\n";
  }
  return kExitOk;
}

}  // namespace

void FarmCommands::Register(CLI::App& app) {
  // Environment: TRIAGECTL_* only (the daemons read TRIAGE_COORDINATOR_* and TRIAGE_AGENT_*). An
  // old-style TRIAGE_* variable of these flags is reported once and not used.
  auto conn = [&](CLI::App* c) {
    static constexpr std::pair<const char*, const char*> kEnv[] = {
        {"TRIAGE_COORDINATOR", "TRIAGECTL_SERVER"},    {"TRIAGE_TOKEN", "TRIAGECTL_TOKEN"},
        {"TRIAGE_TOKEN_FILE", "TRIAGECTL_TOKEN_FILE"}, {"TRIAGE_TLS_CA", "TRIAGECTL_TLS_CA"},
        {"TRIAGE_TLS_CERT", "TRIAGECTL_TLS_CERT"},     {"TRIAGE_TLS_KEY", "TRIAGECTL_TLS_KEY"},
        {"TRIAGE_INSECURE", "TRIAGECTL_INSECURE"}};
    c->add_option("--coordinator", o_.conn.coordinator, "Control address host:port")
        ->envname("TRIAGECTL_SERVER")
        ->capture_default_str();
    c->add_option("--token", o_.conn.token, "Bearer token")->envname("TRIAGECTL_TOKEN");
    c->add_option("--token-file", o_.conn.token_file, "File holding the bearer token")
        ->envname("TRIAGECTL_TOKEN_FILE");
    c->add_option("--tls-ca", o_.conn.tls_ca, "PEM CA of the coordinator")
        ->envname("TRIAGECTL_TLS_CA");
    c->add_option("--tls-cert", o_.conn.tls_cert, "Client certificate (mutual TLS)")
        ->envname("TRIAGECTL_TLS_CERT");
    c->add_option("--tls-key", o_.conn.tls_key, "Client key (mutual TLS)")
        ->envname("TRIAGECTL_TLS_KEY");
    c->add_flag("--insecure", o_.conn.insecure, "Plaintext gRPC")->envname("TRIAGECTL_INSECURE");
    c->add_option("-o,--output", o_.output, "table or json")->capture_default_str();
    c->parse_complete_callback([] {
      for (const auto& [old_name, new_name] : kEnv) {
        if (std::getenv(old_name) != nullptr && std::getenv(new_name) == nullptr) {
          std::cerr << "triagectl: warning: " << config::LegacyEnvWarning(old_name, new_name)
                    << "\n";
        }
      }
    });
  };
  auto* sweep = app.add_subcommand("sweep", "Start, follow and manage sweeps");
  sweep->require_subcommand(1);
  auto* start = sweep->add_subcommand("start", "Start a sweep over a tt-xla checkout");
  conn(start);
  start->add_option("--repo", o_.repo, "tt-xla checkout visible to the coordinator (read at HEAD)");
  start->add_option("--git-url", o_.git_url, "Or a git URL the coordinator fetches");
  start->add_option("--ref", o_.git_ref, "Branch, tag or sha for --git-url (default HEAD)");
  start->add_option("--playbooks", o_.playbooks, "Playbooks (default: all)")->delimiter(',');
  start->add_option("--arch", o_.archs, "Target archs, e.g. n150,p150 (default n150)")
      ->delimiter(',');
  start->add_option("--durations", o_.durations, "pytest-split .test_durations file")
      ->check(CLI::ExistingFile);
  start->add_option("--executor", o_.executor, "native (default), command or replay");
  start->add_option("--command", o_.command,
                    "command executor: JSON argv array, e.g. '[\"tool\",\"{key}\"]'");
  start->add_option("--per", o_.per, "command executor: run per entry (default) or shard");
  start->add_option("--param", o_.params, "Executor parameter key=value (repeatable)");
  start->add_option("--priority", o_.priority, "Higher runs first");
  start->add_option("--max-attempts", o_.max_attempts, "Attempts before quarantine (1..1000)")
      ->check(CLI::Range(1, 1000));
  start->add_option("--reason", o_.reason, "Why (audit log)");
  start->add_option("--rules", o_.rules, "Classification rules YAML")->check(CLI::ExistingFile);
  start->add_option("--agent-repo-url", o_.agent_repo_url,
                    "Where agents fetch the commits (default: the repo's origin)");
  start->add_option("--forge-ref", o_.forge_ref,
                    "tt-forge-models branch, tag or sha to sweep (default: the submodule's "
                    "checked-out HEAD for --repo, the recorded gitlink for --git-url)");
  start->add_flag("--allow-dirty", o_.allow_dirty,
                  "--repo with local changes: sweep the HEAD commits without them (default: "
                  "refuse, listing the changed paths)");
  start->add_flag("--watch", o_.watch, "Follow the sweep until it ends");
  cmds_["sweep start"] = start;
  auto* list = sweep->add_subcommand("list", "List sweeps");
  conn(list);
  cmds_["sweep list"] = list;
  auto* status = sweep->add_subcommand("status", "Show a sweep (alias: get)");
  status->alias("get");
  conn(status);
  status->add_option("ID", o_.id, "Sweep id")->required();
  cmds_["sweep status"] = status;
  auto* watch = sweep->add_subcommand(
      "watch", "Follow a sweep with a progress bar; exit 0 if it succeeds, 1 if it fails");
  conn(watch);
  watch->add_option("ID", o_.id, "Sweep id")->required();
  cmds_["sweep watch"] = watch;
  auto* cancel = sweep->add_subcommand("cancel", "Cancel a running sweep");
  conn(cancel);
  cancel->add_option("ID", o_.id, "Sweep id")->required();
  cancel->add_option("--reason", o_.reason, "Why (audit log)")->required();
  cmds_["sweep cancel"] = cancel;
  auto* patch = sweep->add_subcommand("patch", "Write tt-xla.patch and tt-forge-models.patch");
  conn(patch);
  patch->add_option("ID", o_.id, "Sweep id")->required();
  patch->add_option("--out", o_.out_dir, "Output directory")->required();
  cmds_["sweep patch"] = patch;
  auto* apply = sweep->add_subcommand(
      "apply", "Apply both patches to a clean checkout at the sweep's commits (never commits)");
  conn(apply);
  apply->add_option("ID", o_.id, "Sweep id")->required();
  apply->add_option("--repo", o_.repo, "The tt-xla checkout (with its submodule)")->required();
  cmds_["sweep apply"] = apply;
  auto* report = sweep->add_subcommand("report", "Write report.md and report.json");
  conn(report);
  report->add_option("ID", o_.id, "Sweep id")->required();
  report->add_option("--out", o_.out_dir, "Output directory (default: .)");
  cmds_["sweep report"] = report;

  auto* shards = app.add_subcommand("shards", "List shards");
  shards->require_subcommand(1);
  auto* shards_list = shards->add_subcommand("list", "List shards (filters combine)");
  conn(shards_list);
  shards_list->add_option("--sweep", o_.sweep, "Only this sweep");
  shards_list->add_option("--state", o_.state,
                          "waiting, queued, leased, running, succeeded, failed, quarantined, "
                          "cancelled");
  shards_list->add_flag("--stuck", o_.stuck,
                        "Only leased/running shards without progress for --stuck-minutes");
  shards_list
      ->add_option("--stuck-minutes", o_.stuck_minutes,
                   "Threshold for --stuck, > 0 (implies --stuck)")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            char* end = nullptr;
            const double x = std::strtod(v.c_str(), &end);
            if (v.empty() || *end != '\0' || !(x > 0) || x > 525600.0) {
              return "must be a number of minutes above 0 (at most a year), got " + v;
            }
            return "";
          },
          "MINUTES > 0"));
  cmds_["shards list"] = shards_list;

  auto* shard = app.add_subcommand("shard", "Act on one shard");
  shard->require_subcommand(1);
  auto* requeue = shard->add_subcommand("requeue", "Put a shard back in the queue");
  conn(requeue);
  requeue->add_option("ID", o_.id, "Shard id")->required();
  requeue->add_option("--reason", o_.reason, "Why (audit log)")->required();
  cmds_["shard requeue"] = requeue;
  auto* shard_cancel = shard->add_subcommand("cancel", "Cancel a shard");
  conn(shard_cancel);
  shard_cancel->add_option("ID", o_.id, "Shard id")->required();
  shard_cancel->add_option("--reason", o_.reason, "Why (audit log)");
  cmds_["shard cancel"] = shard_cancel;

  auto* agents = app.add_subcommand("agents", "List and drain agents");
  agents->require_subcommand(1);
  auto* agents_list = agents->add_subcommand("list", "List agents");
  conn(agents_list);
  cmds_["agents list"] = agents_list;
  auto* drain = agents->add_subcommand("drain", "Finish the current shard, then hand out nothing");
  conn(drain);
  drain->add_option("ID", o_.id, "Agent id")->required();
  drain->add_option("--reason", o_.reason, "Why (audit log)")->required();
  cmds_["agents drain"] = drain;
  auto* undrain = agents->add_subcommand("undrain", "Hand out shards again");
  conn(undrain);
  undrain->add_option("ID", o_.id, "Agent id")->required();
  undrain->add_option("--reason", o_.reason, "Why (audit log)");
  cmds_["agents undrain"] = undrain;
}

int FarmCommands::Run(std::ostream& out, std::ostream& err) {
  std::string which;
  for (const auto& [name, cmd] : cmds_) {
    if (cmd->parsed()) which = name;
  }
  if (which.empty()) return -1;
  if (o_.output != "table" && o_.output != "json") {
    err << "triagectl: -o must be table or json\n";
    return kExitUsage;
  }
  if (which == "sweep patch" || which == "sweep report") {
    // Checked before asking the coordinator: an output path that cannot be a directory.
    if (std::string problem = OutDirProblem(o_.out_dir.empty() ? "." : o_.out_dir);
        !problem.empty()) {
      err << "triagectl: --out " << o_.out_dir << ": " << problem << "\n";
      return kExitUsage;
    }
  }
  auto client = Client::Connect(o_.conn);
  if (!client.ok()) return Error(err, client.status());
  const bool json = o_.output == "json";
  using S = v1::ControlService::Stub;

  if (which == "sweep start") {
    v1::StartSweepRequest req;
    if (o_.repo.empty() == o_.git_url.empty()) {
      err << "triagectl: give exactly one of --repo or --git-url\n";
      return kExitUsage;
    }
    if (!o_.repo.empty()) {
      std::error_code ec;
      req.set_repo_path(std::filesystem::absolute(o_.repo, ec).string());
    }
    req.set_git_url(o_.git_url);
    req.set_git_ref(o_.git_ref);
    for (const auto& p : o_.playbooks) req.add_playbooks(p);
    for (const auto& a : o_.archs) req.add_archs(a);
    if (!o_.durations.empty()) {
      auto d = util::ReadFile(o_.durations, 64 << 20);
      if (!d.ok()) return Error(err, d.status());
      req.set_durations_json(*d);
    }
    req.set_executor(o_.executor);
    if (!o_.command.empty()) (*req.mutable_params())["command"] = o_.command;
    if (!o_.per.empty()) (*req.mutable_params())["per"] = o_.per;
    for (const auto& kv : o_.params) {
      auto eq = kv.find('=');
      if (eq == std::string::npos) {
        err << "triagectl: --param must be key=value, got '" << kv << "'\n";
        return kExitUsage;
      }
      (*req.mutable_params())[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    req.set_priority(o_.priority);
    req.set_max_attempts(o_.max_attempts);
    req.set_reason(o_.reason);
    req.set_agent_repo_url(o_.agent_repo_url);
    req.set_forge_ref(o_.forge_ref);
    req.set_allow_dirty(o_.allow_dirty);
    if (o_.allow_dirty && o_.repo.empty()) {
      err << "triagectl: --allow-dirty is for --repo (a --git-url sweep reads commits only)\n";
      return kExitUsage;
    }
    if (!o_.rules.empty()) {
      auto r = util::ReadFile(o_.rules, 1 << 20);
      if (!r.ok()) return Error(err, r.status());
      req.set_rules_yaml(*r);
    }
    auto sweep = client->Call<v1::StartSweepRequest, v1::Sweep>(&S::StartSweep, req,
                                                                std::chrono::seconds(600));
    if (!sweep.ok()) return Error(err, sweep.status());
    if (json) {
      out << Json(*sweep) << "\n";
    } else {
      PrintSweep(out, *sweep);
    }
    if (o_.watch) return Watch(*client, sweep->id(), json, out, err);
    return kExitOk;
  }
  if (which == "sweep list") {
    auto r = client->Call<v1::ListSweepsRequest, v1::ListSweepsResponse>(&S::ListSweeps, {});
    if (!r.ok()) return Error(err, r.status());
    if (json) {
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
  if (which == "sweep status" || which == "sweep cancel") {
    absl::StatusOr<v1::Sweep> r = absl::UnknownError("");
    if (which == "sweep status") {
      v1::GetSweepRequest req;
      req.set_sweep_id(o_.id);
      r = client->Call<v1::GetSweepRequest, v1::Sweep>(&S::GetSweep, req);
    } else {
      v1::CancelSweepRequest req;
      req.set_sweep_id(o_.id);
      req.set_reason(o_.reason);
      r = client->Call<v1::CancelSweepRequest, v1::Sweep>(&S::CancelSweep, req);
    }
    if (!r.ok()) return Error(err, r.status());
    if (json) {
      out << Json(*r) << "\n";
    } else {
      PrintSweep(out, *r);
    }
    return kExitOk;
  }
  if (which == "sweep watch") return Watch(*client, o_.id, json, out, err);
  if (which == "sweep patch" || which == "sweep report") {
    std::filesystem::path dir = o_.out_dir.empty() ? "." : o_.out_dir;
    std::error_code ec;
    // Made once the coordinator has answered: a refused request leaves nothing behind.
    auto make_dir = [&]() -> absl::Status {
      std::filesystem::create_directories(dir, ec);
      if (ec) {
        return absl::InvalidArgumentError(
            util::StrCat("--out ", dir.string(), ": cannot create the directory: ", ec.message()));
      }
      return absl::OkStatus();
    };
    if (which == "sweep patch") {
      v1::GetPatchRequest req;
      req.set_sweep_id(o_.id);
      auto p = client->Call<v1::GetPatchRequest, v1::Patch>(&S::GetPatch, req);
      if (!p.ok()) return Error(err, p.status());
      if (auto st = make_dir(); !st.ok()) return Error(err, st);
      nlohmann::json written = nlohmann::json::array();
      for (const auto& [name, text] : {std::pair{"tt-xla.patch", p->ttxla_patch()},
                                       std::pair{"tt-forge-models.patch", p->forge_patch()}}) {
        if (auto st = util::WriteFileAtomic(dir / name, text); !st.ok()) return Error(err, st);
        written.push_back({{"path", (dir / name).string()},
                           {"bytes", text.size()},
                           {"files", CountPatchedFiles(text)}});
        if (!json) out << (dir / name).string() << "\n";
      }
      for (const auto& c : p->conflicts()) err << "conflict: " << c << "\n";
      if (!p->partial().empty())
        err << "triagectl: warning: partial patches: " << p->partial() << "\n";
      if (json) {
        nlohmann::json j = {
            {"sweep", p->sweep_id()},
            {"state", p->sweep_state()},
            {"partial",
             p->partial().empty() ? nlohmann::json(nullptr) : nlohmann::json(p->partial())},
            {"commits", {{"tt-xla", p->ttxla_commit()}, {"tt_forge_models", p->forge_commit()}}},
            {"written", written},
            {"conflicts", p->conflicts()}};
        out << j.dump(2) << "\n";
      }
      return kExitOk;
    }
    v1::GetReportRequest req;
    req.set_sweep_id(o_.id);
    auto r = client->Call<v1::GetReportRequest, v1::Report>(&S::GetReport, req);
    if (!r.ok()) return Error(err, r.status());
    if (auto st = make_dir(); !st.ok()) return Error(err, st);
    nlohmann::json written = nlohmann::json::array();
    for (const auto& [name, text] :
         {std::pair{"report.md", r->markdown()}, std::pair{"report.json", r->json()}}) {
      if (auto st = util::WriteFileAtomic(dir / name, text); !st.ok()) return Error(err, st);
      written.push_back((dir / name).string());
      if (!json) out << (dir / name).string() << "\n";
    }
    int evidence = 0;
    for (const auto& f : r->files()) {
      const std::string& name = f.name();
      if (!name.starts_with("evidence/") || name.find("..") != std::string::npos) continue;
      std::filesystem::create_directories((dir / name).parent_path(), ec);
      if (auto st = util::WriteFileAtomic(dir / name, f.content()); !st.ok()) return Error(err, st);
      ++evidence;
    }
    if (evidence > 0 && !json) {
      out << (dir / "evidence").string() << "/ (" << evidence << " files)\n";
    }
    const nlohmann::json report = nlohmann::json::parse(r->json(), nullptr, false);
    const auto field = [&](const char* name) {
      return report.is_object() && report.contains(name) ? report[name] : nlohmann::json(nullptr);
    };
    if (!field("partial").is_null()) {
      err << "triagectl: warning: partial report: " << field("partial").get<std::string>() << "\n";
    }
    if (json) {
      nlohmann::json j = {{"sweep", r->sweep_id()},
                          {"state", field("state")},
                          {"partial", field("partial")},
                          {"written", written},
                          {"evidence_dir", (dir / "evidence").string()},
                          {"evidence_files", evidence},
                          {"totals", field("totals")}};
      out << j.dump(2) << "\n";
    }
    return kExitOk;
  }
  if (which == "sweep apply") return ApplyPatches(*client, o_, out, err);
  if (which == "shards list") {
    v1::ListShardsRequest req;
    req.set_sweep_id(o_.sweep);
    req.set_state(o_.state);
    if (o_.stuck || o_.stuck_minutes != FarmOptions{}.stuck_minutes) {
      // Whole seconds, at least one: 0 would mean "no filter" and list every shard.
      req.set_stuck_seconds(
          std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(o_.stuck_minutes * 60))));
    }
    auto r = client->Call<v1::ListShardsRequest, v1::ListShardsResponse>(&S::ListShards, req);
    if (!r.ok()) return Error(err, r.status());
    if (json) {
      out << Json(*r) << "\n";
      return kExitOk;
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& s : r->shards()) {
      std::string loader = s.loader();
      if (auto p = loader.find("tt_forge_models/"); p != std::string::npos)
        loader = loader.substr(p + 16);
      rows.push_back({s.id(), s.state(), s.playbook(), PhaseName(s.phase()),
                      s.arch().empty() ? "cpu" : s.arch(), std::to_string(s.keys_size()),
                      std::to_string(s.attempts()), s.agent_id().empty() ? "-" : s.agent_id(),
                      s.last_step().empty() ? "-" : s.last_step(),
                      s.agent_id().empty() ? "-" : Ago(s.last_progress_unix_ms()), loader});
    }
    PrintTable(out,
               {"SHARD", "STATE", "PLAYBOOK", "PHASE", "ARCH", "ENTRIES", "ATTEMPTS", "AGENT",
                "LAST STEP", "IDLE", "LOADER"},
               rows);
    if (req.stuck_seconds() > 0 && !r->shards().empty()) {
      out << "\nrequeue with: triagectl shard requeue SHARD --reason '...'\n";
    }
    return kExitOk;
  }
  if (which == "shard requeue" || which == "shard cancel") {
    v1::ShardActionRequest req;
    req.set_shard_id(o_.id);
    req.set_reason(o_.reason);
    auto r = which == "shard requeue"
                 ? client->Call<v1::ShardActionRequest, v1::Shard>(&S::RequeueShard, req)
                 : client->Call<v1::ShardActionRequest, v1::Shard>(&S::CancelShard, req);
    if (!r.ok()) return Error(err, r.status());
    if (json) {
      out << Json(*r) << "\n";
    } else {
      out << "shard " << r->id() << ": " << r->state() << "\n";
    }
    return kExitOk;
  }
  if (which == "agents list") {
    auto r = client->Call<v1::ListAgentsRequest, v1::ListAgentsResponse>(&S::ListAgents, {});
    if (!r.ok()) return Error(err, r.status());
    if (json) {
      out << Json(*r) << "\n";
      return kExitOk;
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& a : r->agents()) {
      const auto& d = a.dimensions();
      rows.push_back({d.agent_id(), a.state(), d.cpu_only() ? "cpu" : d.arch(),
                      std::to_string(d.device_count()), d.pool(), util::StrJoin(d.executors(), ","),
                      Ago(a.last_heartbeat_unix_ms()),
                      a.shard_ids().empty() ? "-" : util::StrJoin(a.shard_ids(), ",")});
    }
    PrintTable(out,
               {"AGENT", "STATE", "ARCH", "DEVICES", "POOL", "EXECUTORS", "HEARTBEAT", "SHARDS"},
               rows);
    return kExitOk;
  }
  if (which == "agents drain" || which == "agents undrain") {
    v1::AgentActionRequest req;
    req.set_agent_id(o_.id);
    req.set_reason(o_.reason);
    auto r = which == "agents drain"
                 ? client->Call<v1::AgentActionRequest, v1::Agent>(&S::DrainAgent, req)
                 : client->Call<v1::AgentActionRequest, v1::Agent>(&S::UndrainAgent, req);
    if (!r.ok()) return Error(err, r.status());
    if (json) {
      out << Json(*r) << "\n";
    } else {
      out << "agent " << r->dimensions().agent_id() << ": " << r->state() << "\n";
    }
    return kExitOk;
  }
  return -1;
}

}  // namespace triage::ctl
