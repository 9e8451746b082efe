#include "agent/core/agent.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <thread>

#include "agent/workspace/workspace.h"
#include "common/util/file.h"
#include "common/util/log.h"
#include "common/util/log_context.h"
#include "common/util/strings.h"

namespace triage::agent {
namespace {

std::string RandomId() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return util::Hex(rng(), 16);
}

bool Definitive(const absl::Status& st) { return st.ok() || !rpc::IsRetryable(st); }

}  // namespace

Agent::Agent(AgentOptions options, CoordinatorClient* client, workspace::Workspace* workspace,
             std::map<std::string, Executor*> executors, AgentMetrics* metrics)
    : options_(std::move(options)),
      client_(client),
      workspace_(workspace),
      executors_(std::move(executors)),
      metrics_(metrics != nullptr ? metrics : &default_metrics_) {
  for (const auto& [name, e] : executors_) {
    bool listed = false;
    for (const auto& x : options_.dimensions.executors()) listed |= x == name;
    if (!listed) options_.dimensions.add_executors(name);
  }
}

Agent::~Agent() {
  Stop();
  if (heartbeat_.joinable()) heartbeat_.join();
}

void Agent::Stop() {
  stop_.store(true);
  cancel_current_.store(true);
  // Taken once so that a SleepFor between its check of stop_ and its wait cannot miss the wake.
  { std::lock_guard lock(mu_); }
  cv_.notify_all();
  client_->CancelWaits();  // a Lease long-poll would otherwise hold the exit for its wait
}

std::string Agent::session() const {
  std::lock_guard lock(mu_);
  return session_;
}

void Agent::SleepFor(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  options_.clock->WaitFor(cv_, lock, d, [this] { return Stopping(); });
}

absl::Status Agent::RetryCall(const std::function<absl::Status()>& call) {
  return rpc::Retry(
      options_.retry, call, [this] { return Stopping(); },
      [this](std::chrono::milliseconds d) { SleepFor(d); });
}

absl::Status Agent::RegisterWithRetry() {
  v1::RegisterRequest req;
  *req.mutable_dimensions() = options_.dimensions;
  req.set_resume_session_id(session());
  {
    std::lock_guard lock(mu_);
    for (const auto& id : undelivered_) req.add_held_lease_ids(id);
  }
  absl::StatusOr<v1::RegisterResponse> resp = absl::UnavailableError("not tried");
  absl::Status st = RetryCall([&] {
    resp = client_->Register(req);
    if (!resp.ok()) spdlog::warn("register: {}", resp.status().message());
    return resp.status();
  });
  if (!st.ok()) return st;
  std::lock_guard lock(mu_);
  if (!resp->resumed() && !session_.empty()) {
    spdlog::warn("coordinator gave a new session: earlier leases are fenced");
    if (!current_leases_.empty()) cancel_current_.store(true);
  }
  session_ = resp->session_id();
  if (resp->heartbeat_interval_ms() > 0) {
    heartbeat_interval_ = std::chrono::milliseconds(resp->heartbeat_interval_ms());
  }
  reregister_ = false;
  spdlog::info("registered as {} ({}), session {}", options_.dimensions.agent_id(),
               options_.dimensions.cpu_only() ? "cpu only" : options_.dimensions.arch(), session_);
  return absl::OkStatus();
}

bool Agent::CheckRunner(std::string_view why) {
  if (!options_.runner_check) return false;
  const std::string problem = options_.runner_check([this] { return Stopping(); });
  if (Stopping()) return false;
  std::lock_guard lock(mu_);
  const bool changed = problem != options_.dimensions.runner_problem();
  options_.dimensions.set_runner_problem(problem);
  next_runner_check_ = options_.clock->Now() + options_.runner_recheck;
  if (!problem.empty()) {
    spdlog::warn(
        "runner check ({}): this agent cannot run tt-xla's runner: {}; it is leased no "
        "native work until a check passes (again in {} s)",
        why, problem,
        std::chrono::duration_cast<std::chrono::seconds>(options_.runner_recheck).count());
  } else if (changed) {
    spdlog::info("runner check ({}): the runner runs again", why);
  } else {
    spdlog::info("runner check ({}): the runner runs", why);
  }
  return changed;
}

