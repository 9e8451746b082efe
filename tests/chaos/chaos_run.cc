// chaos_run: the ttxla-mini fixture sweep on a loopback cluster (a coordinator, 2 n150, 2 p150
// and 1 CPU agent, real processes, native executor, short lease TTLs), first without faults and
// then once per seed under a seeded schedule of faults:
//   - agents SIGKILLed, restarted on the same data dir or a fresh one;
//   - the coordinator SIGKILLed twice and restarted on the same data dir and ports;
//   - an agent SIGSTOPped past its lease TTL, then SIGCONTed (a late Complete is stale);
//   - the coordinator's disk filled (its data dir is a small tmpfs) for a few seconds;
//   - coordinator.db deleted while the coordinator runs.
// Backup leases are on, with a short due time, in every run: idle agents race leased shards, and
// whichever attempt's result comes first decides (docs/farm.md, "Backup leases").
// Each faulty run must end with both patches and every report.json outcome equal to the
// fault-free run's, every shard's result stored exactly once (read from SQLite), nothing
// quarantined, and every result an agent finished on a data dir that survived accepted or
// refused as stale. Prints one table row per seed; exits 1 when any run breaks a rule, or when no
// backup lease raced its original in any run. See docs/chaos.md.
//
//   chaos_run [--seeds 1,2,3 | --seeds N] [--keep]

#include <signal.h>
#include <sys/mount.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/support/test_support.h"

namespace triage::chaos {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

const std::string kSrc = TRIAGE_SOURCE_DIR;
constexpr int kLeaseTtlSeconds = 8;
// A leased shard gets a backup on an idle agent once it has run 0.001 x its expected seconds
// (the fixture's entries are planned at the playbooks' estimates, minutes) plus 3 s.
constexpr char kBackupAfter[] = "0.001";
constexpr char kBackupSlackSeconds[] = "3";

std::string Addr(int port) { return "127.0.0.1:" + std::to_string(port); }

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

void Log(const std::string& line) { std::cerr << "chaos: " << line << std::endl; }

// One cluster run: a coordinator and five agents over their own workspaces.
class Cluster {
 public:
  struct Agent {
    std::string id;
    std::string arch;  // "cpu" for the CPU-only agent
    fs::path workspace;
    fs::path data;
    int generation = 0;
    bool lost_data = false;  // restarted on a fresh data dir at least once
    bool faulted = false;    // killed or stopped at least once
    std::unique_ptr<testing::ChildProcess> proc;
  };

  Cluster(fs::path dir, fs::path repo, bool tmpfs_data)
      : dir_(std::move(dir)), repo_(std::move(repo)) {
    fs::create_directories(dir_);
    cdata_ = dir_ / "cdata";
    fs::create_directories(cdata_);
    if (tmpfs_data) {
      mounted_ = ::mount("tmpfs", cdata_.c_str(), "tmpfs", 0, "size=48m") == 0;
      if (!mounted_) Log("cannot mount a tmpfs (not root?): the disk-full fault is left out");
    }
    agent_port_ = testing::FreePort();
    control_port_ = testing::FreePort();
    const std::vector<std::pair<std::string, std::string>> kinds = {{"n150", "n150-a"},
                                                                    {"n150", "n150-b"},
                                                                    {"p150", "p150-a"},
                                                                    {"p150", "p150-b"},
                                                                    {"cpu", "cpu-a"}};
    for (const auto& [arch, name] : kinds) {
      Agent a;
      a.id = "chaos-" + name;
      a.arch = arch;
      a.workspace = dir_ / ("ws-" + name);
      a.data = dir_ / ("data-" + name + "-0");
      agents_.push_back(std::move(a));
    }
  }

  ~Cluster() {
    StopAll();
    if (mounted_) ::umount2(cdata_.c_str(), MNT_DETACH);
  }

