#include "agent/executor/replay_tools.h"

#include <algorithm>

#include "common/util/file.h"
#include "common/util/strings.h"

namespace triage::agent {
namespace {

std::vector<std::filesystem::path> Files(const std::filesystem::path& dir, std::string_view ext) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return out;
  for (const auto& f : std::filesystem::directory_iterator(dir, ec)) {
    if (f.is_regular_file() && f.path().extension() == ext) out.push_back(f.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A key used as a path below logs/ (keys contain '/'): never outside it.
bool SafeKeyPath(const std::string& key) {
  return !key.empty() && key.find("..") == std::string::npos && !key.starts_with("/");
}

}  // namespace

absl::StatusOr<std::unique_ptr<ReplayTools>> ReplayTools::Load(const std::filesystem::path& dir,
                                                               std::filesystem::path record_dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(util::StrCat("replay directory ", dir.string(), " does not exist"));
  }
  auto t = std::unique_ptr<ReplayTools>(new ReplayTools());
  t->dir_ = dir;
  t->record_dir_ = std::move(record_dir);
  for (const auto& f : Files(dir / "probes", ".json")) {
    auto text = util::ReadFile(f, 64 << 20);
    if (!text.ok()) return text.status();
    auto docs = playbooks::ParseProbeFile(*text, f.string());
    if (!docs.ok()) return docs.status();
    for (auto& d : *docs) t->probes_.push_back(std::move(d));
  }
  for (const auto& f : Files(dir / "junit", ".xml")) {
    auto report = junit::ParseJUnitFile(f);
    if (!report.ok()) return report.status();
    // Two testcases for one key inside one file: the file is rejected (docs/evidence.md).
    std::map<std::string, int> in_file;
    for (const auto& tc : report->cases) {
      if (++in_file[tc.key] > 1) {
        return absl::InvalidArgumentError(util::StrCat(f.string(), ": two testcases for ", tc.key,
                                                       " (replay cannot tell which answers)"));
      }
    }
    for (auto& tc : report->cases) t->cases_[tc.key].push_back({std::move(tc), f});
  }
  return t;
}

void ReplayTools::Record(const std::string& name, playbooks::PytestRun* run) {
  if (record_dir_.empty()) return;
  if (!evidence_.count(name)) {
    const auto to = record_dir_ / name;
    std::error_code ec;
    std::filesystem::create_directories(to.parent_path(), ec);
    if (!ec) {
      std::filesystem::copy_file(dir_ / name, to, std::filesystem::copy_options::overwrite_existing,
                                 ec);
    }
    if (ec) return;
    evidence_[name] = to;
  }
  if (std::find(run->evidence.begin(), run->evidence.end(), name) == run->evidence.end()) {
    run->evidence.push_back(name);
  }
}

void ReplayTools::RecordText(const std::string& name, const std::string& text) {
  if (record_dir_.empty()) return;
  const auto to = record_dir_ / name;
  std::error_code ec;
  std::filesystem::create_directories(to.parent_path(), ec);
  if (!ec && util::WriteFileAtomic(to, text).ok()) evidence_[name] = to;
}

absl::StatusOr<std::vector<playbooks::ProbeDoc>> ReplayTools::Probe(const std::string& key,
                                                                    const std::string& mode) {
  const std::vector<std::string> phases = playbooks::ProbePhases(mode);
  if (phases.empty()) return absl::InvalidArgumentError(util::StrCat("unknown probe mode ", mode));
  std::vector<playbooks::ProbeDoc> out;
  for (const auto& phase : phases) {
    const int seq = probe_calls_[util::StrCat(key, "\n", phase)]++;
    const playbooks::ProbeDoc* found = nullptr;
    for (const auto& d : probes_) {
      if (d.key == key && d.phase == phase && d.seq == seq) found = &d;
    }
    if (found == nullptr) {
      return absl::NotFoundError(util::StrCat("no recorded probe for ", key, " phase ", phase,
                                              " seq ", seq, " in ", dir_.string()));
    }
    // The native run's name for it; the document carries its seq even when the source left it
    // at the default.
    nlohmann::json raw = found->raw;
    raw["seq"] = seq;
    RecordText(util::StrCat("probes/", playbooks::KeyFileName(key), ".", phase, ".", seq, ".json"),
               raw.dump(2) + "\n");
    out.push_back(*found);
  }
  return out;
}

absl::StatusOr<playbooks::PytestRun> ReplayTools::Pytest(const std::vector<std::string>& keys,
                                                         const std::string& /*label*/) {
  playbooks::PytestRun run;
  for (const auto& key : keys) {
    const int n = pytest_calls_[key]++;
    auto it = cases_.find(key);
    if (it == cases_.end() || it->second.empty()) {
      junit::TestCase missing;
      missing.key = key;
      missing.outcome = junit::Outcome::kMissing;
      run.cases.push_back(missing);
      const std::string log_name = util::StrCat("logs/", key, ".log");
      auto log = util::ReadFile(dir_ / log_name, 64 << 20);
      if (log.ok()) {
        run.log += *log;
        if (SafeKeyPath(key)) Record(log_name, &run);
      }
      continue;
    }
    run.xml = true;
    const auto& list = it->second;
    const Case& c = list[std::min<std::size_t>(n, list.size() - 1)];
    run.cases.push_back(c.tc);
    run.session_tests = keys.size();
    const std::string stem = c.file.stem().string();
    Record(util::StrCat("junit/", c.file.filename().string()), &run);
    std::error_code ec;
    if (std::filesystem::is_regular_file(dir_ / "logs" / (stem + ".log"), ec)) {
      Record(util::StrCat("logs/", stem, ".log"), &run);
    }
  }
  return run;
}

}  // namespace triage::agent
