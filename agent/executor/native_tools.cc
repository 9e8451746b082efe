#include "agent/executor/native_tools.h"

#include <fstream>
#include <optional>
#include <utility>

#include "agent/playbooks/probe.h"
#include "common/inventory/key.h"
#include "common/junit/reason.h"
#include "common/process/process.h"
#include "common/util/file.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::agent {

absl::StatusOr<std::vector<playbooks::ProbeDoc>> NativeTools::Probe(const std::string& key,
                                                                    const std::string& mode) {
  // The probe's documents are recorded per phase (probes/<key>.<phase>.<seq>.json), so only a
  // mode with known phases is run (the same table ReplayTools answers from).
  if (playbooks::ProbePhases(mode).empty()) {
    return absl::InvalidArgumentError(util::StrCat("unknown probe mode ", mode));
  }
  const auto run_dir = options_.shard_dir / "runs" / util::StrCat("probe-", ++runs_);
  std::filesystem::create_directories(run_dir);
  std::filesystem::create_directories(options_.shard_dir / "probes");
  std::filesystem::create_directories(options_.shard_dir / "logs");
  const auto log = options_.shard_dir / "logs" /
                   util::StrCat(playbooks::KeyFileName(key), ".probe-", mode, "-", runs_, ".log");
  process::RunOptions run;
  run.argv = {options_.python, (options_.scripts_dir / "triage_probe.py").string(),
              "--root",        options_.workspace.string(),
              "--key",         key,
              "--mode",        mode};
  run.cwd = run_dir;
  run.timeout = options_.probe_timeout;
  run.nice = options_.probe_nice;
  run.separate_stderr = true;
  run.cancelled = options_.cancelled;
  auto res = process::Run(run);
  if (!res.ok()) return res.status();
  (void)util::WriteFileAtomic(log, util::StrCat(res->err, res->output));
  evidence_[util::StrCat("logs/", log.filename().string())] = log;
  if (res->timed_out) {
    if (options_.on_timeout) options_.on_timeout("probe");
    return absl::DeadlineExceededError(util::StrCat("probe of ", key, " ", res->Describe()));
  }
  if (res->cancelled) return absl::CancelledError("cancelled");
  if (res->exit_code != 0) {
    return absl::InternalError(util::StrCat("probe of ", key, " ", res->Describe(), ": ",
                                            util::StrJoin(process::TailLines(res->err, 5), " | ")));
  }
  auto docs = playbooks::ParseProbeOutput(res->output);
  if (!docs.ok()) return docs.status();
  for (auto& d : *docs) {
    d.seq = seq_[util::StrCat(key, "\n", d.phase)]++;
    d.raw["seq"] = d.seq;
    const auto file = options_.shard_dir / "probes" /
                      util::StrCat(playbooks::KeyFileName(key), ".", d.phase, ".", d.seq, ".json");
    (void)util::WriteFileAtomic(file, d.raw.dump(2) + "\n");
    evidence_[util::StrCat("probes/", file.filename().string())] = file;
  }
  return docs;
}