  bool mounted() const { return mounted_; }
  int control_port() const { return control_port_; }
  const fs::path& dir() const { return dir_; }
  const fs::path& repo() const { return repo_; }
  const fs::path& cdata() const { return cdata_; }
  std::vector<Agent>& agents() { return agents_; }

  bool Setup() {
    for (auto& a : agents_) {
      std::string out;
      if (testing::RunCommand({kSrc + "/tests/fixtures/make-workspace.sh", "--clone",
                               repo_.string(), a.workspace.string()},
                              dir_, &out) != 0) {
        Log("cannot clone the fixture: " + out);
        return false;
      }
    }
    if (!StartCoordinator()) return false;
    for (std::size_t i = 0; i < agents_.size(); ++i) StartAgent(i, false);
    return testing::WaitFor([&] { return LiveAgents() == static_cast<int>(agents_.size()); }, 60s);
  }

  bool StartCoordinator() {
    coordinator_ = std::make_unique<testing::ChildProcess>();
    const fs::path log = dir_ / ("coordinator." + std::to_string(coordinator_starts_++) + ".log");
    if (!coordinator_->Start({testing::kCoordinatorBinary,
                              "--insecure",
                              "--data_dir",
                              cdata_.string(),
                              "--agent_address",
                              Addr(agent_port_),
                              "--control_address",
                              Addr(control_port_),
                              "--metrics_address",
                              "",
                              "--tick_ms",
                              "100",
                              "--lease_ttl_seconds",
                              std::to_string(kLeaseTtlSeconds),
                              "--agent_dead_after_seconds",
                              std::to_string(kLeaseTtlSeconds),
                              "--heartbeat_interval_seconds",
                              "1",
                              "--lease_wait_seconds",
                              "2",
                              "--backoff_base_seconds",
                              "1",
                              "--backoff_max_seconds",
                              "4",
                              "--backup_after",
                              kBackupAfter,
                              "--backup_slack_seconds",
                              kBackupSlackSeconds},
                             dir_, log, testing::GitTestEnv())) {
      return false;
    }
    if (!testing::WaitForCoordinator(control_port_, dir_, 30s)) {
      Log("the coordinator did not come up: " + testing::ReadFileOrDie(log));
      return false;
    }
    return true;
  }

  void KillCoordinator() {
    coordinator_->Signal(SIGKILL);
    coordinator_->Wait(10s);
  }

  void StartAgent(std::size_t i, bool fresh_data) {
    Agent& a = agents_[i];
    ++a.generation;
    if (fresh_data) {
      a.data = dir_ / ("data-" + a.id.substr(6) + "-" + std::to_string(a.generation));
      a.lost_data = true;
    }
    std::vector<std::string> argv = {testing::kAgentBinary,
                                     "--insecure",
                                     "--coordinator",
                                     Addr(agent_port_),
                                     "--agent_id",
                                     a.id,
                                     "--workspace",
                                     a.workspace.string(),
                                     "--data_dir",
                                     a.data.string(),
                                     "--executors",
                                     "native",
                                     "--lease_wait_seconds",
                                     "2",
                                     "--pytest_timeout_seconds",
                                     "240",
                                     "--metrics_address",
                                     ""};
    if (a.arch == "cpu") {
      argv.push_back("--cpu_only");
    } else {
      // The fixture emulates the device: a stand-in for /dev/tenstorrent with one device.
      argv.insert(argv.end(), {"--arch", a.arch, "--device_path",
                               testing::FakeDevices(dir_ / ("dev-" + a.id)).string()});
    }
    a.proc = std::make_unique<testing::ChildProcess>();
    a.proc->Start(argv, dir_, dir_ / (a.id + "." + std::to_string(a.generation) + ".log"),
                  testing::GitTestEnv());
  }

  int Ctl(std::vector<std::string> args, std::string* out) {
    return testing::RunCtl(control_port_, std::move(args), dir_, out);
  }

