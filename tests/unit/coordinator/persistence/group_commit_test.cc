// Group commit: acknowledgements run only once the store made their mutation durable, several
// mutations share one commit, a lost commit fails exactly the operations in it, and long
// callbacks (a sweep's merge) do not hold up commits. Uses a scripted store for the committer
// itself, and the real coordinator over SQLite behind a store whose commits can be held.

#include "coordinator/persistence/group_commit.h"

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>

#include "coordinator/core/coordinator.h"
#include "coordinator/persistence/sqlite_store.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace triage::coord {
namespace {

using namespace std::chrono_literals;

// A gate that Flush waits behind while it is closed.
class Gate {
 public:
  void Close() {
    std::lock_guard lock(mu_);
    open_ = false;
  }
  void Open() {
    {
      std::lock_guard lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  void Pass() {
    std::unique_lock lock(mu_);
    ++waiting_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
    --waiting_;
  }
  // True once a Flush is waiting at the closed gate.
  bool WaitForArrival() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 10s, [&] { return waiting_ > 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  int waiting_ = 0;
};

// Tickets are handed out by Stage; Flush makes everything staged durable, or fails on demand.
class ScriptedStore : public Store {
 public:
  absl::StatusOr<std::uint64_t> Stage(const Mutation&) override {
    std::lock_guard lock(mu_);
    return ++staged_;
  }
  absl::StatusOr<std::uint64_t> Flush() override {
    std::uint64_t upto;
    {
      std::lock_guard lock(mu_);
      upto = staged_;
    }
    gate.Pass();
    std::lock_guard lock(mu_);
    ++flushes;
    if (fail_next > 0) {
      --fail_next;
      return absl::InternalError("disk full");
    }
    durable_ = upto;
    return durable_;
  }
  std::uint64_t Abort() override {
    std::lock_guard lock(mu_);
    return staged_;
  }
  absl::StatusOr<Snapshot> Load() override { return Snapshot{}; }
  absl::StatusOr<std::vector<AttemptRecord>> Attempts(const std::string&) override {
    return std::vector<AttemptRecord>{};
  }
  absl::StatusOr<std::vector<AuditRecord>> AuditLog(int) override {
    return std::vector<AuditRecord>{};
  }
  absl::Status Check() override { return absl::OkStatus(); }

  std::uint64_t Stage() { return *Stage(Mutation{}); }

  Gate gate;
  int fail_next = 0;
  int flushes = 0;

 private:
  std::mutex mu_;
  std::uint64_t staged_ = 0;
  std::uint64_t durable_ = 0;
};

// Records which callbacks ran and how.
struct Log {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> lines;
  void Add(std::string line) {
    {
      std::lock_guard lock(mu);
      lines.push_back(std::move(line));
    }
    cv.notify_all();
  }
  bool WaitFor(std::size_t n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, 10s, [&] { return lines.size() >= n; });
  }
  std::vector<std::string> Get() {
    std::lock_guard lock(mu);
    return lines;
  }
};

std::vector<GroupCommit::Item> Reply(Log* log, const std::string& name) {
  return {{[log, name] { log->Add(name + " ok"); },
           [log, name](const absl::Status& st) {
             log->Add(name + (absl::IsUnavailable(st) ? " unavailable" : " other error"));
           }}};
}

TEST(GroupCommitTest, InlineCallbacksRunBeforeSubmitReturns) {
  ScriptedStore store;
  GroupCommit commits(&store, [](const absl::Status&) {});
  Log log;
  commits.Submit(store.Stage(), Reply(&log, "a"));
  EXPECT_EQ(log.Get(), std::vector<std::string>{"a ok"});
  commits.Submit(0, Reply(&log, "nothing staged"));
  EXPECT_EQ(log.Get().back(), "nothing staged ok");
  EXPECT_EQ(store.flushes, 1);
}

TEST(GroupCommitTest, AcknowledgesOnlyWhenDurableAndGroupsWhatArrivesMeanwhile) {
  ScriptedStore store;
  std::mutex observed_mu;
  std::vector<std::uint64_t> observed;  // mutations per commit, as the metrics see them
  GroupCommit commits(
      &store, [](const absl::Status&) {},
      [&](double seconds, std::uint64_t mutations, bool ok) {
        EXPECT_GE(seconds, 0);
        EXPECT_TRUE(ok);
        std::lock_guard lock(observed_mu);
        observed.push_back(mutations);
      });
  commits.Start();
  Log log;
  store.gate.Close();
  commits.Submit(store.Stage(), Reply(&log, "first"));
  ASSERT_TRUE(store.gate.WaitForArrival()) << "the committer flushes on its own thread";
  // Staged while the first commit is in progress: they wait, then share one commit.
  for (int i = 0; i < 5; ++i) commits.Submit(store.Stage(), Reply(&log, "next"));
  std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(log.Get().empty()) << "nothing is acknowledged before its commit";
  store.gate.Open();
  ASSERT_TRUE(log.WaitFor(6));
  EXPECT_EQ(log.Get().front(), "first ok");
  commits.Stop();
  EXPECT_EQ(store.flushes, 2);
  EXPECT_EQ(commits.stats().committed, 6u);
  EXPECT_EQ(commits.stats().flushes, 2u);
  EXPECT_EQ(observed, (std::vector<std::uint64_t>{1, 5}));
}

TEST(GroupCommitTest, AFailedCommitFailsExactlyWhatItLost) {
  ScriptedStore store;
  GroupCommit* self = nullptr;
  int reloads = 0;
  std::vector<bool> observed;
  GroupCommit commits(
      &store,
      [&](const absl::Status& st) {
        EXPECT_EQ(st.message(), "disk full");
        ++reloads;
        self->Lost(store.Abort());
      },
      [&](double, std::uint64_t, bool ok) { observed.push_back(ok); });
  self = &commits;
  Log log;
  commits.Submit(store.Stage(), Reply(&log, "kept"));
  store.fail_next = 1;
  commits.Submit(store.Stage(), Reply(&log, "lost"));
  commits.Submit(store.Stage(), Reply(&log, "after"));
  EXPECT_EQ(log.Get(), (std::vector<std::string>{"kept ok", "lost unavailable", "after ok"}));
  EXPECT_EQ(reloads, 1);
  EXPECT_EQ(observed, (std::vector<bool>{true, false, true}));
}

TEST(GroupCommitTest, LongCallbacksDoNotHoldUpCommits) {
  ScriptedStore store;
  GroupCommit commits(&store, [](const absl::Status&) {});
  commits.Start();
  Log log;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  GroupCommit::Item merge{[&log, released] {
                            log.Add("merge started");
                            released.wait();
                          },
                          nullptr, /*last=*/true};
  commits.Submit(store.Stage(), {merge});
  ASSERT_TRUE(log.WaitFor(1));
  commits.Submit(store.Stage(), Reply(&log, "later"));
  ASSERT_TRUE(log.WaitFor(2)) << "a commit was held up by a long callback";
  EXPECT_EQ(log.Get()[1], "later ok");
  release.set_value();
  commits.Stop();
}

TEST(GroupCommitTest, StopCommitsAndAnswersEverythingThatWaits) {
  ScriptedStore store;
  GroupCommit commits(&store, [](const absl::Status&) {});
  commits.Start();
  Log log;
  store.gate.Close();
  commits.Submit(store.Stage(), Reply(&log, "in commit"));
  ASSERT_TRUE(store.gate.WaitForArrival());
  commits.Submit(store.Stage(), Reply(&log, "waiting"));
  std::thread stopper([&] { commits.Stop(); });
  std::this_thread::sleep_for(20ms);
  store.gate.Open();
  stopper.join();
  EXPECT_EQ(log.Get(), (std::vector<std::string>{"in commit ok", "waiting ok"}));
  // Stopped: back to committing on the caller's thread.
  commits.Submit(store.Stage(), Reply(&log, "after stop"));
  EXPECT_EQ(log.Get().back(), "after stop ok");
}

// The real coordinator over SQLite, with the committer thread, behind a gate on its commits.
class GatedSqlite : public Store {
 public:
  explicit GatedSqlite(std::unique_ptr<SqliteStore> inner) : inner_(std::move(inner)) {}
  absl::StatusOr<std::uint64_t> Stage(const Mutation& m) override { return inner_->Stage(m); }
  absl::StatusOr<std::uint64_t> Flush() override {
    gate.Pass();
    return inner_->Flush();
  }
  std::uint64_t Abort() override { return inner_->Abort(); }
  absl::StatusOr<Snapshot> Load() override { return inner_->Load(); }
  absl::StatusOr<std::vector<AttemptRecord>> Attempts(const std::string& id) override {
    return inner_->Attempts(id);
  }
  absl::StatusOr<std::vector<AuditRecord>> AuditLog(int limit) override {
    return inner_->AuditLog(limit);
  }
  absl::Status Check() override { return inner_->Check(); }
  Gate gate;

 private:
  std::unique_ptr<SqliteStore> inner_;
};

TEST(GroupCommitTest, CoordinatorAnswersCompleteOnlyOnceTheResultIsDurable) {
  testing::TempDir tmp;
  auto sqlite = SqliteStore::Open(tmp.path() / "state.db");
  ASSERT_TRUE(sqlite.ok()) << sqlite.status();
  GatedSqlite store(std::move(*sqlite));
  FakeClock clock;
  const std::string file = "tests/runner/test_config/torch/test_config_training_single_device.yaml";
  auto input = [&](const v1::StartSweepRequest&) -> absl::StatusOr<SweepInput> {
    SweepInput in;
    in.repo = "/fake/tt-xla";
    in.ttxla_commit = std::string(40, 'a');
    in.forge_commit = std::string(40, 'b');
    in.inventory.documents.push_back(inventory::Document::Parse(
        file,
        "test_config:\n  a/pytorch-single_device-training:\n    status: NOT_SUPPORTED_SKIP\n"
        "    bringup_status: FAILED_FE_COMPILATION\n    reason: \"RuntimeError: 'lu_cpu' not "
        "implemented for 'BFloat16'\"\n"));
    return in;
  };
  Coordinator coord({}, &store, &clock, input);
  coord.StartCommitter();
  v1::RegisterRequest reg;
  reg.mutable_dimensions()->set_agent_id("n");
  reg.mutable_dimensions()->set_arch("n150");
  auto session = coord.Register(reg);
  ASSERT_TRUE(session.ok()) << session.status();
  v1::StartSweepRequest start;
  start.set_repo_path("/fake/tt-xla");
  ASSERT_TRUE(coord.StartSweep(start, Caller{"alice", "operator"}).ok());
  v1::LeaseRequest lreq;
  lreq.set_agent_id("n");
  lreq.set_session_id(session->session_id());
  std::promise<absl::StatusOr<v1::LeaseResponse>> leased;
  coord.Lease(lreq, [&](absl::StatusOr<v1::LeaseResponse> r) { leased.set_value(std::move(r)); });
  auto lease = leased.get_future().get();
  ASSERT_TRUE(lease.ok() && lease->granted()) << lease.status();

  v1::CompleteRequest req;
  req.set_agent_id("n");
  req.set_lease_id(lease->lease_id());
  req.set_fencing_token(lease->fencing_token());
  req.mutable_result()->set_status(v1::ShardResult::SUCCEEDED);
  store.gate.Close();
  Log log;
  auto answer = [&](const std::string& name) {
    return [&log, name](absl::StatusOr<v1::CompleteResponse> r) {
      log.Add(name + (r.ok() && r->accepted() ? (r->duplicate() ? " duplicate" : " accepted")
                                              : " refused"));
    };
  };
  coord.Complete(req, answer("first"));
  ASSERT_TRUE(store.gate.WaitForArrival());
  // The same result again (an agent retrying): acknowledged as a duplicate, and also only once
  // the first copy is durable.
  coord.Complete(req, answer("retry"));
  std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(log.Get().empty()) << "answered before the result was committed";
  store.gate.Open();
  ASSERT_TRUE(log.WaitFor(2));
  EXPECT_EQ(log.Get(), (std::vector<std::string>{"first accepted", "retry duplicate"}));
  EXPECT_EQ(coord.Results("sw-0001")->size(), 1u);
}

}  // namespace
}  // namespace triage::coord