absl::StatusOr<playbooks::PytestRun> NativeTools::Pytest(const std::vector<std::string>& keys,
                                                         const std::string& label) {
  const auto run_dir = options_.shard_dir / "runs" / util::StrCat("pytest-", ++runs_);
  std::filesystem::create_directories(run_dir);
  std::filesystem::create_directories(options_.shard_dir / "junit");
  std::filesystem::create_directories(options_.shard_dir / "logs");
  const std::string name = util::StrCat(runs_ < 10 ? "0" : "", runs_, "-", label);
  const auto xml = options_.shard_dir / "junit" / util::StrCat(name, ".xml");
  const auto log = options_.shard_dir / "logs" / util::StrCat(name, ".log");
  std::filesystem::remove(log);
  process::RunOptions run;
  // Absolute node ids: pytest finds the workspace's pytest.ini and the runner's conftest (which
  // defines --force-run and --arch) from them, while the run's own directory holds the stage file.
  run.argv = {options_.python,
              "-m",
              "pytest",
              "-p",
              "triage_pytest_plugin",
              "--force-run",
              "--runxfail",
              util::StrCat("--junitxml=", xml.string()),
              "-o",
              "junit_family=xunit1",
              util::StrCat("--arch=", options_.arch),
              "-q",
              "-rA"};
  // A run of one test has the log to itself: pytest captures only Python's streams, so what
  // native code writes to the file descriptors goes straight to the log, where it outlives a
  // process that dies (pytest's fd capture of a test is lost with it: a compiler's UNREACHABLE
  // line would be). A shared run keeps fd capture, which files native output under its test.
  if (keys.size() == 1) run.argv.push_back("--capture=sys");
  for (const auto& k : keys) {
    run.argv.push_back(util::StrCat((options_.workspace / "tests/runner/test_models.py").string(),
                                    "::", inventory::TestFunctionOfKey(k), "[", k, "]"));
  }
  run.cwd = run_dir;
  run.timeout = options_.pytest_timeout;
  if (limit_.count() > 0 && (run.timeout.count() <= 0 || limit_ < run.timeout)) {
    run.timeout = limit_;
  }
  run.log_path = log;
  run.cancelled = options_.cancelled;
  // The plugin's JUnit file of the tests finished so far: what is left of a session that died.
  const auto partial = options_.shard_dir / "junit" / util::StrCat(name, ".xml.partial");
  run.env = {{"ENABLE_BRINGUP_STAGE_LOGGING", "1"},
             {"PYTHONPATH", options_.scripts_dir.string()},
             {"PYTHONDONTWRITEBYTECODE", "1"},
             {"TRIAGE_JUNIT_PARTIAL", partial.string()}};
  if (options_.on_progress) {
    // While the run goes, the partial file is looked at: when it has changed (the plugin
    // replaces it whole), what it holds is reported.
    PytestProgress progress;
    progress.junit_name = util::StrCat("junit/", xml.filename().string());
    progress.log_name = util::StrCat("logs/", log.filename().string());
    progress.partial_xml = partial;
    progress.log = log;
    std::optional<std::pair<std::filesystem::file_time_type, std::uintmax_t>> seen;
    run.on_poll = [this, &keys, progress = std::move(progress), seen]() mutable {
      std::error_code ec;
      const auto when = std::filesystem::last_write_time(progress.partial_xml, ec);
      const auto size = ec ? 0 : std::filesystem::file_size(progress.partial_xml, ec);
      if (!ec && (!seen || seen->first != when || seen->second != size)) {
        seen.emplace(when, size);
        if (auto report = junit::ParseJUnitFile(progress.partial_xml); report.ok()) {
          if (auto cases = junit::ForKeys(*report, keys); cases.ok()) {
            progress.cases = std::move(*cases);
            options_.on_progress(progress);
          }
        }
      }
    };
  }
  auto res = process::Run(run);
  {
    std::error_code ec;
    if (!std::filesystem::exists(xml, ec) && std::filesystem::exists(partial, ec)) {
      // pytest died before writing its file: the finished tests answer, the rest are missing.
      std::filesystem::rename(partial, xml, ec);
    }
    std::filesystem::remove(partial, ec);
    std::filesystem::remove(partial.string() + ".tmp", ec);
  }
  if (!res.ok()) return res.status();
  if (res->cancelled) return absl::CancelledError("cancelled");
  if (!res->timed_out && res->signal > 0) {
    // A process killed by a signal may print nothing about it (SIGKILL): the log says it, in
    // the words of pytest-forked's report, so that the recorded evidence tells a replay what a
    // native run was told by the exit status (docs/evidence.md).
    std::ofstream append(log, std::ios::app);
    // The runner deletes its stage file in the test's teardown, which a dead process never
    // reached: the file still says where the dying test was (docs/junit.md, "Crashes").
    if (auto stage = util::ReadFile(run_dir / "._bringup_stage.txt", 4096); stage.ok()) {
      std::string_view s = util::TrimWhitespace(*stage);
      s = util::TrimWhitespace(s.substr(0, s.find('\n')));
      if (!s.empty()) {
        append << "\n[triage-agent] the bringup stage file reads " << s;
      }
    }
    append << "\n[triage-agent] the pytest process CRASHED with signal " << res->signal << " ("
           << junit::SignalName(res->signal) << ")\n";
  }
  playbooks::PytestRun out;
  out.exit_code = res->exit_code;
  out.signal = res->timed_out ? 0 : res->signal;
  out.session_tests = keys.size();
  out.timed_out = res->timed_out;
  if (res->timed_out && options_.on_timeout) options_.on_timeout("verify");
  auto text = util::ReadFile(log, 64 << 20);
  if (text.ok()) out.log = std::move(*text);
  evidence_[util::StrCat("logs/", log.filename().string())] = log;
  out.evidence.push_back(util::StrCat("logs/", log.filename().string()));
  junit::Report report;
  if (std::filesystem::exists(xml)) {
    auto parsed = junit::ParseJUnitFile(xml);
    if (!parsed.ok()) return parsed.status();
    report = std::move(*parsed);
    out.xml = true;
    evidence_[util::StrCat("junit/", xml.filename().string())] = xml;
    out.evidence.push_back(util::StrCat("junit/", xml.filename().string()));
  }
  auto cases = junit::ForKeys(report, keys);
  if (!cases.ok()) return cases.status();
  out.cases = std::move(*cases);
  // A run that left no testcase for a key (crash, kill): its log answers for it.
  for (const auto& tc : out.cases) {
    if (tc.outcome != junit::Outcome::kMissing) continue;
    // docs/evidence.md's layout: logs/<key>.log (keys contain '/': nested directories).
    if (tc.key.find("..") != std::string::npos || tc.key.starts_with("/")) continue;
    const auto key_log = options_.shard_dir / "logs" / util::StrCat(tc.key, ".log");
    std::filesystem::create_directories(key_log.parent_path());
    (void)util::WriteFileAtomic(key_log, out.log);
    evidence_[util::StrCat("logs/", tc.key, ".log")] = key_log;
  }
  return out;
}

}  // namespace triage::agent
