// The unified-diff writer, reader and applier.
//
// Input: two texts A and B separated by a NUL byte (B empty when there is none).
//   - Round trip: the diff of A -> B (UnifiedDiff, at two context sizes and with a small edit
//     distance bound, and UnifiedDiffOfRegions with the changed region) splits into exactly one
//     file whose hunks parse, and applying it to A gives B.
//   - Any diff: B read as a diff is split, its hunks parsed and applied to A without crashing;
//     errors are InvalidArgument.
//   - The lift of a command executor's diff (common/lift): when B applies to A and both
//     are clean test-config documents, each changed entry is read per arch the way the lift
//     reads it, and every field it names on an arch resolves (the lift dereferences them).

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/diff/apply_diff.h"
#include "common/diff/unified_diff.h"
#include "common/inventory/document.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using triage::diff::DiffOptions;

std::vector<std::string_view> Lines(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (start < s.size()) {
    std::size_t nl = s.find('\n', start);
    if (nl == std::string_view::npos) nl = s.size() - 1;
    out.push_back(s.substr(start, nl - start + 1));
    start = nl + 1;
  }
  return out;
}

void RoundTrip(std::string_view a, std::string_view b, const std::string& diff, const char* how) {
  if (a == b) {
    FUZZ_CHECK(diff.empty(), "%s: a diff of equal texts", how);
    return;
  }
  FUZZ_CHECK(!diff.empty(), "%s: no diff of different texts", how);
  auto split = triage::diff::SplitDiff(diff);
  FUZZ_CHECK(split.ok(), "%s: own diff does not split: %s", how, split.status().ToString().c_str());
  FUZZ_CHECK(split->size() == 1, "%s: own diff has %zu files", how, split->size());
  auto hunks = triage::diff::ParseHunks(split->front());
  FUZZ_CHECK(hunks.ok(), "%s: own hunks do not parse: %s", how, hunks.status().ToString().c_str());
  auto applied = triage::diff::ApplyFileDiff(a, split->front());
  FUZZ_CHECK(applied.ok(), "%s: own diff does not apply: %s", how,
             applied.status().ToString().c_str());
  FUZZ_CHECK(*applied == b, "%s: own diff applies to a different text", how);
}

// What common/lift reads of a changed entry, on each arch.
void LiftReads(std::string_view before_text, const std::string& after_text) {
  using triage::inventory::Document;
  const Document before = Document::Parse("f.yaml", std::string(before_text));
  const Document after = Document::Parse("f.yaml", after_text);
  if (!after.ok()) return;
  for (const auto& e : after.entries()) {
    const auto* old = before.Find(e.key);
    if (old != nullptr && old->value == e.value) continue;
    for (const char* arch : {"", "n150", "p150"}) {
      for (const auto& name : e.FieldNamesForArch(arch)) {
        FUZZ_CHECK(e.FieldForArch(name, arch) != nullptr, "'%s': %s named but not found on '%s'",
                   e.key.c_str(), name.c_str(), arch);
      }
      for (const auto& item : e.value.map) {
        if (item.key == "arch_overrides") continue;
        FUZZ_CHECK(e.FieldForArch(item.key, arch) != nullptr, "'%s': top-level %s not found",
                   e.key.c_str(), item.key.c_str());
      }
      (void)e.OverrideArchs();
      (void)e.StatusForArch(arch);
      if (old != nullptr) (void)old->FieldNamesForArch(arch);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = all.find('\0');
  const std::string_view a = all.substr(0, nul);
  const std::string_view b =
      nul == std::string_view::npos ? std::string_view() : all.substr(nul + 1);

  RoundTrip(a, b, triage::diff::UnifiedDiff("f.yaml", a, b), "context 3");
  RoundTrip(a, b, triage::diff::UnifiedDiff("f.yaml", a, b, DiffOptions{0, 20000}), "context 0");
  RoundTrip(a, b, triage::diff::UnifiedDiff("f.yaml", a, b, DiffOptions{1, 2}), "bounded");
  {
    // The one region between the common first and last lines.
    const auto la = Lines(a);
    const auto lb = Lines(b);
    std::size_t pre = 0;
    while (pre < la.size() && pre < lb.size() && la[pre] == lb[pre]) ++pre;
    std::size_t suf = 0;
    while (suf < la.size() - pre && suf < lb.size() - pre &&
           la[la.size() - 1 - suf] == lb[lb.size() - 1 - suf]) {
      ++suf;
    }
    triage::diff::Region r{static_cast<int>(pre), static_cast<int>(la.size() - suf),
                           static_cast<int>(pre), static_cast<int>(lb.size() - suf)};
    std::vector<triage::diff::Region> regions;
    if (a != b) regions.push_back(r);
    RoundTrip(a, b, triage::diff::UnifiedDiffOfRegions("f.yaml", a, b, regions), "regions");
  }

  auto split = triage::diff::SplitDiff(b);
  if (!split.ok()) {
    FUZZ_CHECK(split.status().code() == absl::StatusCode::kInvalidArgument,
               "SplitDiff: unexpected status: %s", split.status().ToString().c_str());
    return 0;
  }
  for (const auto& fd : *split) {
    (void)fd.path();
    auto hunks = triage::diff::ParseHunks(fd);
    if (hunks.ok()) {
      for (const auto& h : *hunks) (void)h.Text();
    }
    auto applied = triage::diff::ApplyFileDiff(a, fd);
    if (applied.ok()) LiftReads(a, *applied);
  }
  return 0;
}