  int LiveAgents() {
    std::string out;
    if (Ctl({"agents", "list", "-o", "json"}, &out) != 0) return 0;
    auto j = json::parse(out, nullptr, false);
    int live = 0;
    for (const auto& a : j.value("agents", json::array())) {
      live += a.value("state", "") != "offline" &&
              a["dimensions"].value("agent_id", "").starts_with("chaos-");
    }
    return live;
  }

  // The sweep's state, or "" while the coordinator does not answer.
  std::string SweepState(const std::string& id) {
    std::string out;
    if (Ctl({"sweep", "status", id, "-o", "json"}, &out) != 0) return "";
    auto j = json::parse(out, nullptr, false);
    return j.is_object() ? j.value("state", "") : "";
  }

  void StopAll() {
    for (auto& a : agents_) {
      if (a.proc && a.proc->running()) {
        a.proc->Signal(SIGCONT);
        a.proc->Signal(SIGTERM);
      }
    }
    for (auto& a : agents_) {
      if (a.proc) a.proc->Wait(20s);
    }
    if (coordinator_ && coordinator_->running()) {
      coordinator_->Signal(SIGTERM);
      coordinator_->Wait(20s);
    }
  }

 private:
  fs::path dir_;
  fs::path repo_;
  fs::path cdata_;
  bool mounted_ = false;
  int agent_port_ = 0;
  int control_port_ = 0;
  int coordinator_starts_ = 0;
  std::unique_ptr<testing::ChildProcess> coordinator_;
  std::vector<Agent> agents_;
};

// What a run leaves to compare: patches, report outcomes, and what SQLite holds.
struct Outcome {
  bool finished = false;
  std::string state;
  double seconds = 0;
  std::string ttxla_patch;
  std::string forge_patch;
  json entries;  // report.json entries without evidence links and measured durations
  json totals;
  int results = 0;
  int result_shards = 0;
  int quarantined = 0;
  int succeeded_shards = 0;
  int attempts = 0;
  std::set<std::string> accepted_leases;
  std::vector<std::pair<std::string, std::string>> attempt_agents;  // (agent, outcome) per row
  int backups = 0;      // backup leases granted (attempt rows marked backup)
  int backups_won = 0;  // of those, the ones whose result decided the shard
  std::string error;
};

// Rows of `sqlite3 -separator '|' DB SQL`.
std::vector<std::vector<std::string>> Query(const fs::path& db, const std::string& sql) {
  std::string out;
  std::vector<std::vector<std::string>> rows;
  if (testing::RunCommand({"sqlite3", "-readonly", "-separator", "|", db.string(), sql},
                          db.parent_path(), &out) != 0) {
    Log("sqlite3 " + sql + ": " + out);
    return rows;
  }
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cols;
    std::string col;
    std::istringstream l(line);
    while (std::getline(l, col, '|')) cols.push_back(col);
    rows.push_back(cols);
  }
  return rows;
}

int QueryInt(const fs::path& db, const std::string& sql) {
  auto rows = Query(db, sql);
  return rows.empty() || rows[0].empty() ? -1 : std::stoi(rows[0][0]);
}

