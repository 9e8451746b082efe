#include "coordinator/triagectl/sweep_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <utility>

#include "common/util/strings.h"

namespace triage::ctl::farm {

std::string Duration(std::int64_t s) {
  if (s < 0) return "?";
  if (s < 60) return util::StrCat(s, "s");
  if (s < 3600) return util::StrCat(s / 60, "m", s % 60, "s");
  return util::StrCat(s / 3600, "h", (s % 3600) / 60, "m");
}

std::string Time(std::int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  std::time_t t = unix_ms / 1000;
  std::tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string Counts(const google::protobuf::Map<std::string, std::int32_t>& m) {
  std::vector<std::pair<std::string, int>> v(m.begin(), m.end());
  std::sort(v.begin(), v.end());
  std::string out;
  for (const auto& [k, n] : v) util::StrAppend(&out, out.empty() ? "" : " ", k, "=", n);
  return out.empty() ? "-" : out;
}

std::string Eta(std::int64_t seconds) { return seconds < 0 ? "unknown" : Duration(seconds); }

// Until the merge, the labels and review flags are the results' own: the merge adds conflicts
// and review flags, and a later registry wave may change a rechecked entry's label. The count
// of decided entries never goes back (docs/farm.md, "Counting while a sweep runs").
std::string Provisional(const v1::Sweep& s) {
  if (s.state() != "running" && s.state() != "blocked" && s.state() != "merging") return "";
  const int rechecking = s.entries().rechecking();
  return util::StrCat(" (provisional until the merge",
                      rechecking > 0 ? util::StrCat("; ", rechecking, " rechecked") : "", ")");
}

void PrintSweep(std::ostream& out, const v1::Sweep& s) {
  out << "sweep " << s.id() << "  " << s.state() << "\n";
  out << "  repo      " << s.repo() << "\n";
  out << "  commits   tt-xla " << s.ttxla_commit().substr(0, 12) << ", tt_forge_models "
      << s.forge_commit().substr(0, 12);
  if (!s.forge_gitlink_commit().empty() && s.forge_gitlink_commit() != s.forge_commit()) {
    out << " (" << (s.forge_source() == "ref" ? "--forge-ref" : "checked out")
        << "; tt-xla records " << s.forge_gitlink_commit().substr(0, 12) << ")";
  }
  out << "\n";
  for (const auto& n : s.notes()) out << "  note      " << n << "\n";
  out << "  playbooks " << util::StrJoin(s.playbooks(), ", ") << "   archs "
      << util::StrJoin(s.archs(), ", ") << "   executor " << s.executor() << "\n";
  const auto& e = s.entries();
  out << "  entries   " << e.decided() << "/" << e.total() << " decided, " << e.running()
      << " running, " << e.queued() << " queued   " << Counts(e.by_outcome())
      << "   review=" << e.review();
  if (e.conflicts() > 0) out << " conflicts=" << e.conflicts();
  out << Provisional(s) << "\n";
  out << "  shards    " << Counts(s.shards_by_state());
  if (s.max_failed_shards() > 0) {
    out << "   failed on the farm " << s.failed_shards() << " of a budget of "
        << s.max_failed_shards() << (s.over_budget() ? " (spent: not leasing)" : "");
  }
  out << "\n";
  if (s.has_carry()) {
    const auto& c = s.carry();
    if (c.base().empty()) {
      out << "  carried   nothing (no earlier succeeded sweep of this repository)\n";
    } else {
      out << "  carried   " << c.entries() << " entries, " << c.shards() << " shards of "
          << c.loaders() << " loaders from " << c.base() << "; " << c.rerun_loaders()
          << " loaders run\n";
    }
  }
  // A recheck sweep reads no nightly run: its line is the recheck's.
  if (s.has_nightly() && !s.has_recheck()) {
    const auto& n = s.nightly();
    out << "  nightly   " << n.runs() << " runs on " << util::StrJoin(n.archs(), ", ") << ": "
        << n.records() << " records, " << n.mapped() << " mapped, " << n.unmapped() << " unmapped, "
        << n.duplicates() << " duplicates, " << n.contradictory() << " contradictory\n";
    out << "  candidates " << Counts(n.candidates()) << "   already=" << n.already()
        << " flagged=" << n.flagged() << " unconfirmed=" << n.unconfirmed() << "\n";
    if (n.unconfirmed() > 0 && n.confirm_seconds_needed() > 0) {
      // What full confirmation would take, so the next sweep can ask for it.
      const auto hours = [](double seconds) {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%.1f", seconds / 3600);
        return std::string(buf);
      };
      out << "  budget    confirmations of " << hours(n.confirm_seconds_planned())
          << " device-hours run, " << hours(n.confirm_seconds_needed())
          << " needed to confirm every candidate (--max-device-hours "
          << static_cast<long>(std::ceil(n.confirm_seconds_needed() / 3600)) << ")\n";
    }
  }
  if (s.has_recheck()) {
    const auto& r = s.recheck();
    out << "  recheck   " << r.selected() << " of " << r.skipped()
        << " skipped entry-archs this sweep; " << r.checked_before()
        << " checked by earlier sweeps, " << r.never_checked() << " never checked, " << r.left()
        << " left for later";
    if (r.oldest_check_unix_ms() > 0) {
      out << "; oldest check left " << Time(r.oldest_check_unix_ms());
    }
    out << "\n";
  }
  if (!s.request_id().empty()) {
    out << "  request   " << s.request_id()
        << (s.existing() ? " (already started: this is the sweep it started)" : "") << "\n";
  }
  out << "  started   " << Time(s.created_unix_ms()) << " by " << s.created_by();
  if (s.finished_unix_ms() > 0) out << ", finished " << Time(s.finished_unix_ms());
  if (s.state() == "running") out << ", ETA " << Eta(s.eta_seconds());
  out << "\n";
  if (!s.error().empty()) out << "  error     " << s.error() << "\n";
  for (const auto& p : s.problems()) out << "  problem   " << p << "\n";
}

std::vector<std::string> SweepListHeader() {
  return {"ID",  "STATE",    "STARTED",   "DECIDED", "REVIEW", "SHARDS",
          "ETA", "PROBLEMS", "PLAYBOOKS", "ARCHS",   "REPO"};
}

std::vector<std::string> SweepListRow(const v1::Sweep& s) {
  const bool open = s.state() == "running" || s.state() == "blocked";
  return {s.id(),
          s.state(),
          Time(s.created_unix_ms()),
          util::StrCat(s.entries().decided(), "/", s.entries().total()),
          util::StrCat(s.entries().review()),
          Counts(s.shards_by_state()),
          open ? Eta(s.eta_seconds()) : "-",
          util::StrCat(s.problems_size()),
          util::StrJoin(s.playbooks(), ","),
          util::StrJoin(s.archs(), ","),
          s.repo()};
}

std::string ProgressLine(const v1::Sweep& s) {
  const auto& e = s.entries();
  const int width = 30;
  const int decided = e.decided();
  const int filled = e.total() > 0 ? decided * width / e.total() : 0;
  std::string bar =
      util::StrCat("[", std::string(filled, '#'), std::string(width - filled, '.'), "]");
  std::string line = util::StrCat(bar, " ", decided, "/", e.total(), " entries decided  ",
                                  Counts(e.by_outcome()), "  review=", e.review());
  if (e.conflicts() > 0) util::StrAppend(&line, " conflicts=", e.conflicts());
  line += Provisional(s);
  util::StrAppend(&line, "  | shards ", Counts(s.shards_by_state()));
  if (s.state() == "running") {
    util::StrAppend(&line, "  | ETA ", Eta(s.eta_seconds()));
  } else if (s.over_budget()) {
    util::StrAppend(&line, "  | STOPPED: failure budget spent, needs a person (problems above)");
  } else if (s.state() == "blocked") {
    util::StrAppend(&line, "  | BLOCKED: needs a person (problems above)");
  } else {
    util::StrAppend(&line, "  | ", s.state());
  }
  return line;
}

void ProgressPrinter::Show(const v1::Sweep& s) {
  std::string line = ProgressLine(s);
  std::vector<std::string> problems(s.problems().begin(), s.problems().end());
  if (problems != shown_problems_) {
    if (tty_) out_ << "\r\033[K";
    for (const auto& p : problems) out_ << "problem: " << p << "\n";
    if (problems.empty() && !shown_problems_.empty()) out_ << "problems cleared\n";
    shown_problems_ = std::move(problems);
    last_key_.clear();
  }
  if (tty_) {
    out_ << "\r\033[K" << line << std::flush;
    return;
  }
  std::string key = util::StrCat(line.substr(0, line.find("  | shards")), " ", s.state());
  if (key != last_key_) out_ << line << "\n" << std::flush;
  last_key_ = std::move(key);
}

}  // namespace triage::ctl::farm
