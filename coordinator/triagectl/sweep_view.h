#pragma once

// How triagectl shows a sweep to a person: `sweep status` / `sweep get` (PrintSweep), the rows of
// `sweep list` (SweepListRow) and `sweep watch`'s progress lines (ProgressLine,
// ProgressPrinter). Pure over the coordinator's v1::Sweep, so tests read exactly what an
// operator reads.

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "google/protobuf/map.h"
#include "triage/v1/control.pb.h"

namespace triage::ctl::farm {

// 42s, 3m5s, 6h30m; "?" when negative.
std::string Duration(std::int64_t seconds);
// RFC 3339 UTC of a unix time in milliseconds; "-" when unset.
std::string Time(std::int64_t unix_ms);
// "a=1 b=2", sorted by key; "-" when empty.
std::string Counts(const google::protobuf::Map<std::string, std::int32_t>& m);
// A sweep's ETA: "unknown" while there is no estimate (-1).
std::string Eta(std::int64_t seconds);

// " (provisional until the merge; N rechecked)" while the sweep has not merged, else "".
std::string Provisional(const v1::Sweep& s);

// `sweep status ID`: the sweep, one fact per line.
void PrintSweep(std::ostream& out, const v1::Sweep& s);

// One `sweep list` row, in SweepListHeader's columns.
std::vector<std::string> SweepListHeader();
std::vector<std::string> SweepListRow(const v1::Sweep& s);

// `sweep watch`'s line: a bar of decided entries, the counts (provisional until the merge), the
// shards by state and the ETA or what stops the sweep.
std::string ProgressLine(const v1::Sweep& s);

// What `sweep watch` shows of each SweepEvent without -o json: progress lines, and the sweep's
// problems whenever they change, printed before the line that refers to them.
class ProgressPrinter {
 public:
  ProgressPrinter(std::ostream& out, bool tty) : out_(out), tty_(tty) {}

  void Show(const v1::Sweep& s);

 private:
  std::ostream& out_;
  const bool tty_;
  // Not a terminal (a log, CI): one line per change of entries or sweep state, not per shard move.
  std::string last_key_;
  std::vector<std::string> shown_problems_;
};

}  // namespace triage::ctl::farm