Outcome Collect(Cluster& c, const std::string& sweep) {
  Outcome o;
  o.state = c.SweepState(sweep);
  const fs::path out = c.dir() / "out";
  std::string log;
  if (c.Ctl({"sweep", "patch", sweep, "--out", out.string()}, &log) != 0 ||
      c.Ctl({"sweep", "report", sweep, "--out", out.string()}, &log) != 0) {
    o.error = "cannot fetch the outputs: " + log;
    return o;
  }
  o.ttxla_patch = testing::ReadFileOrDie(out / "tt-xla.patch");
  o.forge_patch = testing::ReadFileOrDie(out / "tt-forge-models.patch");
  auto report = json::parse(testing::ReadFileOrDie(out / "report.json"), nullptr, false);
  if (!report.is_object()) {
    o.error = "report.json does not parse";
    return o;
  }
  o.entries = report.value("entries", json::array());
  // Evidence paths and the measured pytest times belong to the run, not to its decisions.
  for (auto& e : o.entries) {
    e.erase("evidence");
    e.erase("durations");
  }
  o.totals = report.value("totals", json::object());
  c.StopAll();
  const fs::path db = c.cdata() / "coordinator.db";
  o.results = QueryInt(db, "SELECT COUNT(*) FROM results");
  o.result_shards = QueryInt(db, "SELECT COUNT(DISTINCT shard_id) FROM results");
  o.quarantined = QueryInt(db, "SELECT COUNT(*) FROM shards WHERE state = 'quarantined'");
  o.succeeded_shards = QueryInt(db, "SELECT COUNT(*) FROM shards WHERE state = 'succeeded'");
  o.attempts = QueryInt(db, "SELECT COUNT(*) FROM attempts");
  for (const auto& row : Query(db, "SELECT lease_id FROM results")) {
    if (!row.empty()) o.accepted_leases.insert(row[0]);
  }
  for (const auto& row : Query(db, "SELECT agent_id, outcome, backup FROM attempts")) {
    if (row.size() != 3) continue;
    if (row[2] == "1") {
      // A backup races its original: whichever loses is the race's cost, not a redo.
      ++o.backups;
      if (row[1] == "succeeded") ++o.backups_won;
      continue;
    }
    if (row[1] == "superseded") continue;  // an original a backup beat
    o.attempt_agents.emplace_back(row[0], row[1]);
  }
  return o;
}

// Starts the sweep and waits for its end; the faults (if any) run meanwhile on this thread.
std::string StartSweep(Cluster& c) {
  std::string out;
  if (c.Ctl({"sweep", "start", "--repo", c.repo().string(), "--arch", "n150,p150", "--executor",
             "native", "--reason", "chaos", "-o", "json"},
            &out) != 0) {
    Log("sweep start failed: " + out);
    return "";
  }
  auto j = json::parse(out, nullptr, false);
  return j.is_object() ? j.value("id", "") : "";
}

bool Ended(const std::string& state) {
  return state == "succeeded" || state == "failed" || state == "cancelled";
}

// Leases an agent tried to deliver (from its logs), and the ones it was told were stale.
struct Deliveries {
  std::map<std::string, std::string> tried;  // lease -> agent id
  std::set<std::string> rejected;
};

Deliveries ReadAgentLogs(Cluster& c) {
  Deliveries d;
  static const std::regex tried(
      R"((?:result of|complete|re-sending the result of) ([A-Za-z0-9_.:-]+-l[0-9]+))");
  static const std::regex rejected(R"(result of ([A-Za-z0-9_.:-]+-l[0-9]+) (?:rejected|refused))");
  for (auto& a : c.agents()) {
    for (int g = 1; g <= a.generation; ++g) {
      std::ifstream in(c.dir() / (a.id + "." + std::to_string(g) + ".log"));
      std::string line;
      while (std::getline(in, line)) {
        std::smatch m;
        if (std::regex_search(line, m, rejected)) d.rejected.insert(m[1]);
        if (std::regex_search(line, m, tried)) d.tried.emplace(m[1], a.id);
      }
    }
  }
  return d;
}

struct Fault {
  double at;  // fraction of the fault-free run's duration
  std::string kind;
};

struct Row {
  int seed = 0;
  int faults = 0;
  bool identical = false;
  int lost = 0;
  int duplicated = 0;
  int stale = 0;
  int redone_agent = 0;  // extra attempts on agents that were killed or stopped
  int redone_farm = 0;   // extra attempts anywhere else: the farm's own doing
  int quarantined = 0;
  int backups = 0;
  int backups_won = 0;
  double ratio = 0;
  std::vector<std::string> problems;
};

