#include "common/nightly/record.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/inventory/document.h"
#include "common/inventory/value.h"
#include "common/junit/python_literal.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::nightly {
namespace {

using inventory::Value;

constexpr std::string_view kTorchFunction = "test_all_models_torch";
constexpr std::string_view kJaxFunction = "test_all_models_jax";
constexpr std::string_view kLlmFunction = "test_llms_torch";

// A key longer than this is not a test-config key (the longest real ones are about 120 bytes).
constexpr std::size_t kMaxKeyBytes = 512;
// An arch name: n150, p150, n300-llmbox, galaxy-wh-6u, ...
constexpr std::size_t kMaxArchBytes = 64;
// How many non-blank lines of a message a record keeps.
constexpr int kRecordLines = 3;

// Items the tags keys a record reads may hold in all (guidance, failing_reason: a few each).
constexpr std::size_t kMaxTagItems = 10000;

// The keys of the tags literal a record reads (RecordOf).
const std::vector<std::string_view>& TagsKept() {
  static const std::vector<std::string_view> kKept = {
      "arch",          "parallelism",           "run_mode",          "run_phase",
      "model_name",    "bringup_status",        "model_test_status", "pcc",
      "pcc_threshold", "pcc_assertion_enabled", "guidance",          "failing_reason"};
  return kKept;
}

constexpr std::string_view kForkedCrash = "CRASHED with signal ";
// pytest-timeout's "Failed: Timeout >600.0s" and the runner's own "Failed: Timeout ...".
constexpr std::string_view kTimeoutMarkers[] = {"Timeout >", "Failed: Timeout"};

bool IsControl(unsigned char c) { return c < 0x20 || c == 0x7f; }

// Text for an error message: control characters as '?', at most 200 bytes.
std::string Printable(std::string_view s) {
  std::string out(util::TruncateUtf8(s, 200));
  for (char& c : out) {
    if (IsControl(static_cast<unsigned char>(c))) c = '?';
  }
  if (out.size() < s.size()) out += "...";
  return out;
}

// s with every byte that is not part of well-formed UTF-8 replaced by U+FFFD: protobuf strings
// must be UTF-8, and a reader that passes bytes through (pugixml) may hand over anything.
std::string ValidUtf8(std::string_view s) {
  std::string out;
  while (!s.empty()) {
    std::optional<std::size_t> bad = util::FirstInvalidUtf8(s);
    if (!bad) {
      out.append(s);
      break;
    }
    out.append(s.substr(0, *bad));
    out.append("\xEF\xBF\xBD");
    s.remove_prefix(*bad + 1);
  }
  return out;
}

// The first kRecordLines non-blank lines (trailing whitespace and '\r' removed) joined by '\n',
// cut at kMaxRecordTextBytes on a UTF-8 boundary.
std::string FirstLines(std::string_view text) {
  std::string out;
  int kept = 0;
  for (std::string_view line : util::SplitLines(text)) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) {
      line.remove_suffix(1);
    }
    if (util::TrimWhitespace(line).empty()) continue;
    if (kept > 0) out.push_back('\n');
    out.append(line);
    if (++kept == kRecordLines || out.size() > kMaxRecordTextBytes) break;
  }
  std::string valid = ValidUtf8(out);
  return std::string(util::TruncateUtf8(valid, kMaxRecordTextBytes));
}

// "... running the test CRASHED with signal 6" -> 6; 0 when absent (or not a signal number).
int ForkedCrashSignal(std::string_view s) {
  std::size_t at = s.find(kForkedCrash);
  while (at != std::string_view::npos) {
    int signal = 0;
    std::size_t i = at + kForkedCrash.size();
    std::size_t digits = 0;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9' && digits < 4; ++i, ++digits) {
      signal = signal * 10 + (s[i] - '0');
    }
    if (digits > 0 && digits < 4 && signal > 0 && signal < 128) return signal;
    at = s.find(kForkedCrash, at + 1);
  }
  return 0;
}

bool SaysTimeout(std::string_view s) {
  return std::any_of(std::begin(kTimeoutMarkers), std::end(kTimeoutMarkers),
                     [&](std::string_view marker) { return s.find(marker) != s.npos; });
}

// The Python name of a literal's kind, for messages about the tags property.
std::string_view PythonKind(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kNull:
      return "None";
    case Value::Kind::kBool:
      return "a bool";
    case Value::Kind::kInt:
      return "an int";
    case Value::Kind::kFloat:
      return "a float";
    case Value::Kind::kString:
      return "a string";
    case Value::Kind::kList:
      return "a list";
    case Value::Kind::kMap:
      return "a dict";
  }
  return "?";
}

