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

// OK when key is a test-config key a record may carry (the checks RecordOf makes: size, UTF-8,
// no control character, backslash, "..", leading '/', and the key grammar); else
// InvalidArgument naming the key and why. The coordinator checks the records it is sent again.
absl::Status CheckKey(std::string_view key);

// The record of one testcase. nullopt: the testcase is not of a model test function (counted as
// such by the caller). An error (InvalidArgument, starting with `where`, e.g. "run/x.xml:12")
// when the testcase is hostile or unreadable: a key that is not a test-config key (over 512
// bytes, not UTF-8, a control character, a backslash, "..", a leading '/', or not of the key
// grammar), a `tags` property that is not a Python literal dict, a tags['arch'] that is not an
// arch name (letters, digits, '_', '-', '.'), a property over kMaxPropertyBytes. A model testcase
// without tags or without tags['arch'] is returned with an empty arch: the caller leaves it out
// and names it. Text fields are made valid UTF-8 (other bytes become U+FFFD); `where` is the
// record's source.
absl::StatusOr<std::optional<v1::NightlyRecord>> RecordOf(const junit::TestCase& testcase,
                                                          std::string_view where);

}  // namespace triage::nightly