bool Agent::RecheckRunner() {
  if (!options_.runner_check) return false;
  if (unattributed_failure_.exchange(false)) return CheckRunner("after a failed attempt");
  bool due;
  {
    std::lock_guard lock(mu_);
    due = !options_.dimensions.runner_problem().empty() &&
          options_.clock->Now() >= next_runner_check_;
  }
  return due && CheckRunner("periodic, while it fails");
}

void Agent::HeartbeatLoop() {
  while (!Stopping()) {
    std::chrono::milliseconds interval;
    v1::HeartbeatRequest req;
    {
      std::lock_guard lock(mu_);
      interval = heartbeat_interval_;
      req.set_agent_id(options_.dimensions.agent_id());
      req.set_session_id(session_);
      for (const auto& id : current_leases_) req.add_lease_ids(id);
      for (const auto& id : undelivered_) {
        if (!current_leases_.count(id)) req.add_lease_ids(id);
      }
    }
    auto resp = client_->Heartbeat(req);
    if (resp.ok()) {
      std::lock_guard lock(mu_);
      for (const auto& id : resp->revoked_lease_ids()) {
        if (current_leases_.count(id)) {
          // A batch stops whole: its leases share one workspace and one pytest session. The
          // others then expire and are queued again.
          spdlog::warn("{} {} revoked by the coordinator: stopping {}", current_context_, id,
                       current_leases_.size() > 1 ? "the batch" : "the shard");
          cancel_current_.store(true);
        }
      }
      if (resp->reregister()) reregister_ = true;
      draining_ = resp->draining();
    } else {
      spdlog::debug("heartbeat: {}", resp.status().message());
    }
    SleepFor(interval);
  }
}

void Agent::Progress(const std::vector<const v1::LeaseResponse*>& leases, const std::string& step,
                     const std::string& entry, const std::vector<std::string>& tail) {
  const TimePoint now = options_.clock->Now();
  // A clock set back (now before the last report) does not hold the next report back.
  if (step == last_step_ && entry == last_entry_ && now >= last_progress_ &&
      now - last_progress_ < options_.progress_interval) {
    return;
  }
  last_step_ = step;
  last_entry_ = entry;
  last_progress_ = now;
  for (const v1::LeaseResponse* lease : leases) {
    {
      // A batch's shard already decided is no longer current: its lease takes no progress.
      std::lock_guard lock(mu_);
      if (!current_leases_.count(lease->lease_id())) continue;
    }
    v1::ProgressRequest req;
    req.set_agent_id(options_.dimensions.agent_id());
    req.set_session_id(session());
    req.set_lease_id(lease->lease_id());
    req.set_fencing_token(lease->fencing_token());
    req.set_step(step);
    req.set_entry(entry);
    for (const auto& l : tail) req.add_log_tail(l);
    auto resp = client_->ReportProgress(req);
    if (resp.ok() && resp->revoked()) {
      spdlog::warn("{} no longer valid: stopping {}",
                   util::ShardLogContext(lease->shard().sweep_id(), lease->shard().shard_id(),
                                         lease->lease_id()),
                   leases.size() > 1 ? "the batch" : "the shard");
      cancel_current_.store(true);
    }
  }
}