// Writes a file until the disk is full; returns its path.
fs::path FillDisk(const fs::path& dir) {
  const fs::path filler = dir / "filler";
  std::FILE* f = std::fopen(filler.c_str(), "wb");
  if (f == nullptr) return filler;
  std::vector<char> block(1 << 16, 'x');
  while (std::fwrite(block.data(), 1, block.size(), f) == block.size()) {
    if (std::fflush(f) != 0) break;
  }
  std::fclose(f);
  return filler;
}

Row RunSeed(int seed, const fs::path& root, const fs::path& repo, const Outcome& base,
            double base_seconds) {
  Row row;
  row.seed = seed;
  Cluster c(root / ("seed-" + std::to_string(seed)), repo, /*tmpfs_data=*/true);
  if (!c.Setup()) {
    row.problems.push_back("the cluster did not start");
    return row;
  }
  std::mt19937 rng(static_cast<unsigned>(seed));
  std::uniform_real_distribution<double> when(0.05, 0.75);
  std::vector<Fault> faults = {{when(rng), "kill-agent"},       {when(rng), "kill-agent"},
                               {when(rng), "kill-coordinator"}, {when(rng), "kill-coordinator"},
                               {when(rng), "stop-agent"},       {when(rng), "delete-db"}};
  if (c.mounted()) faults.push_back({when(rng), "disk-full"});
  std::sort(faults.begin(), faults.end(),
            [](const Fault& a, const Fault& b) { return a.at < b.at; });

  const auto start = Clock::now();
  const std::string sweep = StartSweep(c);
  if (sweep.empty()) {
    row.problems.push_back("the sweep did not start");
    return row;
  }
  std::uniform_int_distribution<std::size_t> pick(0, c.agents().size() - 1);
  std::uniform_real_distribution<double> pause(0.3, 1.5);
  for (const Fault& f : faults) {
    while (Seconds(Clock::now() - start) < f.at * base_seconds) std::this_thread::sleep_for(50ms);
    if (Ended(c.SweepState(sweep))) break;
    const double t = Seconds(Clock::now() - start);
    ++row.faults;
    if (f.kind == "kill-agent") {
      const std::size_t i = pick(rng);
      const bool fresh = std::bernoulli_distribution(0.5)(rng);
      Log("seed " + std::to_string(seed) + " t=" + std::to_string(t) + "s: SIGKILL " +
          c.agents()[i].id + (fresh ? " (restart on a fresh data dir)" : ""));
      c.agents()[i].faulted = true;
      c.agents()[i].proc->Signal(SIGKILL);
      c.agents()[i].proc->Wait(10s);
      std::this_thread::sleep_for(std::chrono::duration<double>(pause(rng)));
      c.StartAgent(i, fresh);
    } else if (f.kind == "kill-coordinator") {
      Log("seed " + std::to_string(seed) + " t=" + std::to_string(t) + "s: SIGKILL coordinator");
      c.KillCoordinator();
      std::this_thread::sleep_for(std::chrono::duration<double>(pause(rng)));
      if (!c.StartCoordinator()) {
        row.problems.push_back("the coordinator did not restart");
        return row;
      }
    } else if (f.kind == "stop-agent") {
      const std::size_t i = pick(rng);
      Log("seed " + std::to_string(seed) + " t=" + std::to_string(t) + "s: SIGSTOP " +
          c.agents()[i].id + " past its lease TTL");
      c.agents()[i].faulted = true;
      c.agents()[i].proc->Signal(SIGSTOP);
      std::this_thread::sleep_for(std::chrono::seconds(kLeaseTtlSeconds + 3));
      c.agents()[i].proc->Signal(SIGCONT);
    } else if (f.kind == "disk-full") {
      Log("seed " + std::to_string(seed) + " t=" + std::to_string(t) +
          "s: the coordinator's disk is full for 4 s");
      const fs::path filler = FillDisk(c.cdata());
      std::this_thread::sleep_for(4s);
      std::error_code ec;
      fs::remove(filler, ec);
    } else if (f.kind == "delete-db") {
      Log("seed " + std::to_string(seed) + " t=" + std::to_string(t) + "s: rm coordinator.db");
      std::error_code ec;
      fs::remove(c.cdata() / "coordinator.db", ec);
    }
  }
  const bool ended = testing::WaitFor([&] { return Ended(c.SweepState(sweep)); }, 15min);
  const double seconds = Seconds(Clock::now() - start);
  row.ratio = seconds / base_seconds;
  if (!ended) {
    row.problems.push_back("the sweep did not end within 15 minutes");
    return row;
  }
  Outcome o = Collect(c, sweep);
  if (!o.error.empty()) row.problems.push_back(o.error);
  if (o.state != "succeeded") row.problems.push_back("sweep ended " + o.state);
  row.identical = o.error.empty() && o.ttxla_patch == base.ttxla_patch &&
                  o.forge_patch == base.forge_patch && o.entries == base.entries &&
                  o.totals == base.totals;
  if (!row.identical) {
    if (o.ttxla_patch != base.ttxla_patch) row.problems.push_back("tt-xla.patch differs");
    if (o.forge_patch != base.forge_patch) row.problems.push_back("tt-forge-models.patch differs");
    if (o.entries != base.entries) row.problems.push_back("report.json entries differ");
    if (o.totals != base.totals) row.problems.push_back("report.json totals differ");
  }
  row.duplicated = o.results - o.result_shards;
  if (row.duplicated != 0) row.problems.push_back("a shard's result was stored twice");
  // Shards that end without running (a wave that finds nothing left to verify) succeed without
  // a result, so the count to match is the fault-free run's.
  if (o.result_shards != base.result_shards || o.succeeded_shards != base.succeeded_shards) {
    row.problems.push_back("stored results (" + std::to_string(o.result_shards) + " of " +
                           std::to_string(o.succeeded_shards) +
                           " shards) differ from the "
                           "fault-free run's (" +
                           std::to_string(base.result_shards) + " of " +
                           std::to_string(base.succeeded_shards) + ")");
  }
  row.quarantined = o.quarantined;
  row.backups = o.backups;
  row.backups_won = o.backups_won;
  if (o.quarantined != 0) row.problems.push_back("shards were quarantined");
  // Extra attempts: every lease beyond one per shard.
  std::set<std::string> faulted;
  std::set<std::string> lost_data;
  for (const auto& a : c.agents()) {
    if (a.faulted) faulted.insert(a.id);
    if (a.lost_data) lost_data.insert(a.id);
  }
  for (const auto& [agent, outcome] : o.attempt_agents) {
    if (outcome == "succeeded") continue;
    (faulted.count(agent) ? row.redone_agent : row.redone_farm) += 1;
  }
  // Results an agent finished and tried to deliver: each is accepted, or was stale (its lease
  // expired while the agent was stopped), unless the agent's data dir was thrown away.
  const Deliveries d = ReadAgentLogs(c);
  row.stale = static_cast<int>(d.rejected.size());
  for (const auto& [lease, agent] : d.tried) {
    if (o.accepted_leases.count(lease) || d.rejected.count(lease) || lost_data.count(agent)) {
      continue;
    }
    ++row.lost;
    row.problems.push_back("the result of " + lease + " (" + agent + ") was never accepted");
  }
  if (row.redone_farm != 0) {
    row.problems.push_back(std::to_string(row.redone_farm) +
                           " lease(s) lost on agents without a fault");
  }
  return row;
}

