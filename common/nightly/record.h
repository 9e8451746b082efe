#pragma once

// One testcase of tt-xla's runner as the nightly rules read it (docs/nightly.md, "Intake"): the
// outcome, the runner's properties (error_message, the `tags` Python literal) and what the
// failure text says (a crash signal, a timeout), reduced to a v1::NightlyRecord. The streaming
// intake (intake.h) and the confirmation runner (agent/playbooks/nightly) both use it.

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/junit/junit.h"
#include "triage/v1/nightly.pb.h"

namespace triage::nightly {

// Longest error_message / failure kept in a record (the first lines, cut at a UTF-8 boundary).
inline constexpr std::size_t kMaxRecordTextBytes = 2000;
// Longest property value the intake accepts (docs/nightly.md: "a property value over 1 MiB").
inline constexpr std::size_t kMaxPropertyBytes = 1 << 20;

// test_all_models_torch, test_all_models_jax, test_llms_torch.
bool IsModelTestFunction(std::string_view test_function);

// The framework folder under tests/runner/test_config/ a model test function reads its entries
// from: torch, jax, torch_llm ("" for other functions).
std::string_view FrameworkOfTestFunction(std::string_view test_function);

// The test function whose tests an entry of this test-config file is (torch ->
// test_all_models_torch, jax -> test_all_models_jax, torch_llm -> test_llms_torch); "" when the
// path is not a test-config file.
std::string_view TestFunctionOfFile(std::string_view test_config_path);

// OK when key is a test-config key a record may carry (the checks RecordOf makes: at most 512
// bytes of tt-xla's key alphabet, ASCII letters, digits, '_', '-', '.', '/' and '+'; no "..", no
// leading '/', so no model path leaves the repository); else InvalidArgument naming the key
// (other characters as <U+XXXX>) and why, a character outside the alphabet by its code point
// ("character 5 is U+202E, ..."). The key grammar is not checked: a key the checkout's grammar
// does not read is a record that maps to nothing (mapping.h). The coordinator checks the
// records it is sent again.
absl::Status CheckKey(std::string_view key);

// OK when the record's PCC figures can be a comparison's: pcc NaN (the runner's value for a
// comparison that failed) or in [-1, 1], pcc_threshold in [0, 1] (each when set); else
// InvalidArgument, e.g. "pcc 1.5 is not a correlation in [-1, 1]". Such a record is bad: the
// intake leaves it out of its run (a problem line), the coordinator refuses it.
absl::Status CheckPcc(const v1::NightlyRecord& record);

// The record of one testcase. nullopt: the testcase is not of a model test function (counted as
// such by the caller). An error (InvalidArgument, starting with `where`, e.g. "run/x.xml:12")
// when the testcase is hostile or unreadable: a key that is not a test-config key (CheckKey), a
// `tags` property that is not a Python literal dict (or whose keys a record reads hold more than
// 10,000 items), a tags['arch'] that is not an
// arch name (letters, digits, '_', '-', '.'), a property over kMaxPropertyBytes. A model testcase
// without tags or without tags['arch'] is returned with an empty arch: the caller leaves it out
// and names it; so does one whose PCC figures are out of range (CheckPcc). Only the tags keys a
// record reads are built, the rest of the literal is checked and skipped (its cost is linear in
// its size). Text fields are made valid UTF-8 (other bytes become U+FFFD); `where` is the
// record's source.
absl::StatusOr<std::optional<v1::NightlyRecord>> RecordOf(const junit::TestCase& testcase,
                                                          std::string_view where);

}  // namespace triage::nightly
