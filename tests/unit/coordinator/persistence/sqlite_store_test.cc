// The Store contract on SqliteStore: staged mutations are invisible and not durable until a
// Flush commits them together; tickets count up; a failing statement rolls back the whole
// batch; Abort drops what is staged; and what was flushed comes back from Load, also through a
// second connection (as after a restart).

#include "coordinator/persistence/sqlite_store.h"

#include <sqlite3.h>

#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace triage::coord {
namespace {

using namespace std::chrono_literals;

TimePoint At(int seconds) { return TimePoint{} + std::chrono::seconds(1'700'000'000 + seconds); }

SweepRecord Sweep(const std::string& id) {
  SweepRecord s;
  s.id = id;
  s.seq = 1;
  s.repo = "/fake/tt-xla";
  s.ttxla_commit = std::string(40, 'a');
  s.forge_commit = std::string(40, 'b');
  s.archs = {"n150", "p150"};
  s.playbooks = {"unpack_forward_output"};
  s.created_by = "alice";
  s.created_at = At(0);
  return s;
}

ShardRecord Shard(const std::string& id, const std::string& sweep) {
  ShardRecord s;
  s.id = id;
  s.sweep_id = sweep;
  s.seq = 2;
  s.spec.set_shard_id(id);
  s.spec.set_playbook("unpack_forward_output");
  s.spec.set_arch("n150");
  s.archs = {"n150"};
  s.expected_seconds = 900;
  s.enqueued_at = At(1);
  s.eligible_at = At(1);
  return s;
}

// Stages and flushes the creation of sweep s; false when either fails.
bool CreateSweep(SqliteStore& store, const SweepRecord& s) {
  Mutation m;
  m.name = "CreateSweep";
  m.sweeps.push_back(&s);
  return store.Stage(m).ok() && store.Flush().ok();
}

class SqliteStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<SqliteStore> Open() {
    auto store = SqliteStore::Open(tmp_.path() / "state.db");
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }
  testing::TempDir tmp_;
};

TEST_F(SqliteStoreTest, StagedIsInvisibleUntilFlushedAndTicketsCountUp) {
  auto store = Open();
  auto other = Open();  // a second connection: what a restarted coordinator would read
  SweepRecord sweep = Sweep("sw-0001");
  ShardRecord shard = Shard("sw-0001-s1", sweep.id);
  Mutation create;
  create.name = "CreateSweep";
  create.sweeps.push_back(&sweep);
  create.shard_specs.push_back(&shard);
  EXPECT_EQ(*store->Stage(create), 1u);
  // The staged mutation owns its data: changing the records afterwards changes nothing.
  shard.state = ShardState::kCancelled;
  sweep.repo = "changed after staging";
  ShardRecord leased = Shard("sw-0001-s1", sweep.id);
  leased.state = ShardState::kLeased;
  leased.attempts = 1;
  leased.token = 1;
  leased.lease = LeaseInfo{"sw-0001-s1-l1", "agent-1", "sess-1", 1, At(2), At(62)};
  Mutation grant;
  grant.name = "GrantLease";
  grant.shards.push_back(&leased);
  EXPECT_EQ(*store->Stage(grant), 2u);
  EXPECT_TRUE(other->Load()->shards.empty()) << "staged is not committed";

  EXPECT_EQ(*store->Flush(), 2u);
  EXPECT_EQ(*store->Flush(), 2u) << "nothing staged: the same durable ticket";
  auto snap = other->Load();
  ASSERT_TRUE(snap.ok()) << snap.status();
  ASSERT_EQ(snap->sweeps.size(), 1u);
  EXPECT_EQ(snap->sweeps[0].repo, "/fake/tt-xla");
  EXPECT_EQ(snap->sweeps[0].archs, (std::vector<std::string>{"n150", "p150"}));
  ASSERT_EQ(snap->shards.size(), 1u);
  const ShardRecord& got = snap->shards[0];
  EXPECT_EQ(got.state, ShardState::kLeased);
  EXPECT_EQ(got.token, 1);
  ASSERT_TRUE(got.lease.has_value());
  EXPECT_EQ(got.lease->agent_id, "agent-1");
  EXPECT_EQ(got.spec.playbook(), "unpack_forward_output") << "the update kept the spec";
}

TEST_F(SqliteStoreTest, AFailingStatementRollsBackTheWholeBatch) {
  auto store = Open();
  SweepRecord sweep = Sweep("sw-0001");
  Mutation create;
  create.name = "CreateSweep";
  create.sweeps.push_back(&sweep);
  ASSERT_TRUE(store->Stage(create).ok());
  // An update of a shard that was never created: the batch cannot be committed.
  ShardRecord ghost = Shard("sw-0001-s9", sweep.id);
  Mutation grant;
  grant.name = "GrantLease";
  grant.shards.push_back(&ghost);
  ASSERT_TRUE(store->Stage(grant).ok());
  auto flushed = store->Flush();
  ASSERT_FALSE(flushed.ok());
  EXPECT_NE(flushed.status().message().find("GrantLease: no row for shard sw-0001-s9"),
            std::string::npos)
      << flushed.status();
  EXPECT_TRUE(store->Load()->sweeps.empty()) << "the good mutation went with the bad one";
  EXPECT_EQ(store->Abort(), 2u) << "the last ticket handed out";
  // The store goes on.
  EXPECT_EQ(*store->Stage(create), 3u);
  EXPECT_EQ(*store->Flush(), 3u);
  EXPECT_EQ(store->Load()->sweeps.size(), 1u);
}

TEST_F(SqliteStoreTest, AbortDropsWhatIsStagedAndInjectedFailuresQueueNothing) {
  auto store = Open();
  SweepRecord sweep = Sweep("sw-0001");
  Mutation create;
  create.name = "CreateSweep";
  create.sweeps.push_back(&sweep);
  ASSERT_TRUE(store->Stage(create).ok());
  EXPECT_EQ(store->Abort(), 1u);
  EXPECT_EQ(*store->Flush(), 0u) << "nothing was committed";
  EXPECT_TRUE(store->Load()->sweeps.empty());

  store->FailNextAppliesForTest(1);
  EXPECT_TRUE(absl::IsUnavailable(store->Stage(create).status()));
  EXPECT_EQ(*store->Flush(), 0u);
  store->FailNextFlushesForTest(1);
  ASSERT_TRUE(store->Stage(create).ok());
  EXPECT_FALSE(store->Flush().ok());
  EXPECT_TRUE(store->Load()->sweeps.empty());
  ASSERT_TRUE(store->Stage(create).ok());
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_EQ(store->Load()->sweeps.size(), 1u);
}

}  // namespace
}  // namespace triage::coord

