// prepare_bench: the agent's workspace preparation per shard (Workspace::Prepare: both
// repositories forced to the pinned commits, cleaned, the shard's edit pre-applied) on synthetic
// repository pairs of tt-xla's shape, at several sizes of the tt_forge_models submodule.
//
// Each size: a tt-xla repository of --ttxla_files files with tt_forge_models (N files, one
// loader directory per 4 files) as a real submodule at third_party/tt_forge_models, and an
// agent checkout cloned from it. Before every shard the checkout is dirtied the way a shard
// leaves it (a loader and a YAML file edited, a change staged, untracked files and directories
// in both repositories, a stale index.lock); then Prepare runs, timed, and the tree is checked:
// exactly the pre-applied file differs from the pinned commits in tt_forge_models and nothing in
// tt-xla. A dirty tree after Prepare stops the benchmark with exit 1.
//
// Prints, per size: the files, the median / min / max Prepare time over --shards shards, the
// growth per 1,000 files against the smallest size, and the share of a typical shard's time
// (Prepare + the median device time of tt-xla's .test_durations, when the shared data is there).
// docs/bench-farm.md, "Workspace preparation".

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "agent/workspace/workspace.h"
#include "common/git/git.h"
#include "common/util/strings.h"
#include "common/util/text.h"
#include "nlohmann/json.hpp"

namespace fs = std::filesystem;
using triage::git::Git;
using triage::util::StrCat;