void Agent::Deliver(const std::filesystem::path& spool_file, const v1::CompleteRequest& req,
                    const std::string& context) {
  absl::StatusOr<v1::CompleteResponse> resp = absl::UnavailableError("not sent");
  absl::Status st = RetryCall([&] {
    resp = client_->Complete(req);
    if (!resp.ok() && rpc::IsRetryable(resp.status())) {
      spdlog::warn("{} complete {}: {} (retrying)", context, req.lease_id(),
                   resp.status().message());
    }
    return resp.status();
  });
  if (!Definitive(st)) {
    spdlog::warn("{} result of {} kept in {} until the coordinator answers", context,
                 req.lease_id(), spool_file.string());
    return;
  }
  if (!st.ok()) {
    spdlog::error("{} result of {} refused: {}", context, req.lease_id(), st.message());
  } else if (!resp->accepted()) {
    spdlog::warn("{} result of {} rejected: {}", context, req.lease_id(), resp->rejected_reason());
  } else if (resp->duplicate()) {
    spdlog::info("{} result of {} was already accepted", context, req.lease_id());
  } else {
    spdlog::info("{} result of {} accepted", context, req.lease_id());
  }
  std::error_code ec;
  std::filesystem::remove(spool_file, ec);
  std::lock_guard lock(mu_);
  undelivered_.erase(req.lease_id());
}

std::vector<std::filesystem::path> Agent::SpooledFiles() {
  const auto dir = options_.data_dir / "spool";
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return files;
  for (const auto& f : std::filesystem::directory_iterator(dir, ec)) {
    if (f.path().extension() == ".pb") files.push_back(f.path());
  }
  std::sort(files.begin(), files.end());
  std::lock_guard lock(mu_);
  for (const auto& f : files) undelivered_.insert(f.stem().string());  // <lease id>.pb
  return files;
}

void Agent::ResendSpooled() {
  std::error_code ec;
  const std::vector<std::filesystem::path> files = SpooledFiles();
  for (const auto& f : files) {
    auto bytes = util::ReadFile(f, 256 << 20);
    v1::CompleteRequest req;
    if (!bytes.ok() || !req.ParseFromString(*bytes)) {
      spdlog::error("unreadable spooled result {}: moved aside", f.string());
      std::filesystem::rename(f, f.string() + ".bad", ec);
      std::lock_guard lock(mu_);
      undelivered_.erase(f.stem().string());
      continue;
    }
    // The session may have changed since: the lease and token are what the coordinator checks.
    req.set_session_id(session());
    // A spooled request names its lease only (the lease id starts with the shard's).
    const std::string context = util::ShardLogContext("", "", req.lease_id());
    spdlog::info("{} re-sending the result of {} kept from before", context, req.lease_id());
    Deliver(f, req, context);
  }
}

ExecContext Agent::Context(const v1::ShardSpec& spec, const std::filesystem::path& dir,
                           const std::vector<const v1::LeaseResponse*>& leases) {
  ExecContext ctx;
  ctx.spec = &spec;
  ctx.workspace = workspace_;
  ctx.shard_dir = dir;
  ctx.settings = options_.exec;
  ctx.agent = &options_.dimensions;
  ctx.progress = [this, leases](const std::string& step, const std::string& entry,
                                const std::vector<std::string>& tail) {
    Progress(leases, step, entry, tail);
  };
  ctx.cancelled = [this] { return cancel_current_.load(); };
  return ctx;
}