namespace triage::coord {
namespace {

// The database file deleted while the store has it open: the store notices (FileIntact), and
// the next commit first writes every committed row back to a new file under the same name, so a
// restart finds them all, with the new commit.
TEST_F(SqliteStoreTest, ADeletedDatabaseFileIsWrittenBackBeforeTheNextCommit) {
  auto store = Open();
  ASSERT_TRUE(CreateSweep(*store, Sweep("sw-0001")));
  EXPECT_TRUE(store->FileIntact());
  const auto path = tmp_.path() / "state.db";
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::filesystem::remove(path.string() + suffix);
  }
  EXPECT_FALSE(store->FileIntact());
  ASSERT_TRUE(CreateSweep(*store, Sweep("sw-0002")));
  EXPECT_TRUE(store->FileIntact());
  EXPECT_EQ(store->file_restores(), 1u);
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".restoring"));
  auto reopened = Open();  // what a restarted coordinator reads
  auto snap = reopened->Load();
  ASSERT_TRUE(snap.ok()) << snap.status();
  ASSERT_EQ(snap->sweeps.size(), 2u);
  EXPECT_EQ(snap->sweeps[0].id, "sw-0001");
  EXPECT_EQ(snap->sweeps[1].id, "sw-0002");
  // Check does the same when nothing is written.
  reopened.reset();
  std::filesystem::remove(path);
  EXPECT_TRUE(store->Check().ok());
  EXPECT_TRUE(store->FileIntact());
  EXPECT_EQ(Open()->Load()->sweeps.size(), 2u);
}