int Main(int argc, char** argv) {
  std::vector<int> seeds = {1, 2, 3};
  bool keep = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--seeds" && i + 1 < argc) {
      const std::string v = argv[++i];
      seeds.clear();
      if (v.find(',') == std::string::npos) {
        for (int s = 1; s <= std::stoi(v); ++s) seeds.push_back(s);
      } else {
        std::istringstream in(v);
        std::string s;
        while (std::getline(in, s, ',')) seeds.push_back(std::stoi(s));
      }
    } else if (arg == "--keep") {
      keep = true;
    } else if (arg == "-h" || arg == "--help") {
      std::cout << "usage: chaos_run [--seeds N | --seeds A,B,C] [--keep]\n"
                   "  The fixture sweep without faults, then once per seed under seeded faults;\n"
                   "  one table row per seed. --keep leaves the run directories.\n";
      return 0;
    } else {
      std::cerr << "chaos_run: unknown argument " << arg << " (see --help)\n";
      return 2;
    }
  }
  testing::SetGitTestEnv();
  testing::TempDir tmp;
  const fs::path root = tmp.path();
  std::string out;
  if (testing::RunCommand({kSrc + "/tests/fixtures/make-workspace.sh", (root / "src").string()},
                          root, &out) != 0) {
    std::cerr << "chaos_run: cannot make the fixture workspace: " << out;
    return 1;
  }
  const fs::path repo = root / "src" / "tt-xla";

  Log("the fault-free run");
  Outcome base;
  double base_seconds = 0;
  {
    Cluster c(root / "fault-free", repo, /*tmpfs_data=*/false);
    if (!c.Setup()) return 1;
    const auto start = Clock::now();
    const std::string sweep = StartSweep(c);
    if (sweep.empty() || !testing::WaitFor([&] { return Ended(c.SweepState(sweep)); }, 15min)) {
      std::cerr << "chaos_run: the fault-free sweep did not end\n";
      return 1;
    }
    base_seconds = Seconds(Clock::now() - start);
    base = Collect(c, sweep);
    if (!base.error.empty() || base.state != "succeeded") {
      std::cerr << "chaos_run: the fault-free sweep ended " << base.state << " " << base.error
                << "\n";
      return 1;
    }
    Log("fault-free: " + std::to_string(base_seconds) + " s, " +
        std::to_string(base.succeeded_shards) + " shards");
  }

  std::vector<Row> rows;
  for (int seed : seeds) {
    Log("seed " + std::to_string(seed));
    rows.push_back(RunSeed(seed, root, repo, base, base_seconds));
  }
  std::printf("fault-free run: %.1f s, %d shards, %d backup leases (%d won)\n\n", base_seconds,
              base.succeeded_shards, base.backups, base.backups_won);
  std::printf("%-5s %-7s %-10s %-5s %-11s %-6s %-14s %-12s %-12s %-13s %s\n", "seed", "faults",
              "identical", "lost", "duplicated", "stale", "redone(agent)", "redone(farm)",
              "quarantined", "backups(won)", "time vs fault-free");
  bool ok = true;
  int backups = base.backups;
  for (const Row& r : rows) {
    std::printf("%-5d %-7d %-10s %-5d %-11d %-6d %-14d %-12d %-12d %-13s %.2fx\n", r.seed, r.faults,
                r.identical ? "yes" : "NO", r.lost, r.duplicated, r.stale, r.redone_agent,
                r.redone_farm, r.quarantined,
                (std::to_string(r.backups) + "(" + std::to_string(r.backups_won) + ")").c_str(),
                r.ratio);
    for (const auto& p : r.problems) std::printf("      seed %d: %s\n", r.seed, p.c_str());
    ok = ok && r.problems.empty();
    backups += r.backups;
  }
  if (backups == 0) {
    std::printf("no backup lease raced its original in any run: the runs did not test them\n");
    ok = false;
  }
  std::fflush(stdout);
  if (keep) {
    const fs::path kept = fs::temp_directory_path() / "triage-chaos-kept";
    std::error_code ec;
    fs::remove_all(kept, ec);
    fs::rename(root, kept, ec);
    std::printf("run directories kept in %s\n", kept.c_str());
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace triage::chaos

int main(int argc, char** argv) { return triage::chaos::Main(argc, argv); }
