#include "agent/playbooks/replay_tools.h"

#include <algorithm>

#include "common/util/file.h"
#include "common/util/strings.h"

namespace triage::playbooks {
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

}  // namespace

absl::StatusOr<std::unique_ptr<ReplayTools>> ReplayTools::Load(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(util::StrCat("replay directory ", dir.string(), " does not exist"));
  }
  auto t = std::unique_ptr<ReplayTools>(new ReplayTools());
  t->dir_ = dir;
  for (const auto& f : Files(dir / "probes", ".json")) {
    auto text = util::ReadFile(f, 64 << 20);
    if (!text.ok()) return text.status();
    auto docs = ParseProbeFile(*text, f.string());
    if (!docs.ok()) return docs.status();
    for (auto& d : *docs) t->probes_.push_back(std::move(d));
  }
  for (const auto& f : Files(dir / "junit", ".xml")) {
    auto report = junit::ParseJUnitFile(f);
    if (!report.ok()) return report.status();
    // Two testcases for one key inside one file: the file is rejected (REPLAY.md).
    std::map<std::string, int> in_file;
    for (const auto& tc : report->cases) {
      if (++in_file[tc.key] > 1) {
        return absl::InvalidArgumentError(util::StrCat(f.string(), ": two testcases for ", tc.key,
                                                       " (replay cannot tell which answers)"));
      }
    }
    for (auto& tc : report->cases) t->cases_[tc.key].push_back(std::move(tc));
  }
  return t;
}

absl::StatusOr<std::vector<ProbeDoc>> ReplayTools::Probe(const std::string& key,
                                                         const std::string& mode) {
  std::vector<std::string> phases = mode == "dtype"
                                        ? std::vector<std::string>{"bfloat16", "float32"}
                                        : std::vector<std::string>{"structure"};
  std::vector<ProbeDoc> out;
  for (const auto& phase : phases) {
    const int seq = probe_calls_[util::StrCat(key, "\n", phase)]++;
    const ProbeDoc* found = nullptr;
    for (const auto& d : probes_) {
      if (d.key == key && d.phase == phase && d.seq == seq) found = &d;
    }
    if (found == nullptr) {
      return absl::NotFoundError(util::StrCat("no recorded probe for ", key, " phase ", phase,
                                              " seq ", seq, " in ", dir_.string()));
    }
    out.push_back(*found);
  }
  return out;
}

absl::StatusOr<PytestRun> ReplayTools::Pytest(const std::vector<std::string>& keys,
                                              const std::string& /*label*/) {
  PytestRun run;
  for (const auto& key : keys) {
    const int n = pytest_calls_[key]++;
    auto it = cases_.find(key);
    if (it == cases_.end() || it->second.empty()) {
      junit::TestCase missing;
      missing.key = key;
      missing.outcome = junit::Outcome::kMissing;
      run.cases.push_back(missing);
      auto log = util::ReadFile(dir_ / "logs" / util::StrCat(key, ".log"), 64 << 20);
      if (log.ok()) run.log += *log;
      continue;
    }
    run.xml = true;
    const auto& list = it->second;
    run.cases.push_back(list[std::min<std::size_t>(n, list.size() - 1)]);
  }
  return run;
}

}  // namespace triage::playbooks
