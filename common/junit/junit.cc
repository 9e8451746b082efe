#include "common/junit/junit.h"

#include <cstdlib>
#include <unordered_map>

#include <pugixml.hpp>

#include "absl/status/status.h"
#include "common/util/file.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::junit {
namespace {

// Text and CDATA children joined; pretty-printing whitespace between elements is already dropped
// by pugixml's default flags.
std::string TextOf(const pugi::xml_node& node) {
  std::string out;
  for (pugi::xml_node child : node.children()) {
    if (child.type() == pugi::node_pcdata || child.type() == pugi::node_cdata) {
      out.append(child.value());
    }
  }
  return out;
}

void ReadProperties(const pugi::xml_node& properties, TestCase& tc) {
  for (pugi::xml_node p : properties.children("property")) {
    pugi::xml_attribute value = p.attribute("value");
    // Some writers put long values in the element text instead of the attribute.
    tc.properties.emplace_back(p.attribute("name").value(),
                               value ? std::string(value.value()) : TextOf(p));
  }
}

TestCase ReadTestCase(const pugi::xml_node& node) {
  TestCase tc;
  tc.name = node.attribute("name").value();
  tc.classname = node.attribute("classname").value();
  tc.file = node.attribute("file").value();
  tc.key = KeyOfTestName(tc.name);
  if (const char* time = node.attribute("time").value(); *time != '\0') {
    tc.time_seconds = std::strtod(time, nullptr);
  }

  pugi::xml_node failure, error, skipped;
  for (pugi::xml_node child : node.children()) {
    if (child.type() != pugi::node_element) continue;
    std::string_view name = child.name();
    if (name == "properties") {
      ReadProperties(child, tc);
    } else if (name == "failure") {
      if (!failure) failure = child;
    } else if (name == "error") {
      if (!error) error = child;
    } else if (name == "skipped") {
      if (!skipped) skipped = child;
    } else if (name == "system-out") {
      tc.system_out += TextOf(child);
    } else if (name == "system-err") {
      tc.system_err += TextOf(child);
    }
  }

  // A failed call with an erroring teardown carries both; the call's failure is the test's result.
  // A <failure> next to <skipped> is likewise the real outcome.
  pugi::xml_node decisive;
  if (failure) {
    tc.outcome = Outcome::kFailed;
    decisive = failure;
  } else if (error) {
    tc.outcome = Outcome::kError;
    decisive = error;
  } else if (skipped) {
    tc.outcome = Outcome::kSkipped;
    decisive = skipped;
  }
  if (decisive) {
    tc.result_type = decisive.attribute("type").value();
    tc.message = decisive.attribute("message").value();
    tc.text = TextOf(decisive);
  }
  return tc;
}

void CollectCases(const pugi::xml_node& suite, std::vector<TestCase>& out) {
  for (pugi::xml_node child : suite.children()) {
    if (child.type() != pugi::node_element) continue;
    std::string_view name = child.name();
    if (name == "testcase") {
      out.push_back(ReadTestCase(child));
    } else if (name == "testsuite") {
      CollectCases(child, out);
    }
  }
}

}  // namespace

std::string_view OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kPassed:
      return "passed";
    case Outcome::kFailed:
      return "failed";
    case Outcome::kError:
      return "error";
    case Outcome::kSkipped:
      return "skipped";
    case Outcome::kMissing:
      return "missing";
  }
  return "unknown";
}

const std::string* TestCase::Property(std::string_view property_name) const {
  for (const auto& [k, v] : properties) {
    if (k == property_name) return &v;
  }
  return nullptr;
}

bool TestCase::IsXfail() const {
  return outcome == Outcome::kSkipped && result_type == "pytest.xfail";
}

std::string KeyOfTestName(std::string_view name) {
  std::size_t open = name.find('[');
  std::size_t close = name.rfind(']');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return std::string(name);
  }
  return std::string(name.substr(open + 1, close - open - 1));
}

absl::StatusOr<Report> ParseJUnit(std::string_view xml, std::string source_name) {
  std::string_view trimmed = util::TrimWhitespace(xml);
  if (trimmed.empty()) {
    return absl::InvalidArgumentError(util::StrCat(
        source_name, ": empty JUnit XML (pytest wrote no report; the log is the only evidence)"));
  }
  pugi::xml_document doc;
  // Without parse_wconv_attribute a literal newline in a message attribute stays a newline, so
  // "first line of the message" means the same for every writer.
  const unsigned flags = pugi::parse_default & ~pugi::parse_wconv_attribute;
  pugi::xml_parse_result result =
      doc.load_buffer(xml.data(), xml.size(), flags, pugi::encoding_utf8);
  if (!result) {
    std::size_t offset = static_cast<std::size_t>(result.offset);
    util::LineCol lc = util::LineColAt(xml, offset);
    std::size_t content_end =
        static_cast<std::size_t>(trimmed.data() - xml.data()) + trimmed.size();
    // pytest writes the file in one go at session end; an error at the very end means the writer
    // was killed (or the copy cut short), which deserves a clearer word than "tags mismatch".
    bool at_end = offset + 1 >= content_end;
    return absl::InvalidArgumentError(util::StrCat(
        source_name, ":", lc.line, ":", lc.col, ": malformed JUnit XML: ", result.description(),
        at_end ? " (the file ends before the XML is complete: truncated?)" : ""));
  }
  pugi::xml_node root = doc.document_element();
  std::string_view root_name = root.name();
  if (root_name != "testsuites" && root_name != "testsuite") {
    return absl::InvalidArgumentError(
        util::StrCat(source_name, ": not a JUnit report: the root element is <", root_name,
                     ">, expected <testsuites> or <testsuite>"));
  }
  Report report;
  report.source = std::move(source_name);
  if (root_name == "testsuite") {
    CollectCases(root, report.cases);
  } else {
    for (pugi::xml_node suite : root.children("testsuite")) CollectCases(suite, report.cases);
  }
  return report;
}

absl::StatusOr<Report> ParseJUnitFile(const std::filesystem::path& path, std::size_t max_bytes) {
  absl::StatusOr<std::string> text = util::ReadFile(path, max_bytes);
  if (!text.ok()) return text.status();
  return ParseJUnit(*text, path.string());
}

absl::StatusOr<std::vector<TestCase>> ForKeys(const Report& report,
                                              const std::vector<std::string>& keys) {
  std::unordered_map<std::string_view, const TestCase*> by_key;
  for (const TestCase& tc : report.cases) {
    auto [it, inserted] = by_key.emplace(tc.key, &tc);
    if (!inserted) {
      return absl::InvalidArgumentError(util::StrCat(
          report.source, ": two testcases for key '", tc.key, "' ('", it->second->name, "' and '",
          tc.name, "'); a report must hold one testcase per key, so this file is rejected"));
    }
  }
  std::vector<TestCase> out;
  out.reserve(keys.size());
  for (const std::string& key : keys) {
    auto it = by_key.find(key);
    if (it != by_key.end()) {
      out.push_back(*it->second);
    } else {
      TestCase missing;
      missing.key = key;
      missing.outcome = Outcome::kMissing;
      out.push_back(std::move(missing));
    }
  }
  return out;
}

}  // namespace triage::junit