// Another file put in its place is not overwritten: commits fail until a person decides.
TEST_F(SqliteStoreTest, AReplacedDatabaseFileFailsCommits) {
  auto store = Open();
  const auto path = tmp_.path() / "state.db";
  std::filesystem::remove(path);
  testing::WriteFileOrDie(path, "someone else's file\n");
  EXPECT_FALSE(store->FileIntact());
  const SweepRecord sweep = Sweep("sw-0001");
  Mutation m;
  m.name = "CreateSweep";
  m.sweeps.push_back(&sweep);
  ASSERT_TRUE(store->Stage(m).ok());
  auto flushed = store->Flush();
  ASSERT_FALSE(flushed.ok());
  EXPECT_NE(std::string(flushed.status().message()).find("replaced by another file"),
            std::string::npos)
      << flushed.status();
  EXPECT_FALSE(store->Check().ok());
  EXPECT_EQ(testing::ReadFileOrDie(path), "someone else's file\n");
}

}  // namespace

namespace {

// A file SQLite cannot read is named, and said to be damaged; never replaced.
TEST(SqliteStoreOpenTest, ADamagedFileIsNamed) {
  testing::TempDir tmp;
  const auto garbage = tmp.path() / "garbage.db";
  testing::WriteFileOrDie(garbage, std::string(4096, 'g'));
  auto st = SqliteStore::Open(garbage);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().message(),
            garbage.string() +
                ": not a SQLite database (corrupt or truncated); restore it from a backup or "
                "move it away");
  EXPECT_EQ(testing::ReadFileOrDie(garbage), std::string(4096, 'g'));

  // A real database cut short: shorter than the page count its header records.
  const auto cut = tmp.path() / "cut.db";
  {
    auto store = SqliteStore::Open(cut);
    ASSERT_TRUE(store.ok()) << store.status();
  }
  const auto size = std::filesystem::file_size(cut);
  ASSERT_GT(size, 8192u);
  std::filesystem::resize_file(cut, 4096);
  auto truncated = SqliteStore::Open(cut);
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find(cut.string() + ": not a SQLite database"),
            std::string::npos)
      << truncated.status();
}

// A database written by schema 1 (no sweeps.details column) opens, gains the column and keeps
// its rows; details written afterwards come back from Load.
TEST(SqliteStoreMigrationTest, Schema1DatabaseGainsSweepDetails) {
  testing::TempDir tmp;
  const auto path = tmp.path() / "old.db";
  std::string out;
  ASSERT_EQ(testing::RunCommand(
                {"sqlite3", path.string(),
                 "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                 "CREATE TABLE sweeps(id TEXT PRIMARY KEY, seq INTEGER NOT NULL, state TEXT NOT "
                 "NULL, request BLOB NOT NULL, repo TEXT, ttxla_commit TEXT, forge_commit TEXT, "
                 "archs TEXT, playbooks TEXT, problems TEXT, created_by TEXT, error TEXT, "
                 "created_ms INTEGER, finished_ms INTEGER);"
                 "INSERT INTO meta VALUES('schema','1');"
                 "INSERT INTO sweeps(id, seq, state, request) VALUES('sw-0001', 1, 'succeeded', "
                 "x'');"},
                tmp.path(), &out),
            0)
      << out;
  auto store = SqliteStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto snap = (*store)->Load();
  ASSERT_TRUE(snap.ok()) << snap.status();
  ASSERT_EQ(snap->sweeps.size(), 1u);
  EXPECT_EQ(snap->sweeps[0].id, "sw-0001");
  EXPECT_TRUE(snap->sweeps[0].details.forge_gitlink_commit().empty());

  SweepRecord s = Sweep("sw-0002");
  s.details.set_forge_gitlink_commit(std::string(40, 'c'));
  s.details.add_notes("pinned the checked-out submodule");
  Mutation m;
  m.name = "CreateSweep";
  m.sweeps.push_back(&s);
  ASSERT_TRUE((*store)->Stage(m).ok());
  ASSERT_TRUE((*store)->Flush().ok());
  store->reset();
  auto again = SqliteStore::Open(path);  // opening a migrated database changes nothing
  ASSERT_TRUE(again.ok()) << again.status();
  snap = (*again)->Load();
  ASSERT_TRUE(snap.ok()) << snap.status();
  ASSERT_EQ(snap->sweeps.size(), 2u);
  EXPECT_EQ(snap->sweeps[1].details.forge_gitlink_commit(), std::string(40, 'c'));
  ASSERT_EQ(snap->sweeps[1].details.notes_size(), 1);
  ASSERT_EQ(
      testing::RunCommand({"sqlite3", path.string(), "SELECT value FROM meta"}, tmp.path(), &out),
      0);
  EXPECT_EQ(out, "5\n");
}

// Runs sql on the database file at path through a connection of its own.
void ExecOrDie(const std::filesystem::path& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err != nullptr ? err : sqlite3_errmsg(db)) << "\n" << sql;
  sqlite3_free(err);
  sqlite3_close(db);
}