// tags[name] when it is a string; "" when absent, None or of another kind.
std::string StringTag(const Value& tags, std::string_view name) {
  const Value* v = tags.Find(name);
  return v != nullptr && v->is_string() ? ValidUtf8(v->string) : std::string();
}

std::optional<double> NumberTag(const Value& tags, std::string_view name) {
  const Value* v = tags.Find(name);
  if (v == nullptr) return std::nullopt;
  if (v->kind == Value::Kind::kFloat) return v->number;
  if (v->kind == Value::Kind::kInt) return static_cast<double>(v->integer);
  return std::nullopt;
}

// "BringupStatus.FAILED_RUNTIME", "failed_runtime", "FAILED_RUNTIME" -> "FAILED_RUNTIME".
std::string EnumTag(const Value& tags, std::string_view name, std::string_view enum_class) {
  std::string value = StringTag(tags, name);
  std::string_view view = value;
  std::string prefix = util::StrCat(enum_class, ".");
  if (view.starts_with(prefix)) view.remove_prefix(prefix.size());
  std::string out(util::TrimWhitespace(view));
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

// The characters of tt-xla's test-config keys: every key of tests/runner/test_config/**/*.yaml
// is made of ASCII letters, digits, '_', '-', '.', '/' and '+' (record_test checks each real key
// against it). A key with any other character (a look-alike letter, a direction override) is not
// one of tt-xla's.
bool IsKeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.' || c == '/' || c == '+';
}

