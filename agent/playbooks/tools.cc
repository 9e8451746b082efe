#include "agent/playbooks/tools.h"

#include "common/util/file.h"
#include "common/util/strings.h"

namespace triage::playbooks {
namespace {

// pytest's exit codes for a session that never ran a test properly: interrupted, internal
// error, usage error, no tests collected.
bool SessionNeverRan(int exit_code) { return exit_code >= 2 && exit_code <= 5; }

// What a log says when the runner itself could not run (the test's model never started).
constexpr std::string_view kRunnerBroken[] = {"ImportError while loading conftest",
                                              "ERROR collecting", "INTERNALERROR",
                                              "error: unrecognized arguments"};

}  // namespace

std::string RunnerFailure(const PytestRun& run) {
  bool all_missing = true;
  for (const auto& tc : run.cases)
    all_missing = all_missing && tc.outcome == junit::Outcome::kMissing;
  if (!all_missing) return "";
  for (std::string_view marker : kRunnerBroken) {
    if (auto at = run.log.find(marker); at != std::string::npos) {
      const auto start = run.log.rfind('\n', at);
      const auto end = run.log.find('\n', at);
      return util::StrCat(
          "the runner could not run the tests: ",
          run.log.substr(start == std::string::npos ? 0 : start + 1,
                         end == std::string::npos ? std::string::npos : end - start - 1));
    }
  }
  if (SessionNeverRan(run.exit_code)) {
    return util::StrCat("pytest exited with code ", run.exit_code, " before running any test");
  }
  return "";
}

std::string KeyFileName(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '/') {
      out += "__";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

void AttachEvidence(const PlaybookTools& tools, v1::ShardResult& result) {
  for (const auto& [name, path] : tools.Evidence()) {
    const bool log = std::string_view(name).starts_with("logs/");
    auto content = util::ReadFile(path, log ? (64 << 20) : (8 << 20));
    if (!content.ok()) continue;
    v1::Evidence* ev = result.add_evidence();
    ev->set_name(name);
    ev->set_kind(log ? "log" : std::string_view(name).starts_with("junit/") ? "junit" : "probe");
    // Logs can be long: keep their end, where the error is.
    if (log && content->size() > (256u << 10)) content->erase(0, content->size() - (256u << 10));
    ev->set_content(*content);
    for (auto& out : *result.mutable_entries()) {
      const std::string k = KeyFileName(out.key());
      if (name.find(k) != std::string::npos || name.find(out.key()) != std::string::npos ||
          std::string_view(name).starts_with("junit/")) {
        out.add_evidence(name);
      }
    }
  }
}

}  // namespace triage::playbooks
