#include "common/nightly/learn.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "common/nightly/rules.h"
#include "common/util/strings.h"

namespace triage::nightly {
namespace {

// The archs a change is read on: supported_archs, else n150 and p150 (n300-llmbox for a
// tensor-parallel key), and the archs of the overrides.
std::vector<std::string> ArchsOf(const EntryChange& c) {
  std::set<std::string> out;
  for (const inventory::Entry* e : {c.before, c.after}) {
    if (e == nullptr) continue;
    if (const auto* s = e->Field("supported_archs"); s != nullptr && s->is_list()) {
      for (const auto& a : s->list) {
        if (a.is_string()) out.insert(a.string);
      }
    }
  }
  if (out.empty()) {
    if (c.key.find("-tensor_parallel-") != std::string::npos) {
      out.insert("n300-llmbox");
    } else {
      out = {"n150", "p150"};
    }
  }
  for (const inventory::Entry* e : {c.before, c.after}) {
    if (e == nullptr) continue;
    for (const auto& a : e->OverrideArchs()) out.insert(a);
  }
  return {out.begin(), out.end()};
}

std::string ParallelismOf(std::string_view key) {
  for (std::string_view p : {"tensor_parallel", "data_parallel"}) {
    if (key.find(util::StrCat("-", p, "-")) != std::string_view::npos) return std::string(p);
  }
  return "single_device";
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool Mentions(std::string_view text, std::initializer_list<std::string_view> words) {
  const std::string low = Lower(text);
  for (auto w : words) {
    if (low.find(w) != std::string::npos) return true;
  }
  return false;
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

// The finest grid a threshold sits on: 0.01, 0.005 or 0.001.
double GridOf(double v) {
  for (double g : {0.01, 0.005}) {
    const double steps = v / g;
    if (std::fabs(steps - std::round(steps)) < 1e-6) return g;
  }
  return 0.001;
}

// The line of an entry's text that sets this field, "" when none does.
std::string LineOf(std::string_view text, std::string_view field) {
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = util::TrimWhitespace(text.substr(start, end - start));
    for (std::string_view prefix : {std::string_view(""), std::string_view("\"")}) {
      const std::string head = util::StrCat(prefix, field, prefix, ":");
      if (line.starts_with(head)) return std::string(line);
    }
    start = end + 1;
  }
  return "";
}

class Collector {
 public:
  void Add(const std::string& knob, std::string value, const Round& r, const std::string& key) {
    auto& items = by_knob_[knob];
    // One piece of evidence per entry and knob in a round (its archs say the same).
    for (const auto& e : items) {
      if (e.commit == r.commit && e.key == key && e.value == value) return;
    }
    items.push_back({std::move(value), r.commit, r.date, key});
  }
  // Newest first: the evidence of the newest `rounds` rounds that speak to the knob.
  std::vector<Evidence> Newest(const std::string& knob, std::size_t rounds) const {
    auto it = by_knob_.find(knob);
    if (it == by_knob_.end()) return {};
    std::vector<Evidence> out;
    std::set<std::string> commits;
    for (auto e = it->second.rbegin(); e != it->second.rend(); ++e) {
      if (!commits.count(e->commit) && commits.size() == rounds) break;
      commits.insert(e->commit);
      out.push_back(*e);
    }
    return out;
  }

 private:
  std::map<std::string, std::vector<Evidence>> by_knob_;  // oldest first
};

// The value most rounds show: each round votes once, with the value most of its changes show;
// a tie goes to the newest round's value.
std::string Majority(const std::vector<Evidence>& items) {
  std::vector<std::string> order;  // commits, newest first
  std::map<std::string, std::map<std::string, int>> per_round;
  for (const auto& e : items) {
    if (!per_round.count(e.commit)) order.push_back(e.commit);
    ++per_round[e.commit][e.value];
  }
  std::vector<std::string> votes;  // one per round, newest first
  for (const auto& commit : order) {
    const auto& counts = per_round[commit];
    std::string best;
    int best_n = 0;
    for (const auto& e : items) {  // newest first: the first to reach the top count wins a tie
      if (e.commit != commit) continue;
      if (counts.at(e.value) > best_n) {
        best = e.value;
        best_n = counts.at(e.value);
      }
    }
    votes.push_back(best);
  }
  std::map<std::string, int> count;
  for (const auto& v : votes) ++count[v];
  std::string best;
  int best_n = 0;
  for (const auto& v : votes) {
    if (count[v] > best_n) {
      best = v;
      best_n = count[v];
    }
  }
  return best;
}

void Read(const Round& r, const EntryChange& c, Collector& out) {
  if (c.after == nullptr) return;
  bool threshold_written = false;
  for (const std::string& arch : ArchsOf(c)) {
    const OnArch b = Resolve(c.before, arch);
    const OnArch a = Resolve(c.after, arch);
    const bool was_passing_checked = b.exists && b.status == "EXPECTED_PASSING" && b.assert_pcc;
    // nonsense: a checked passing test whose PCC failed became ...
    if (was_passing_checked && a.status == "EXPECTED_PASSING" && !a.assert_pcc) {
      out.Add("nonsense", "disable_pcc", r, c.key);
    }
    const bool pcc_failure = a.bringup_status == "INCORRECT_RESULT" || Mentions(a.reason, {"pcc"});
    if (b.exists && b.status == "EXPECTED_PASSING" && a.status == "KNOWN_FAILURE_XFAIL" &&
        pcc_failure) {
      out.Add("nonsense", "xfail", r, c.key);
    }
    // demote_pcc_off: a passing test with its check off demoted for another failure.
    if (b.exists && b.status == "EXPECTED_PASSING" && !b.assert_pcc && !pcc_failure &&
        (a.status == "KNOWN_FAILURE_XFAIL" || a.status == "NOT_SUPPORTED_SKIP")) {
      out.Add("demote_pcc_off", a.assert_pcc ? "drop" : "keep", r, c.key);
    }
    // pcc_reason: a PCC failure's reason written in the round, in the runner's words or short.
    if (a.status == "KNOWN_FAILURE_XFAIL" && pcc_failure && a.reason != b.reason) {
      if (Mentions(a.reason, {"calculated: pcc="})) {
        out.Add("pcc_reason", "runner", r, c.key);
      } else if (Mentions(a.reason, {"(calc ~", "(calc nan"})) {
        out.Add("pcc_reason", "short", r, c.key);
      }
    }
    // lowest and grid: a threshold the round wrote (lowered or raised) on a checked test.
    if (a.status == "EXPECTED_PASSING" && a.assert_pcc && a.required_pcc &&
        (!b.required_pcc || std::fabs(*a.required_pcc - *b.required_pcc) > 1e-9)) {
      const double v = *a.required_pcc;
      out.Add(util::StrCat("lowest:", ParallelismOf(c.key)), Number(v), r, c.key);
      out.Add("grid", Number(GridOf(v)), r, c.key);
      threshold_written = true;
    }
    // Skips: their bringup_status, and the forms of their reasons.
    const bool new_skip = a.status == "NOT_SUPPORTED_SKIP" &&
                          (!b.exists || b.status != "NOT_SUPPORTED_SKIP" || b.reason != a.reason);
    if (new_skip) {
      if (!b.exists || b.status != "NOT_SUPPORTED_SKIP") {
        out.Add("skip_bringup", a.bringup_status.empty() ? "omit" : "write", r, c.key);
      }
      const std::string reason(WithoutUrl(a.reason));
      const std::string_view cause = SkipCause(reason);
      if (cause == "hang") {
        out.Add("hang_reason", reason == "Hang" ? "Hang" : "message", r, c.key);
      } else if (cause == "oom_kill") {
        out.Add("oom_reason", reason == "Host OOM: killed by signal 9" ? reason : "message", r,
                c.key);
      } else if (!reason.empty()) {
        out.Add("crash_reason", reason.starts_with("crashed with signal") ? "signal" : "message", r,
                c.key);
      }
    }
    // unknown_stage: a new xfail whose stage the entry does not name.
    if (a.status == "KNOWN_FAILURE_XFAIL" && (!b.exists || b.status != "KNOWN_FAILURE_XFAIL") &&
        !pcc_failure && !a.bringup_status.starts_with("FAILED_")) {
      out.Add("unknown_stage", a.bringup_status.empty() ? "omit" : "write", r, c.key);
    }
  }
  // pcc_comment: a written threshold line with or without a comment.
  if (threshold_written) {
    const std::string line = LineOf(c.after_text, "required_pcc");
    if (!line.empty()) {
      const std::size_t hash = line.find('#');
      const bool figure = hash != std::string::npos &&
                          Mentions(line.substr(hash), {"pcc 0.", "pcc=0.", "pcc: 0.", "pcc 1"});
      out.Add("pcc_comment", figure ? "figure" : "none", r, c.key);
    }
  }
}

}  // namespace

std::string_view SkipCause(std::string_view reason) {
  if (Mentions(reason, {"hang", "timed out", "timeout", "time out"})) return "hang";
  if (Mentions(reason, {"oom", "out of memory", "signal 9", "killed"}) &&
      !Mentions(reason, {"not enough space to allocate"})) {
    return "oom_kill";
  }
  return "crash";
}

bool IsLearnedSource(std::string_view source) { return source.starts_with("learned from "); }

std::string LearnedSource(const std::vector<Evidence>& evidence) {
  if (evidence.empty()) return "default";
  const Evidence& newest = evidence.front();
  std::set<std::string> rounds;
  for (const auto& e : evidence) rounds.insert(e.commit);
  return util::StrCat("learned from ", evidence.size(),
                      evidence.size() == 1 ? " change" : " changes", " in ", rounds.size(),
                      rounds.size() == 1 ? " round" : " rounds", ", newest ", newest.commit, " ",
                      newest.date, " ", newest.key);
}

Learned LearnPolicy(std::span<const Round> rounds, const Policy& base) {
  Collector collector;
  for (const Round& r : rounds) {
    for (const EntryChange& c : r.changes) Read(r, c, collector);
  }
  Learned out;
  out.policy = base;
  Policy& p = out.policy;
  auto choice = [&](const std::string& knob, std::string& value) {
    auto items = collector.Newest(knob, kLearnWindow);
    if (items.empty()) return;
    value = Majority(items);
    p.sources[knob] = LearnedSource(items);
    out.evidence[knob] = std::move(items);
  };
  choice("nonsense", p.nonsense);
  choice("pcc_reason", p.pcc_reason);
  choice("demote_pcc_off", p.demote_pcc_off);
  choice("pcc_comment", p.pcc_comment);
  choice("skip_bringup", p.skip_bringup_status);
  choice("unknown_stage", p.unknown_stage);
  choice("hang_reason", p.hang_reason);
  choice("oom_reason", p.oom_reason);
  choice("crash_reason", p.crash_reason);

  // grid: the grid most of the newest thresholds written sit on.
  if (auto items = collector.Newest("grid", kLearnWindow); !items.empty()) {
    p.grid = std::stod(Majority(items));
    if (p.margin >= p.grid) p.margin = 0;
    p.sources["grid"] = LearnedSource(items);
    out.evidence["grid"] = std::move(items);
  }
  // lowest: per parallelism, the lowest of the newest thresholds written (single-device ones
  // are the default).
  std::vector<Evidence> lowest_items;
  for (std::string_view par : {"single_device", "data_parallel", "tensor_parallel"}) {
    auto items = collector.Newest(util::StrCat("lowest:", par), kLearnWindow);
    if (items.empty()) continue;
    double low = 1;
    for (const auto& e : items) low = std::min(low, std::stod(e.value));
    // The lowest written is still a threshold: nonsense starts just below it.
    const double floor = std::round((low - 0.001) * 1000) / 1000;
    if (par == "single_device") {
      p.lowest["default"] = std::min(p.Lowest("", ""), floor);
    } else {
      p.lowest[std::string(par)] = floor;
    }
    for (auto& e : items) lowest_items.push_back(std::move(e));
  }
  if (!lowest_items.empty()) {
    std::sort(lowest_items.begin(), lowest_items.end(),
              [](const Evidence& a, const Evidence& b) { return a.date > b.date; });
    p.sources["lowest"] = LearnedSource(lowest_items);
    out.evidence["lowest"] = std::move(lowest_items);
  }
  return out;
}

}  // namespace triage::nightly
