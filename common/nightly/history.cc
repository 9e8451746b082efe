#include "common/nightly/history.h"

#include <map>

#include "common/inventory/inventory.h"
#include "common/inventory/key_grammar.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::nightly {
namespace {

constexpr std::size_t kMaxFileBytes = 8 << 20;

// The entry's lines as written (comments on its lines included), from its file's lines.
std::string EntryText(const std::vector<std::string_view>& lines, const inventory::Entry& e) {
  std::string out;
  for (int i = e.first_line; i <= e.last_line && i < static_cast<int>(lines.size()); ++i) {
    out += lines[static_cast<std::size_t>(i)];
    out += '\n';
  }
  return out;
}

// The key grammar of the runner at a commit (the built-in one when it has none or it cannot
// be read: a round is evidence, not a check of the checkout).
std::shared_ptr<inventory::KeyGrammar> GrammarAt(const git::Git& git, const std::string& commit) {
  auto runner = git.Show(commit, inventory::kRunnerPath, kMaxFileBytes);
  if (runner.ok()) {
    auto g = inventory::ReadKeyGrammar(*runner, inventory::kRunnerPath);
    if (g.ok()) return std::make_shared<inventory::KeyGrammar>(std::move(*g));
  }
  return std::make_shared<inventory::KeyGrammar>(inventory::DefaultKeyGrammar());
}

}  // namespace

absl::StatusOr<std::unique_ptr<MaintenanceHistory>> ReadMaintenanceHistory(
    const git::Git& git, const std::string& commit, const HistoryOptions& options) {
  std::vector<std::string> args = {"log", "--first-parent", "--format=%H %h %ad %P", "--date=short",
                                   util::StrCat("-n", options.max_commits)};
  if (!options.since.empty()) args.push_back(util::StrCat("--since=", options.since));
  args.push_back(commit);
  args.push_back("--");
  args.push_back(std::string(inventory::kTestConfigDir));
  auto log = git.Run(args);
  if (!log.ok()) return log.status();
  auto out = std::make_unique<MaintenanceHistory>();
  const std::vector<std::string_view> lines = util::SplitLines(*log);
  // git log lists newest first; rounds are oldest first.
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    // "<sha> <short> <date> <parents>"
    std::vector<std::string> f;
    for (std::size_t start = 0; start <= it->size();) {
      std::size_t end = it->find(' ', start);
      if (end == std::string_view::npos) end = it->size();
      f.emplace_back(it->substr(start, end - start));
      start = end + 1;
    }
    if (f.size() < 4 || f[3].empty()) continue;  // a root commit: nothing to compare with
    const std::string& sha = f[0];
    const std::string& parent = f[3];
    ++out->commits;
    auto changed = git.Run({"diff-tree", "-r", "--no-commit-id", "--name-only", parent, sha, "--",
                            std::string(inventory::kTestConfigDir)});
    if (!changed.ok()) return changed.status();
    Round round;
    round.commit = f[1];
    round.date = f[2];
    std::shared_ptr<inventory::KeyGrammar> grammar_after, grammar_before;
    for (std::string_view line : util::SplitLines(*changed)) {
      const std::string path(line);
      if (!path.ends_with(".yaml") || path.find("placeholder") != std::string::npos) continue;
      if (!grammar_after) {
        grammar_after = GrammarAt(git, sha);
        grammar_before = GrammarAt(git, parent);
      }
      auto after_bytes = git.Show(sha, path, kMaxFileBytes);
      auto before_bytes = git.Show(parent, path, kMaxFileBytes);
      const inventory::Document& after = out->documents.emplace_back(inventory::Document::Parse(
          path, after_bytes.ok() ? *after_bytes : "", {.grammar = grammar_after.get()}));
      const inventory::Document& before = out->documents.emplace_back(inventory::Document::Parse(
          path, before_bytes.ok() ? *before_bytes : "", {.grammar = grammar_before.get()}));
      const std::vector<std::string_view> after_lines = util::SplitLines(after.bytes());
      std::map<std::string, const inventory::Entry*> old;
      for (const auto& e : before.entries()) old[e.key] = &e;
      for (const auto& e : after.entries()) {
        auto o = old.find(e.key);
        const inventory::Entry* b = o == old.end() ? nullptr : o->second;
        if (b != nullptr && b->value == e.value) continue;
        EntryChange c;
        c.key = e.key;
        c.before = b;
        c.after = &e;
        c.after_text = EntryText(after_lines, e);
        round.changes.push_back(std::move(c));
      }
    }
    if (!round.changes.empty()) out->rounds.push_back(std::move(round));
  }
  return out;
}

std::string CheckoutPolicy::Describe() const {
  return util::StrCat(rounds, " maintenance round(s)",
                      rounds > 0 ? util::StrCat(" (", oldest, " to ", newest, ")") : "",
                      " in the newest ", commits,
                      " commit(s) that changed tests/runner/test_config");
}

absl::StatusOr<CheckoutPolicy> LearnFromCheckout(const git::Git& git, const std::string& commit,
                                                 const HistoryOptions& options) {
  auto history = ReadMaintenanceHistory(git, commit, options);
  if (!history.ok()) return history.status();
  CheckoutPolicy out;
  out.learned = LearnPolicy((*history)->rounds);
  out.rounds = static_cast<int>((*history)->rounds.size());
  out.commits = (*history)->commits;
  if (!(*history)->rounds.empty()) {
    out.oldest = (*history)->rounds.front().date;
    out.newest = (*history)->rounds.back().date;
  }
  return out;
}

}  // namespace triage::nightly
