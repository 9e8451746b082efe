#include "agent/core/runner_check.h"

#include <system_error>
#include <vector>

#include "common/inventory/document.h"
#include "common/inventory/inventory.h"
#include "common/inventory/key.h"
#include "common/inventory/key_grammar.h"
#include "common/process/process.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::agent {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kRunnerTests = "tests/runner/test_models.py";
constexpr std::size_t kMaxLine = 300;  // of a line quoted in the problem

std::string Quoted(std::string_view line) {
  return std::string(util::TruncateUtf8(util::TrimWhitespace(line), kMaxLine));
}

// The last non-blank line of a subprocess's output.
std::string LastLine(std::string_view output) {
  const std::vector<std::string_view> lines = util::SplitLines(output);
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    if (!util::TrimWhitespace(*it).empty()) return Quoted(*it);
  }
  return "";
}

process::RunOptions Options(const RunnerCheckOptions& o, std::vector<std::string> argv) {
  process::RunOptions run;
  run.argv = std::move(argv);
  run.cwd = o.workspace;
  run.timeout = o.timeout;
  run.nice = 0;  // the agent's own niceness
  run.max_capture_bytes = 1 << 20;
  run.cancelled = o.cancelled;
  // The check leaves nothing behind in the checkout (bytecode, pytest's cache).
  run.env = {{"PYTHONDONTWRITEBYTECODE", "1"}};
  return run;
}

// The interpreter could not be started at all (not found, not executable).
std::string DoesNotRun(const RunnerCheckOptions& o, const absl::Status& st) {
  return util::StrCat("--python ", o.python, " does not run: ", util::MessageOf(st));
}

// "" when the interpreter runs and imports pytest and torch.
std::string CheckInterpreter(const RunnerCheckOptions& o) {
  auto r = process::Run(Options(o, {o.python, "-c", "import pytest\nimport torch\n"}));
  if (!r.ok()) return DoesNotRun(o, r.status());
  if (r->ok()) return "";
  const std::string last = r->timed_out ? std::string() : LastLine(r->output);
  return util::StrCat("--python ", o.python, " cannot import pytest and torch",
                      last.empty() ? "" : ": ", last, " (", r->Describe(), ")");
}

// "" when pytest collects one test of the workspace's runner.
std::string CheckCollection(const RunnerCheckOptions& o) {
  auto node = CollectableTest(o.workspace);
  if (!node.ok()) return util::MessageOf(node.status());
  auto r = process::Run(Options(
      o, {o.python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *node}));
  if (!r.ok()) return DoesNotRun(o, r.status());
  if (r->ok()) return "";
  if (r->timed_out) {
    return util::StrCat("pytest did not collect ", *node, " in time (", r->Describe(), ")");
  }
  return util::StrCat("pytest cannot collect ", *node, ": ", FirstCollectionError(r->output), " (",
                      r->Describe(), ")");
}

}  // namespace

std::string CheckDevices(const fs::path& device_path, int device_count) {
  if (device_path.empty()) return "";
  std::error_code ec;
  if (!fs::exists(device_path, ec)) {
    return util::StrCat("the device path ", device_path.string(),
                        " does not exist (--device_path; \"\" for emulated devices)");
  }
  int found = 1;  // a device node itself
  if (fs::is_directory(device_path, ec)) {
    found = 0;
    for (fs::directory_iterator it(device_path, ec), end; !ec && it != end; it.increment(ec)) {
      ++found;
    }
    if (ec) {
      return util::StrCat("the device path ", device_path.string(),
                          " cannot be read: ", ec.message());
    }
  }
  if (found >= device_count) return "";
  return util::StrCat("the device path ", device_path.string(), " holds ", found,
                      found == 1 ? " entry" : " entries", ", fewer than --device_count ",
                      device_count);
}

absl::StatusOr<std::string> CollectableTest(const fs::path& workspace) {
  std::error_code ec;
  if (!fs::is_regular_file(workspace / kRunnerTests, ec)) {
    return absl::NotFoundError(
        util::StrCat("the workspace ", workspace.string(), " has no ", kRunnerTests));
  }
  const inventory::WorkTreeSource source(workspace);
  auto listing = source.List(inventory::kTestConfigDir, ".yaml");
  if (!listing.ok()) return listing.status();
  const inventory::KeyGrammar grammar = inventory::GrammarOrDefault(
      source.Read(inventory::kRunnerPath, inventory::kDefaultMaxYamlBytes));
  for (const std::string& path : listing->files) {
    auto bytes = source.Read(path, inventory::kDefaultMaxYamlBytes);
    if (!bytes.ok()) continue;
    const inventory::Document doc =
        inventory::Document::Parse(path, std::move(*bytes), {.grammar = &grammar});
    if (doc.is_placeholders()) continue;
    for (const inventory::Entry& e : doc.entries()) {
      if (!e.parts || e.Status() == "EXCLUDE_MODEL" || e.loader.empty() ||
          !fs::is_regular_file(workspace / e.loader, ec)) {
        continue;
      }
      return util::StrCat((workspace / kRunnerTests).string(),
                          "::", inventory::TestFunctionOfKey(e.key), "[", e.key, "]");
    }
  }
  return absl::NotFoundError(util::StrCat(
      "the workspace ", workspace.string(), " has no test-config entry to collect (",
      inventory::kTestConfigDir, ": none that is not EXCLUDE_MODEL and has its loader)"));
}

std::string FirstCollectionError(std::string_view output) {
  const std::vector<std::string_view> lines = util::SplitLines(output);
  // pytest's "E   <exception>" line after the position at, if any.
  auto exception_after = [&](std::size_t at) -> std::string {
    for (std::size_t i = at + 1; i < lines.size(); ++i) {
      if (lines[i].starts_with("E ")) return Quoted(lines[i].substr(1));
    }
    return "";
  };
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::string_view line = util::TrimWhitespace(lines[i]);
    const bool conftest = line.starts_with("ImportError while loading conftest");
    const bool collecting = line.find("ERROR collecting ") != std::string_view::npos;
    if (!conftest && !collecting) continue;
    // "____ ERROR collecting tests/runner/test_models.py ____" without its rule.
    while (!line.empty() && (line.front() == '_' || line.front() == ' ')) line.remove_prefix(1);
    while (!line.empty() && (line.back() == '_' || line.back() == ' ' || line.back() == '.')) {
      line.remove_suffix(1);
    }
    const std::string exception = exception_after(i);
    return exception.empty() ? Quoted(line) : util::StrCat(Quoted(line), " (", exception, ")");
  }
  for (std::string_view line : lines) {
    if (line.starts_with("ERROR") || line.starts_with("E ")) return Quoted(line);
  }
  const std::string last = LastLine(output);
  return last.empty() ? "no output" : last;
}

std::string CheckRunner(const RunnerCheckOptions& options) {
  std::string runner = CheckInterpreter(options);
  if (runner.empty()) runner = CheckCollection(options);
  const std::string device =
      options.cpu_only ? std::string() : CheckDevices(options.device_path, options.device_count);
  if (runner.empty()) return device;
  return device.empty() ? runner : util::StrCat(runner, "; and ", device);
}

}  // namespace triage::agent
