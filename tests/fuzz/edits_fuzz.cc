// The edits file of `triagectl yaml edit` (ParseEdits): any text is read without crashing, and a
// batch it accepts is applied to a small test-config document. The editor either refuses the
// batch with a message or returns a document that parses cleanly, with the document's entries
// and then the entries the batch creates, in its order; its InternalError (the output did not
// re-parse to the intended fields, entries or comments) is a bug.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/inventory/document.h"
#include "common/inventory/editor.h"
#include "coordinator/triagectl/yaml_cmd.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

constexpr char kDocument[] = R"(# A test-config file as tt-xla writes them.
test_config:
  a/pytorch-Small-single_device-inference:
    status: EXPECTED_PASSING

  b/pytorch-Tts-single_device-inference:
    status: KNOWN_FAILURE_XFAIL
    bringup_status: FAILED_FE_COMPILATION
    reason: "RuntimeError: mat1 and mat2 must have the same dtype"
    markers:
      - push
      - nightly

  c/pytorch-18-single_device-inference:
    status: EXPECTED_PASSING # measured pcc=0.999
    assert_pcc: false
    arch_overrides:
      p150:
        status: KNOWN_FAILURE_XFAIL
        reason: 'AssertionError: PCC comparison failed'
      n150:
        required_pcc: 0.97
)";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto edits = triage::ctl::ParseEdits(text, "edits.json");
  if (!edits.ok()) {
    FUZZ_CHECK(edits.status().code() == absl::StatusCode::kInvalidArgument, "unexpected status: %s",
               edits.status().ToString().c_str());
    return 0;
  }
  static const triage::inventory::Document* doc = new triage::inventory::Document(
      triage::inventory::Document::Parse("test_config_inference_single_device.yaml", kDocument));
  FUZZ_CHECK(doc->ok(), "the built-in document does not parse");
  auto edited = triage::inventory::ApplyEdits(*doc, *edits);
  if (!edited.ok()) {
    FUZZ_CHECK(edited.status().code() != absl::StatusCode::kInternal, "editor: %s",
               std::string(edited.status().message()).c_str());
    return 0;
  }
  auto after = triage::inventory::Document::Parse(doc->path(), *edited);
  FUZZ_CHECK(after.ok(), "the edited file does not parse");
  std::size_t n = doc->entries().size();
  for (const auto& e : *edits) {
    if (!e.create) continue;
    FUZZ_CHECK(n < after.entries().size() && after.entries()[n].key == e.key,
               "created entry '%s' is not next at the end", e.key.c_str());
    ++n;
  }
  FUZZ_CHECK(n == after.entries().size(), "%zu entries, want %zu", after.entries().size(), n);
  return 0;
}