namespace {

const std::vector<std::pair<std::string, std::string>> kIdentity = {
    {"GIT_AUTHOR_NAME", "prepare-bench"},
    {"GIT_AUTHOR_EMAIL", "bench@triage.invalid"},
    {"GIT_COMMITTER_NAME", "prepare-bench"},
    {"GIT_COMMITTER_EMAIL", "bench@triage.invalid"},
    {"GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z"},
    {"GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z"},
    {"GIT_CONFIG_GLOBAL", "/dev/null"},
    {"GIT_CONFIG_NOSYSTEM", "1"},
    {"GIT_ALLOW_PROTOCOL", "file"}};

[[noreturn]] void Die(const std::string& message) {
  std::cerr << "prepare_bench: " << message << "\n";
  std::exit(1);
}

std::string Run(const fs::path& repo, const std::vector<std::string>& args) {
  Git::CallOptions options;
  options.env = kIdentity;
  auto out = Git(repo).RunWith(args, options);
  if (!out.ok()) Die(std::string(out.status().message()));
  return std::string(triage::util::TrimWhitespace(*out));
}

void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// About 2 KB of Python, different per file.
std::string Source(const std::string& name, int variant) {
  std::string s = StrCat("# ", name, "\nimport torch\n\n\nclass ModelLoader:\n");
  for (int i = 0; i < 40; ++i) {
    s += StrCat("    def method_", i, "_", variant, "(self, x):\n        return x * ", i + 1, "\n");
  }
  return s;
}

struct Pair {
  fs::path ttxla_src, forge_src, checkout;
  std::string ttxla_commit, forge_commit;
  std::string edit_path;  // in tt_forge_models
  std::string edit_diff;
  int ttxla_files = 0, forge_files = 0;
};

Pair MakePair(const fs::path& dir, int ttxla_files, int forge_files) {
  Pair p;
  p.forge_src = dir / "tt-forge-models";
  p.ttxla_src = dir / "tt-xla";
  p.checkout = dir / "agent-checkout";
  fs::create_directories(p.forge_src);
  Run(p.forge_src, {"init", "--quiet", "--initial-branch=main"});
  for (int i = 0; i < forge_files; ++i) {
    const int loader = i / 4;
    const char* names[] = {"loader.py", "__init__.py", "requirements.txt", "README.md"};
    Write(p.forge_src / StrCat("model_", loader) / "pytorch" / names[i % 4],
          Source(StrCat("model_", loader, "/", names[i % 4]), i));
  }
  Write(p.forge_src / "training_utils.py", Source("training_utils", 0));
  Run(p.forge_src, {"add", "-A"});
  Run(p.forge_src, {"commit", "--quiet", "-m", "forge"});
  p.forge_files = forge_files + 1;

  fs::create_directories(p.ttxla_src);
  Run(p.ttxla_src, {"init", "--quiet", "--initial-branch=main"});
  for (int i = 0; i < ttxla_files; ++i) {
    if (i % 10 == 0) {
      Write(p.ttxla_src / "tests/runner/test_config" / StrCat("config_", i, ".yaml"),
            StrCat("test_config:\n  model_", i, "/pytorch-base-single_device-inference:\n",
                   "    status: KNOWN_FAILURE_XFAIL\n    reason: example\n"));
    } else {
      Write(p.ttxla_src / "src" / StrCat("dir_", i / 50) / StrCat("file_", i, ".py"),
            Source(StrCat("file_", i), i));
    }
  }
  Run(p.ttxla_src, {"-c", "protocol.file.allow=always", "submodule", "add", "--quiet",
                    p.forge_src.string(), "third_party/tt_forge_models"});
  Run(p.ttxla_src, {"add", "-A"});
  Run(p.ttxla_src, {"commit", "--quiet", "-m", "tt-xla"});
  p.ttxla_files = ttxla_files;
  p.ttxla_commit = Run(p.ttxla_src, {"rev-parse", "HEAD"});
  p.forge_commit = Run(p.forge_src, {"rev-parse", "HEAD"});

  Run(dir, {"clone", "--quiet", p.ttxla_src.string(), p.checkout.string()});
  Run(p.checkout, {"-c", "protocol.file.allow=always", "submodule", "update", "--init", "--quiet"});

  // The shard's pre-applied edit: one line added to a loader, as a diff made by git itself.
  p.edit_path = "model_0/pytorch/loader.py";
  const fs::path forge = p.checkout / "third_party/tt_forge_models";
  { std::ofstream(forge / p.edit_path, std::ios::app) << "# pre-applied by the shard\n"; }
  p.edit_diff = Run(forge, {"diff", "--", p.edit_path}) + "\n";
  Run(forge, {"checkout", "--quiet", "--", p.edit_path});
  return p;
}

// What a shard leaves behind: edits, a staged change, untracked files and directories, a lock.
void Dirty(const Pair& p, int shard) {
  const fs::path forge = p.checkout / "third_party/tt_forge_models";
  const std::string loader = StrCat("model_", shard % std::max(1, p.forge_files / 4), "/pytorch");
  { std::ofstream(forge / loader / "loader.py", std::ios::app) << "# shard edit\n"; }
  Write(forge / loader / StrCat("scratch_", shard, ".py"), "x = 1\n");
  Write(forge / StrCat("new_dir_", shard) / "a.txt", "a\n");
  { std::ofstream(forge / "training_utils.py", std::ios::app) << "# registry line\n"; }
  Run(forge, {"add", "training_utils.py"});
  { std::ofstream(p.checkout / "tests/runner/test_config/config_0.yaml", std::ios::app) << "#\n"; }
  Write(p.checkout / StrCat("junit-", shard, ".xml"), "<testsuites/>\n");
  Write(p.checkout / ".git" / "index.lock", "");
}

void CheckClean(const Pair& p) {
  const fs::path forge = p.checkout / "third_party/tt_forge_models";
  auto forge_changes = Git(forge).WorkTreeChanges();
  auto ttxla_changes = Git(p.checkout).WorkTreeChanges();
  if (!forge_changes.ok() || !ttxla_changes.ok()) Die("cannot list the work tree's changes");
  if (*forge_changes != std::vector<std::string>{p.edit_path}) {
    Die(StrCat("tt_forge_models is not clean after Prepare: ", forge_changes->size(),
               " changed paths, first ", forge_changes->empty() ? "-" : forge_changes->front()));
  }
  if (!ttxla_changes->empty()) {
    Die(StrCat("tt-xla is not clean after Prepare: ", ttxla_changes->front()));
  }
  if (Run(forge, {"rev-parse", "HEAD"}) != p.forge_commit ||
      Run(p.checkout, {"rev-parse", "HEAD"}) != p.ttxla_commit) {
    Die("a repository is not at its pinned commit after Prepare");
  }
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The median device time of tt-xla's tests (seconds), or 0 without the shared data.
double MedianTestSeconds(const fs::path& durations) {
  std::ifstream in(durations);
  if (!in) return 0;
  std::vector<double> v;
  try {
    const nlohmann::json all = nlohmann::json::parse(in);
    for (const auto& [key, seconds] : all.items()) v.push_back(seconds.get<double>());
  } catch (const std::exception&) {
    return 0;
  }
  return Median(v);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"prepare_bench: Workspace::Prepare per shard on tt-xla-shaped repositories"};
  std::vector<int> sizes = {2000, 10000, 30000};
  int ttxla_files = 1200;
  int shards = 9;
  bool keep = false;
  std::string durations = StrCat(TRIAGE_SHARED_DIR, "/data/tt-xla/head/.test_durations");
  app.add_option("--forge_files", sizes, "tt_forge_models sizes (files), one pair per size")
      ->delimiter(',');
  app.add_option("--ttxla_files", ttxla_files, "files of the tt-xla repository")
      ->capture_default_str();
  app.add_option("--shards", shards, "Prepare calls timed per size")->capture_default_str();
  app.add_option("--durations", durations, "tt-xla's .test_durations (a typical shard's time)");
  app.add_flag("--keep", keep, "keep the generated repositories");
  CLI11_PARSE(app, argc, argv);
  if (shards < 1 || ttxla_files < 1) Die("--shards and --ttxla_files must be at least 1");

  char templ[] = "/tmp/prepare_bench.XXXXXX";
  if (mkdtemp(templ) == nullptr) Die("cannot create a temporary directory");
  const fs::path tmp = templ;
  const double typical = MedianTestSeconds(durations);

  std::printf("%-14s %-14s %10s %10s %10s %16s %14s\n", "tt-xla files", "forge files", "median ms",
              "min ms", "max ms", "ms per 1k files", "share of shard");
  double base_ms = 0;
  int base_files = 0;
  double worst_median = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const auto gen_start = std::chrono::steady_clock::now();
    Pair p = MakePair(tmp / StrCat("size-", sizes[i]), ttxla_files, sizes[i]);
    const double gen_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - gen_start).count();
    triage::workspace::Workspace ws(p.checkout, tmp / StrCat("shards-", sizes[i]));
    std::vector<double> ms;
    for (int s = 0; s < shards; ++s) {
      Dirty(p, s);
      triage::v1::ShardSpec spec;
      spec.set_shard_id(StrCat("bench-s", s));
      spec.set_ttxla_commit(p.ttxla_commit);
      spec.set_forge_commit(p.forge_commit);
      auto* edit = spec.add_pre_apply();
      edit->set_repo("tt_forge_models");
      edit->set_path(p.edit_path);
      edit->set_diff(p.edit_diff);
      const auto start = std::chrono::steady_clock::now();
      auto prepared = ws.Prepare(spec);
      const auto end = std::chrono::steady_clock::now();
      if (!prepared.ok()) Die(StrCat("Prepare: ", prepared.status().message()));
      CheckClean(p);
      ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
    }
    const double med = Median(ms);
    worst_median = std::max(worst_median, med);
    const int files = p.ttxla_files + p.forge_files;
    std::string growth = "-";
    if (i == 0) {
      base_ms = med;
      base_files = files;
    } else if (files > base_files) {
      growth =
          StrCat(static_cast<int>((med - base_ms) / ((files - base_files) / 1000.0) * 10) / 10.0);
    }
    std::string share = "-";
    if (typical > 0) {
      share = StrCat(static_cast<int>(1000 * (med / 1000) / (med / 1000 + typical)) / 10.0, " %");
    }
    std::printf("%-14d %-14d %10.0f %10.0f %10.0f %16s %14s   (generated in %.1f s)\n",
                p.ttxla_files, p.forge_files, med, *std::min_element(ms.begin(), ms.end()),
                *std::max_element(ms.begin(), ms.end()), growth.c_str(), share.c_str(), gen_s);
    std::fflush(stdout);
  }
  if (typical > 0) {
    std::printf("typical shard: %.2f s of device time (the median of %s)\n", typical,
                durations.c_str());
  }
  std::printf(
      "every Prepare left both repositories at their pinned commits with only the "
      "pre-applied edit\n");
  std::printf("worst median prepare: %.0f ms\n", worst_median);
  if (keep) {
    std::printf("kept: %s\n", tmp.c_str());
  } else {
    std::error_code ec;
    fs::remove_all(tmp, ec);
  }
  return 0;
}
