#pragma once

// The grammar of a checkout's test-config keys, read from its runner (docs/inventory.md, "Key
// grammar"). A key is a pytest id of test_all_models_torch: pytest joins the ids of the stacked
// @pytest.mark.parametrize decorators with '-', starting from the one nearest the function, so
// the key is the test entry's id (<model_path>/<framework>[-<variant>]) followed by one id of
// each decorator above it. tt-xla's runner changed those decorators over time: today
// parallelism then run mode; in December 2025 an op-by-op segment between them ("full",
// "op_by_op_torch", ...); in October 2025 no parallelism segment.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace triage::inventory {

// Where a checkout's runner is, relative to the tt-xla root.
inline constexpr std::string_view kRunnerPath = "tests/runner/test_models.py";
// KeyGrammar::source of DefaultKeyGrammar().
inline constexpr std::string_view kBuiltInGrammar = "built-in";

struct KeyGrammar {
  struct Segment {
    // "parallelism" (ids among single_device/data_parallel/tensor_parallel), "run_mode" (ids
    // among inference/training), else the parametrize's argument name ("op_by_op").
    std::string name;
    std::vector<std::string> ids;  // as the runner lists them
  };
  // In key order after the entry id. One is named "run_mode"; "parallelism" may be absent.
  std::vector<Segment> segments;
  // "tests/runner/test_models.py:344" (the line of def test_all_models_torch), or "built-in".
  std::string source;

  bool built_in() const { return source == kBuiltInGrammar; }
  // The segment of that name, or nullptr.
  const Segment* Find(std::string_view name) const;
  // "<model_path>/<framework>[-<variant>]-<parallelism>-<run_mode>", a segment per <name>.
  std::string Pattern() const;
};

// Today's grammar: parallelism (single_device, data_parallel, tensor_parallel), then run_mode
// (inference, training); source "built-in".
const KeyGrammar& DefaultKeyGrammar();

// The grammar of a runner's text (tests/runner/test_models.py): the @pytest.mark.parametrize
// decorators directly above `def test_all_models_torch(`. Each call is read to its matching ')'
// (brackets, string literals and comments respected); one whose ids are literal strings
// (pytest.param(..., id="x") items, or ids=["a", "b"]) is a segment; the one without literal
// ids must be the bottom one (the test entry). Other decorators are skipped. InvalidArgument
// "<path>:<line>: why" when the text has no such function, a bracket or string is not closed, a
// decorator above the entry has no literal ids, the entry has some, two segments share a name,
// or no segment is the run mode.
absl::StatusOr<KeyGrammar> ReadKeyGrammar(std::string_view runner_text, std::string_view path);

// The grammar of the checkout whose runner (kRunnerPath) read as `runner`: the runner's, else the
// built-in one when the checkout has no runner or its grammar cannot be read. For readers of
// single files (the merge, the report, the agent's verification): the intake reads the same
// runner and says why it fell back.
KeyGrammar GrammarOrDefault(const absl::StatusOr<std::string>& runner);

}  // namespace triage::inventory
