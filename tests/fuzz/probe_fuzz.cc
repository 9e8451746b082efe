// The probe's JSON reader: its stdout (one document per line) and the evidence files (one
// document or an array). Any text is read without crashing or throwing; an error is
// InvalidArgument. Every accepted document's output and input trees can be described.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "agent/playbooks/probe.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

void Check(const absl::StatusOr<std::vector<triage::playbooks::ProbeDoc>>& docs) {
  if (!docs.ok()) {
    FUZZ_CHECK(docs.status().code() == absl::StatusCode::kInvalidArgument, "unexpected status: %s",
               docs.status().ToString().c_str());
    return;
  }
  for (const auto& d : *docs) {
    FUZZ_CHECK(!d.key.empty() && !d.phase.empty(), "a document without key or phase");
    (void)triage::playbooks::DescribeTree(d.tree);
    if (d.error) (void)d.error->Line();
    for (const auto& in : d.inputs) (void)triage::playbooks::DescribeTree(in.tree);
    if (d.forward) {
      const int pos = d.forward->PositionOf("targets");
      FUZZ_CHECK(pos < 0 || d.forward->Has("targets"), "a position for a parameter it lacks");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Check(triage::playbooks::ParseProbeOutput(text));
  Check(triage::playbooks::ParseProbeFile(text, "probe.json"));
  // Any JSON as a tree.
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) (void)triage::playbooks::DescribeTree(j);
  return 0;
}