// The code point of the UTF-8 sequence at s[at] (s is valid UTF-8).
std::uint32_t CodePointAt(std::string_view s, std::size_t at) {
  const auto b = [&](std::size_t i) {
    return at + i < s.size() ? static_cast<std::uint32_t>(static_cast<unsigned char>(s[at + i]))
                             : 0u;
  };
  const std::uint32_t c = b(0);
  if (c < 0x80) return c;
  if (c < 0xE0) return ((c & 0x1F) << 6) | (b(1) & 0x3F);
  if (c < 0xF0) return ((c & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
  return ((c & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
}

// U+202E.
std::string CodePointName(std::uint32_t cp) {
  std::string hex = util::Hex(cp, 4);
  for (char& c : hex) {
    if (c >= 'a' && c <= 'f') c = static_cast<char>(c - 'a' + 'A');
  }
  return util::StrCat("U+", hex);
}

// A key for a message: printable ASCII as it is, every other character as <U+XXXX> (a byte that
// is not UTF-8 as <0xXX>), so that no direction override or look-alike reaches a terminal;
// at most 200 bytes of the key.
std::string KeyForMessage(std::string_view key) {
  std::string out;
  const std::string_view shown = key.substr(0, 200);
  std::size_t i = 0;
  const std::optional<std::size_t> bad = util::FirstInvalidUtf8(shown);
  const std::size_t valid = bad.value_or(shown.size());
  while (i < shown.size()) {
    const auto u = static_cast<unsigned char>(shown[i]);
    if (u >= 0x20 && u < 0x7f) {
      out.push_back(shown[i++]);
    } else if (i >= valid) {
      util::StrAppend(&out, "<byte 0x", util::Hex(u, 2), ">");
      ++i;
    } else {
      const std::uint32_t cp = CodePointAt(shown, i);
      util::StrAppend(&out, "<", CodePointName(cp), ">");
      i += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    }
  }
  if (shown.size() < key.size()) out += "...";
  return out;
}

// Why a key is not a test-config key ("" when it is one): only what makes it hostile. A key
// the checkout's grammar does not read is still a record (the mapping names it unmapped):
// checkouts of other times have other grammars.
std::string KeyProblem(std::string_view key) {
  if (key.empty()) return "it is empty";
  if (key.size() > kMaxKeyBytes) {
    return util::StrCat("it is ", key.size(), " bytes long, over ", kMaxKeyBytes);
  }
  if (util::FirstInvalidUtf8(key)) return "it is not UTF-8";
  if (std::any_of(key.begin(), key.end(), [](char c) { return IsControl(c); })) {
    return "it holds a control character";
  }
  if (key.find('\\') != key.npos) return "it holds a backslash";
  std::size_t characters = 0;
  for (std::size_t i = 0; i < key.size(); ++i) {
    if ((static_cast<unsigned char>(key[i]) & 0xC0) != 0x80) ++characters;
    if (!IsKeyChar(key[i])) {
      const std::uint32_t cp = CodePointAt(key, i);
      return util::StrCat(
          "character ", characters, " is ", CodePointName(cp),
          cp >= 0x21 && cp < 0x7f ? util::StrCat(" '", static_cast<char>(cp), "'") : std::string(),
          ", not of tt-xla's key alphabet (ASCII letters, digits, '_', '-', '.', "
          "'/' and '+')");
    }
  }
  // With these two, no model path (what precedes "/pytorch-" or "/jax-", the loader's folder)
  // can leave the repository.
  if (key.front() == '/') return "it starts with '/'";
  if (key.find("..") != key.npos) return "it holds '..'";
  return "";
}

// Why an arch name is not one ("" when it is): letters, digits, '_', '-' and '.'.
std::string ArchProblem(std::string_view arch) {
  if (arch.size() > kMaxArchBytes) {
    return util::StrCat("it is ", arch.size(), " bytes long, over ", kMaxArchBytes);
  }
  for (char c : arch) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.';
    if (!ok) return "it holds a character other than letters, digits, '_', '-' and '.'";
  }
  if (arch.front() == '.' || arch.front() == '-') return "it starts with '.' or '-'";
  return "";
}

v1::NightlyRecord::Outcome OutcomeOf(const junit::TestCase& tc) {
  switch (tc.outcome) {
    case junit::Outcome::kPassed:
      return v1::NightlyRecord::PASSED;
    case junit::Outcome::kFailed:
      return v1::NightlyRecord::FAILED;
    case junit::Outcome::kError:
      return v1::NightlyRecord::ERROR;
    case junit::Outcome::kSkipped:
      return tc.IsXfail() ? v1::NightlyRecord::XFAILED : v1::NightlyRecord::SKIPPED;
    case junit::Outcome::kMissing:
      break;
  }
  return v1::NightlyRecord::OUTCOME_UNSPECIFIED;
}

}  // namespace

bool IsModelTestFunction(std::string_view test_function) {
  return test_function == kTorchFunction || test_function == kJaxFunction ||
         test_function == kLlmFunction;
}

std::string_view FrameworkOfTestFunction(std::string_view test_function) {
  if (test_function == kTorchFunction) return "torch";
  if (test_function == kJaxFunction) return "jax";
  if (test_function == kLlmFunction) return "torch_llm";
  return "";
}

std::string_view TestFunctionOfFile(std::string_view test_config_path) {
  std::size_t slash = test_config_path.rfind('/');
  std::string_view base =
      slash == std::string_view::npos ? test_config_path : test_config_path.substr(slash + 1);
  if (!base.ends_with(".yaml") && !base.ends_with(".yml")) return "";
  // The placeholders file lists models test_placeholder_models reports, not model tests.
  if (base.find("placeholder") != std::string_view::npos) return "";
  std::string framework = inventory::FrameworkOfPath(test_config_path);
  if (framework == "torch") return kTorchFunction;
  if (framework == "jax") return kJaxFunction;
  if (framework == "torch_llm") return kLlmFunction;
  return "";
}

absl::StatusOr<std::optional<v1::NightlyRecord>> RecordOf(const junit::TestCase& testcase,
                                                          std::string_view where) {
  std::string_view name = testcase.name;
  std::string_view function = name.substr(0, std::min(name.find('['), name.size()));
  if (!IsModelTestFunction(function)) return std::nullopt;

  for (const auto& [property, value] : testcase.properties) {
    if (value.size() > kMaxPropertyBytes) {
      return absl::InvalidArgumentError(
          util::StrCat(where, ": property '", Printable(property), "' is ", value.size(),
                       " bytes, over the limit of ", kMaxPropertyBytes, " bytes"));
    }
  }

  std::string key = junit::KeyOfTestName(name);
  if (std::string why = KeyProblem(key); !why.empty()) {
    return absl::InvalidArgumentError(util::StrCat(where, ": ", function, "[", KeyForMessage(key),
                                                   "]: not a test-config key: ", why));
  }

  v1::NightlyRecord record;
  record.set_test_function(std::string(function));
  record.set_key(key);
  record.set_outcome(OutcomeOf(testcase));
  record.set_source(ValidUtf8(where));
  if (testcase.time_seconds > 0 && testcase.time_seconds < 1e9) {
    record.set_duration_seconds(testcase.time_seconds);
  }
  if (const std::string* error_message = testcase.Property("error_message")) {
    record.set_error_message(FirstLines(*error_message));
  }
  const bool failed =
      testcase.outcome == junit::Outcome::kFailed || testcase.outcome == junit::Outcome::kError;
  if (failed) {
    record.set_failure(FirstLines(testcase.message));
    int signal = ForkedCrashSignal(testcase.message);
    if (signal == 0) signal = ForkedCrashSignal(testcase.text);
    record.set_crash_signal(signal);
    record.set_timed_out(SaysTimeout(testcase.message) || SaysTimeout(testcase.text));
  }

  const std::string* tags_text = testcase.Property("tags");
  if (tags_text == nullptr) return record;  // no arch: the caller leaves it out and names it
  // Only the keys a record reads are built; every other value is checked and skipped, so a
  // hostile tags literal costs time in proportion to its size.
  absl::StatusOr<Value> tags = junit::ParsePythonDictKeys(*tags_text, TagsKept(), kMaxTagItems);
  if (!tags.ok()) {
    return absl::InvalidArgumentError(util::StrCat(
        where, ": ", function, "[", key, "]: the tags property is ",
        tags.status().code() == absl::StatusCode::kResourceExhausted ? "not a test's tags: "
                                                                     : "not a Python literal: ",
        util::MessageOf(tags.status())));
  }
  if (!tags->is_map()) {
    return absl::InvalidArgumentError(util::StrCat(where, ": ", function, "[", key,
                                                   "]: the tags property is ", PythonKind(*tags),
                                                   ", not a dict"));
  }

  std::string arch = StringTag(*tags, "arch");
  if (!arch.empty()) {
    if (std::string why = ArchProblem(arch); !why.empty()) {
      return absl::InvalidArgumentError(util::StrCat(where, ": ", function, "[", key,
                                                     "]: tags['arch'] '", Printable(arch),
                                                     "' is not an arch name: ", why));
    }
  }
  record.set_arch(arch);
  record.set_parallelism(StringTag(*tags, "parallelism"));
  record.set_run_mode(StringTag(*tags, "run_mode"));
  record.set_run_phase(StringTag(*tags, "run_phase"));
  record.set_model_name(StringTag(*tags, "model_name"));
  record.set_bringup_status(EnumTag(*tags, "bringup_status", "BringupStatus"));
  record.set_model_test_status(EnumTag(*tags, "model_test_status", "ModelTestStatus"));
  if (std::optional<double> pcc = NumberTag(*tags, "pcc")) record.set_pcc(*pcc);
  if (std::optional<double> threshold = NumberTag(*tags, "pcc_threshold")) {
    record.set_pcc_threshold(*threshold);
  }
  if (const Value* enabled = tags->Find("pcc_assertion_enabled");
      enabled != nullptr && enabled->kind == Value::Kind::kBool) {
    record.set_pcc_assertion_enabled(enabled->boolean);
  }
  if (const Value* guidance = tags->Find("guidance"); guidance != nullptr && guidance->is_list()) {
    for (const Value& item : guidance->list) {
      if (item.is_string()) record.add_guidance(ValidUtf8(item.string));
    }
  }
  if (const Value* reason = tags->Find("failing_reason"); reason != nullptr && reason->is_map()) {
    record.set_failing_reason(StringTag(*reason, "name"));
  }
  return record;
}

absl::Status CheckKey(std::string_view key) {
  const std::string problem = KeyProblem(key);
  if (problem.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      util::StrCat("key '", KeyForMessage(key), "' is not a test-config key: ", problem));
}

absl::Status CheckPcc(const v1::NightlyRecord& record) {
  // NaN is the runner's own value for a comparison that failed: kept.
  if (record.has_pcc() && !std::isnan(record.pcc()) && !(record.pcc() >= -1 && record.pcc() <= 1)) {
    return absl::InvalidArgumentError(
        util::StrCat("pcc ", record.pcc(), " is not a correlation in [-1, 1]"));
  }
  if (record.has_pcc_threshold() && !(record.pcc_threshold() >= 0 && record.pcc_threshold() <= 1)) {
    return absl::InvalidArgumentError(
        util::StrCat("pcc_threshold ", record.pcc_threshold(), " is not a threshold in [0, 1]"));
  }
  return absl::OkStatus();
}

}  // namespace triage::nightly