// The first column of every row sql returns, as text ("NULL" for a NULL).
std::vector<std::string> ColumnOrDie(const std::filesystem::path& path, const std::string& sql) {
  std::vector<std::string> out;
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* q = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &q, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  while (sqlite3_step(q) == SQLITE_ROW) {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(q, 0));
    out.emplace_back(text != nullptr ? text : "NULL");
  }
  sqlite3_finalize(q);
  sqlite3_close(db);
  return out;
}

// Up to schema 3 a list column held its items joined with "\n". Opening such a database rewrites
// every list once as a JSON array of the items those versions read back (one per line), in the
// same columns; a second open changes nothing, and lists written afterwards keep line breaks and
// empty items.
TEST(SqliteStoreMigrationTest, Schema3ListsJoinedByLinesBecomeJsonArrays) {
  testing::TempDir tmp;
  const auto path = tmp.path() / "old.db";
  ExecOrDie(path, R"sql(
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE sweeps(
  id TEXT PRIMARY KEY, seq INTEGER NOT NULL, state TEXT NOT NULL, request BLOB NOT NULL,
  repo TEXT, ttxla_commit TEXT, forge_commit TEXT, archs TEXT, playbooks TEXT, problems TEXT,
  created_by TEXT, error TEXT, created_ms INTEGER, finished_ms INTEGER, details BLOB);
CREATE TABLE shards(
  id TEXT PRIMARY KEY, sweep_id TEXT NOT NULL, seq INTEGER NOT NULL, state TEXT NOT NULL,
  priority INTEGER, expected_s REAL, attempts INTEGER, token INTEGER, depends_on TEXT,
  enqueued_ms INTEGER, eligible_ms INTEGER, last_error TEXT, archs TEXT, cpu_ok INTEGER,
  spec BLOB, lease_id TEXT, lease_agent TEXT, lease_session TEXT, lease_token INTEGER,
  lease_granted_ms INTEGER, infra_losses INTEGER DEFAULT 0);
INSERT INTO meta VALUES('schema', '3');
INSERT INTO sweeps(id, seq, state, request, archs, playbooks, problems) VALUES
  ('sw-0001', 1, 'running', x'', 'n150' || char(10) || 'p150', 'unpack_forward_output',
   'tests/a.yaml:3: bad reason' || char(10) || 'tests/b.yaml: entry ''x'' left out'),
  ('sw-0002', 2, 'succeeded', x'', '', NULL, '["looks like JSON"]' || char(10));
INSERT INTO shards(id, sweep_id, seq, state, archs) VALUES
  ('sw-0001-s1', 'sw-0001', 3, 'queued', 'n150' || char(10) || 'p150'),
  ('sw-0001-s2', 'sw-0001', 4, 'queued', '');
)sql");

  auto store = SqliteStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto check = [](const Snapshot& snap) {
    using Items = std::vector<std::string>;
    ASSERT_EQ(snap.sweeps.size(), 2u);
    EXPECT_EQ(snap.sweeps[0].archs, (Items{"n150", "p150"}));
    EXPECT_EQ(snap.sweeps[0].playbooks, (Items{"unpack_forward_output"}));
    EXPECT_EQ(snap.sweeps[0].problems,
              (Items{"tests/a.yaml:3: bad reason", "tests/b.yaml: entry 'x' left out"}));
    EXPECT_EQ(snap.sweeps[1].archs, Items{});
    EXPECT_EQ(snap.sweeps[1].playbooks, Items{});
    EXPECT_EQ(snap.sweeps[1].problems, (Items{"[\"looks like JSON\"]"}));
    ASSERT_EQ(snap.shards.size(), 2u);
    EXPECT_EQ(snap.shards[0].archs, (Items{"n150", "p150"}));
    EXPECT_EQ(snap.shards[1].archs, Items{});
    // Schema 5's backup columns are added empty: no backup lease.
    EXPECT_FALSE(snap.shards[0].backup.has_value());
  };
  auto snap = (*store)->Load();
  ASSERT_TRUE(snap.ok()) << snap.status();
  check(*snap);
  EXPECT_EQ(ColumnOrDie(path, "SELECT value FROM meta WHERE key='schema'"),
            std::vector<std::string>{"5"});
  EXPECT_EQ(ColumnOrDie(path, "SELECT archs FROM shards ORDER BY seq"),
            (std::vector<std::string>{R"(["n150","p150"])", "[]"}));
  EXPECT_EQ(ColumnOrDie(path, "SELECT playbooks FROM sweeps ORDER BY seq"),
            (std::vector<std::string>{R"(["unpack_forward_output"])", "NULL"}));

  // Written after the migration: line breaks and empty items, in a sweep and in a shard.
  SweepRecord s = Sweep("sw-0003");
  s.seq = 5;
  s.problems = {"first line\nsecond line", "", "last\n"};
  ShardRecord shard = Shard("sw-0003-s1", s.id);
  shard.seq = 6;
  shard.archs = {"", "n150\np150"};
  Mutation m;
  m.name = "CreateSweep";
  m.sweeps.push_back(&s);
  m.shard_specs.push_back(&shard);
  ASSERT_TRUE((*store)->Stage(m).ok());
  ASSERT_TRUE((*store)->Flush().ok());
  store->reset();

  auto again = SqliteStore::Open(path);  // the lists are JSON already: nothing is rewritten
  ASSERT_TRUE(again.ok()) << again.status();
  snap = (*again)->Load();
  ASSERT_TRUE(snap.ok()) << snap.status();
  ASSERT_EQ(snap->sweeps.size(), 3u);
  ASSERT_EQ(snap->shards.size(), 3u);
  EXPECT_EQ(snap->sweeps[2].problems, s.problems);
  EXPECT_EQ(snap->shards[2].archs, shard.archs);
  snap->sweeps.pop_back();
  snap->shards.pop_back();
  check(*snap);
}

// A list column that holds neither JSON nor NULL makes Load fail with the record and column
// named, rather than come back as something else.
TEST(SqliteStoreMigrationTest, AnUnreadableListIsDataLoss) {
  testing::TempDir tmp;
  const auto path = tmp.path() / "state.db";
  {
    auto store = SqliteStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE(CreateSweep(**store, Sweep("sw-0001")));
  }
  ExecOrDie(path, "UPDATE sweeps SET problems='n150' || char(10) || 'p150'");
  auto store = SqliteStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto snap = (*store)->Load();
  ASSERT_FALSE(snap.ok());
  EXPECT_TRUE(absl::IsDataLoss(snap.status())) << snap.status();
  EXPECT_EQ(snap.status().message(), "sweep sw-0001: unreadable problems");
}

}  // namespace
}  // namespace triage::coord