void Agent::RunShard(const v1::LeaseResponse& lease) {
  const v1::ShardSpec& spec = lease.shard();
  cancel_current_.store(false);
  const std::string context =
      util::ShardLogContext(spec.sweep_id(), spec.shard_id(), lease.lease_id());
  {
    std::lock_guard lock(mu_);
    current_leases_.insert(lease.lease_id());
    current_context_ = context;
  }
  last_step_.clear();
  spdlog::info("{} {} {} ({} entries, {})", context, spec.playbook(), spec.loader(),
               spec.entries_size(), spec.executor());
  const std::vector<const v1::LeaseResponse*> leases{&lease};
  const auto start = std::chrono::steady_clock::now();
  v1::ShardResult result;
  auto fail = [&](const absl::Status& st) {
    result.Clear();
    result.set_status(v1::ShardResult::FAILED);
    result.set_error(util::MessageOf(st));
  };

  auto executor = executors_.find(spec.executor());
  std::filesystem::path shard_dir;
  if (executor == executors_.end()) {
    fail(absl::FailedPreconditionError(
        util::StrCat("this agent has no '", spec.executor(), "' executor")));
  } else {
    Progress(leases, "prepare", "", {});
    absl::StatusOr<std::filesystem::path> dir;
    if (workspace_ != nullptr) {
      const auto t0 = std::chrono::steady_clock::now();
      dir = workspace_->Prepare(spec);
      metrics_->WorkspaceReset(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    } else {
      shard_dir = options_.data_dir / "shards" / spec.shard_id() / lease.lease_id();
      std::error_code ec;
      std::filesystem::create_directories(shard_dir, ec);
      dir = ec ? absl::StatusOr<std::filesystem::path>(absl::InternalError(ec.message()))
               : absl::StatusOr<std::filesystem::path>(shard_dir);
    }
    if (!dir.ok()) {
      fail(dir.status());
    } else {
      ExecContext ctx = Context(spec, *dir, leases);
      auto r = executor->second->Run(ctx);
      if (r.ok()) {
        result = std::move(*r);
      } else {
        fail(r.status());
      }
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Decided once: a revocation that arrives after this point finds the result on its way.
  if (auto out = Spool(lease, std::move(result), seconds, cancel_current_.load(), context)) {
    Send(*out);
  }
}

void Agent::RunBatch(const v1::LeaseResponse& lease) {
  std::vector<v1::LeaseResponse> leases{lease};
  leases.front().clear_batch();
  for (const v1::BatchGrant& g : lease.batch()) {
    v1::LeaseResponse one;
    one.set_granted(true);
    one.set_lease_id(g.lease_id());
    one.set_fencing_token(g.fencing_token());
    one.set_deadline_unix_ms(g.deadline_unix_ms());
    *one.mutable_shard() = g.shard();
    leases.push_back(std::move(one));
  }
  const v1::ShardSpec& head = lease.shard();
  auto executor = executors_.find(head.executor());
  bool together =
      executor != executors_.end() && executor->second->CanBatch() && workspace_ != nullptr;
  for (const auto& l : leases) together = together && l.shard().executor() == head.executor();
  // One workspace for every shard (workspace::BatchSpec); a batch whose registry lines would
  // reach each other's models (the coordinator batches no such shards) runs one shard after
  // another.
  absl::StatusOr<v1::ShardSpec> merged = absl::InternalError("not merged");
  if (together) {
    std::vector<const v1::ShardSpec*> all_specs;
    for (const auto& l : leases) all_specs.push_back(&l.shard());
    merged = workspace::BatchSpec(all_specs);
    if (!merged.ok()) {
      spdlog::warn("{} batch of {}: {}; running its shards one after another",
                   util::ShardLogContext(head.sweep_id(), head.shard_id(), lease.lease_id()),
                   leases.size(), merged.status().message());
      together = false;
    }
  }
  if (!together) {
    // One after another; the waiting leases are named in heartbeats until their turn.
    {
      std::lock_guard lock(mu_);
      for (const auto& l : leases) current_leases_.insert(l.lease_id());
    }
    for (const auto& l : leases) {
      if (Stopping()) break;
      {
        std::lock_guard lock(mu_);
        current_leases_.erase(l.lease_id());
      }
      RunShard(l);
    }
    std::lock_guard lock(mu_);
    current_leases_.clear();
    return;
  }

  cancel_current_.store(false);
  std::vector<const v1::LeaseResponse*> all;
  std::vector<const v1::ShardSpec*> specs;
  std::vector<std::string> contexts;
  {
    std::lock_guard lock(mu_);
    for (const auto& l : leases) {
      current_leases_.insert(l.lease_id());
      all.push_back(&l);
      specs.push_back(&l.shard());
      contexts.push_back(
          util::ShardLogContext(l.shard().sweep_id(), l.shard().shard_id(), l.lease_id()));
    }
    current_context_ = contexts.front();
  }
  last_step_.clear();
  for (std::size_t i = 0; i < leases.size(); ++i) {
    const v1::ShardSpec& spec = leases[i].shard();
    spdlog::info("{} {} {} ({} entries, {}), batch {} of {}", contexts[i], spec.playbook(),
                 spec.loader(), spec.entries_size(), spec.executor(), i + 1, leases.size());
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<absl::StatusOr<v1::ShardResult>> results;
  Progress(all, "prepare", "", {});
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<std::filesystem::path> dir = workspace_->Prepare(*merged);
  metrics_->WorkspaceReset(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (!dir.ok()) {
    results.assign(leases.size(), dir.status());
  }
  // A shard decided while the session runs on (docs/farm.md, "How an agent runs a batch") is
  // spooled at once and delivered by a thread of its own, so that the session is never held up
  // by the coordinator; its lease leaves the heartbeat's current leases. Each shard is charged
  // the time since the previous one was decided; those decided at the end share what is left.
  std::mutex send_mu;
  std::condition_variable send_cv;
  std::deque<Outgoing> to_send;
  bool all_queued = false;
  std::thread sender([&] {
    std::unique_lock lock(send_mu);
    for (;;) {
      send_cv.wait(lock, [&] { return all_queued || !to_send.empty(); });
      if (to_send.empty()) return;
      Outgoing out = std::move(to_send.front());
      to_send.pop_front();
      lock.unlock();
      Send(out);
      lock.lock();
    }
  });
  auto queue = [&](std::vector<Outgoing> outs, bool last) {
    {
      std::lock_guard lock(send_mu);
      for (auto& o : outs) to_send.push_back(std::move(o));
      all_queued = last;
    }
    send_cv.notify_one();
  };
  std::vector<bool> sent(leases.size(), false);
  auto mark = start;
  if (dir.ok()) {
    ExecContext ctx = Context(head, *dir, all);
    ctx.early_result = [&](std::size_t i, const v1::ShardResult& result) {
      if (i >= leases.size() || sent[i] || cancel_current_.load()) return;
      const auto now = std::chrono::steady_clock::now();
      const double seconds = std::chrono::duration<double>(now - mark).count();
      mark = now;
      sent[i] = true;
      spdlog::info("{} decided while its batch runs on", contexts[i]);
      if (auto out = Spool(leases[i], result, seconds, false, contexts[i])) queue({*out}, false);
    };
    results = executor->second->RunBatch(ctx, specs);
    results.resize(leases.size(), absl::InternalError("the batch left no result"));
  }
  const std::size_t left = static_cast<std::size_t>(std::count(sent.begin(), sent.end(), false));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - mark).count() /
      static_cast<double>(std::max<std::size_t>(1, left));
  const bool cancelled = cancel_current_.load();
  // Every result is on disk before the first of these is sent: an outage or a crash during one
  // delivery loses none of the others.
  std::vector<Outgoing> outgoing;
  for (std::size_t i = 0; i < leases.size(); ++i) {
    if (sent[i]) continue;
    v1::ShardResult result;
    if (results[i].ok()) {
      result = std::move(*results[i]);
    } else {
      result.set_status(v1::ShardResult::FAILED);
      result.set_error(util::MessageOf(results[i].status()));
    }
    if (auto out = Spool(leases[i], std::move(result), seconds, cancelled, contexts[i])) {
      outgoing.push_back(std::move(*out));
    }
  }
  queue(std::move(outgoing), true);
  sender.join();
}

std::optional<Agent::Outgoing> Agent::Spool(const v1::LeaseResponse& lease, v1::ShardResult result,
                                            double seconds, bool cancelled,
                                            const std::string& context) {
  const v1::ShardSpec& spec = lease.shard();
  result.set_duration_seconds(seconds);
  metrics_->Step(spec.playbook(), "shard",
                 result.status() == v1::ShardResult::SUCCEEDED ? "succeeded" : "failed", seconds);
  // An infrastructure failure of a native shard (the playbook or the executor failed) may be
  // the machine's: the runner is checked again before the next lease.
  if (!cancelled && result.status() == v1::ShardResult::FAILED && spec.executor() == "native") {
    unattributed_failure_.store(true);
  }
  {
    // From here until it is acknowledged the lease is kept alive as an undelivered result.
    std::lock_guard lock(mu_);
    current_leases_.erase(lease.lease_id());
    if (!cancelled) undelivered_.insert(lease.lease_id());
  }
  if (cancelled) {
    spdlog::warn("{} stopped: the lease was revoked or the agent is stopping", context);
    return std::nullopt;  // the coordinator no longer wants this result
  }
  Outgoing out;
  out.context = context;
  out.req.set_agent_id(options_.dimensions.agent_id());
  out.req.set_session_id(session());
  out.req.set_lease_id(lease.lease_id());
  out.req.set_fencing_token(lease.fencing_token());
  *out.req.mutable_result() = std::move(result);
  const auto spool = options_.data_dir / "spool";
  std::error_code ec;
  std::filesystem::create_directories(spool, ec);
  out.file = spool / util::StrCat(lease.lease_id(), ".pb");
  std::string bytes;
  out.req.SerializeToString(&bytes);
  if (auto st = util::WriteFileAtomic(out.file, bytes); !st.ok()) {
    spdlog::error("{} cannot spool the result of {}: {}", context, lease.lease_id(), st.message());
  }
  return out;
}

void Agent::Send(const Outgoing& out) {
  Deliver(out.file, out.req, out.context);
  shards_done_.fetch_add(1);
}

absl::Status Agent::Run() {
  // Results kept from before a restart: named in the registration, so their leases are kept.
  (void)SpooledFiles();
  CheckRunner("at start");
  if (Stopping()) return absl::OkStatus();
  if (auto st = RegisterWithRetry(); !st.ok()) {
    if (Stopping()) return absl::OkStatus();
    return st;
  }
  heartbeat_ = std::thread([this] { HeartbeatLoop(); });
  ResendSpooled();
  while (!Stopping()) {
    bool reregister, draining;
    {
      std::lock_guard lock(mu_);
      reregister = reregister_;
      draining = draining_;
    }
    // A changed answer of the self-check is told to the coordinator: the same session, new
    // dimensions.
    if (RecheckRunner()) reregister = true;
    if (Stopping()) break;
    if (reregister) {
      if (auto st = RegisterWithRetry(); !st.ok()) {
        if (Stopping()) break;
        Stop();
        heartbeat_.join();
        return st;
      }
    }
    if (draining && options_.exit_when_drained) {
      spdlog::info("drained: exiting");
      break;
    }
    v1::LeaseRequest req;
    req.set_agent_id(options_.dimensions.agent_id());
    req.set_session_id(session());
    req.set_wait_ms(options_.lease_wait.count());
    req.set_request_id(RandomId());
    int batch = std::max(1, options_.max_batch);
    if (options_.max_shards > 0) {
      batch = std::max(1, std::min(batch, options_.max_shards - shards_done_.load()));
    }
    req.set_max_batch(batch);
    absl::StatusOr<v1::LeaseResponse> lease = absl::UnavailableError("not asked");
    absl::Status st = RetryCall([&] {
      lease = client_->Lease(req);
      return lease.status();
    });
    if (Stopping()) break;
    if (!st.ok()) {
      spdlog::error("lease: {}", st.message());
      if (absl::IsUnauthenticated(st) || absl::IsPermissionDenied(st)) {
        Stop();
        heartbeat_.join();
        return st;
      }
      SleepFor(std::chrono::seconds(1));
      continue;
    }
    if (lease->reregister()) {
      std::lock_guard lock(mu_);
      reregister_ = true;
      continue;
    }
    if (lease->draining()) {
      std::lock_guard lock(mu_);
      draining_ = true;
    }
    if (!lease->granted()) {
      // A draining agent gets nothing until undrained: don't spin.
      if (lease->draining() && !options_.exit_when_drained) SleepFor(options_.lease_wait / 4);
      continue;
    }
    if (lease->batch_size() > 0) {
      RunBatch(*lease);
    } else {
      RunShard(*lease);
    }
    if (options_.max_shards > 0 && shards_done_.load() >= options_.max_shards) break;
  }
  Stop();
  if (heartbeat_.joinable()) heartbeat_.join();
  return absl::OkStatus();
}

}  // namespace triage::agent
