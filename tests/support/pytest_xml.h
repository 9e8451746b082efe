#pragma once

// JUnit XML as `pytest --junitxml` (family xunit1) writes it for tt-xla's runner, for the nightly
// intake's tests: a <testsuites><testsuite name="pytest" ... timestamp=...> with one <testcase>
// per test, properties first (error_message when there is a reason, tags, owner, group), then the
// outcome element, then <system-out>/<system-err>.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/util/strings.h"

namespace triage::nightly::testing {

// Attribute text as ElementTree escapes it (pytest's writer): & < > " and newlines.
inline std::string XmlAttr(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\n':
        out += "&#10;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

// Element text: & < >.
inline std::string XmlText(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '&') {
      out += "&amp;";
    } else if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// What record_model_test_properties puts into `tags` (str() of the dict, so repr of its items).
struct Tags {
  std::string test_name = "test_all_models_torch";
  std::string specific_test_case;
  std::string model_name = "pt_resnet_50_img_cls_hf";
  std::string run_mode = "inference";
  std::string run_phase = "default";
  std::string bringup_status = "PASSED";
  std::string model_test_status = "ModelTestStatus.EXPECTED_PASSING";
  std::string failing_reason = "None";  // a Python literal: None or 'NAME'
  std::string parallelism = "single_device";
  std::string arch = "'n150'";  // a Python literal: 'n150' or None
  // The comparison's figures as Python literals; empty: the comparison did not run (no keys).
  std::string pcc = "0.9934";
  std::string pcc_threshold = "0.99";
  std::string pcc_assertion_enabled = "True";
  std::vector<std::string> guidance;
  bool reduced = false;  // the crash report's reduced tags (conftest): no comparison keys

  std::string Literal() const {
    std::string g = "[";
    for (std::size_t i = 0; i < guidance.size(); ++i) {
      util::StrAppend(&g, i > 0 ? ", " : "", "'", guidance[i], "'");
    }
    g += "]";
    std::string out = util::StrCat(
        "{'test_name': '", test_name, "', 'specific_test_case': '", specific_test_case,
        "', 'category': 'Category.MODEL_TEST', 'model_name': '", model_name,
        "', 'model_info': {'model': 'resnet', 'variant': '50', 'group': 'red', 'task': "
        "'cv_image_cls', 'source': 'huggingface', 'framework': 'pytorch'}, 'run_mode': '",
        run_mode, "', 'run_phase': '", run_phase, "', ");
    if (reduced) {
      util::StrAppend(&out, "'parallelism': '", parallelism, "', 'bringup_status': '",
                      bringup_status, "', 'model_test_status': '", model_test_status,
                      "', 'arch': ", arch,
                      ", 'seq_len': None, 'batch_size': None, 'weights_dtype': 'bfloat16', "
                      "'failing_reason': {'name': None, 'description': None, 'component': None, "
                      "'summary': None}, 'guidance': []}");
      return out;
    }
    util::StrAppend(&out, "'bringup_status': '", bringup_status, "', 'model_test_status': '",
                    model_test_status, "', 'failing_reason': {'name': ", failing_reason,
                    ", 'description': None, 'component': None, 'summary': None}, "
                    "'parallelism': '",
                    parallelism, "', 'arch': ", arch,
                    ", 'seq_len': None, 'batch_size': None, 'weights_dtype': 'bfloat16'");
    if (!pcc.empty()) {
      util::StrAppend(&out, ", 'pcc': ", pcc,
                      ", 'atol': 0.0312, 'comparison_passed': True, 'comparison_error_message': "
                      "None, 'pcc_threshold': ",
                      pcc_threshold,
                      ", 'atol_threshold': 0.05, 'pcc_assertion_enabled': ", pcc_assertion_enabled,
                      ", 'atol_assertion_enabled': False");
    }
    util::StrAppend(&out, ", 'guidance': ", g, "}");
    return out;
  }
};

struct Case {
  std::string name;  // test_all_models_torch[<key>]
  std::string time = "41.253";
  std::optional<std::string> error_message;
  std::optional<std::string> tags;  // the literal
  std::string outcome;              // the outcome element, already XML ("" = passed)
  std::string system_out;           // text
  std::string system_err;

  std::string Xml() const {
    std::string out =
        util::StrCat("    <testcase classname=\"tests.runner.test_models\" name=\"", XmlAttr(name),
                     "\" file=\"tests/runner/test_models.py\" line=\"343\" time=\"", time, "\">\n");
    out += "      <properties>\n";
    if (error_message) {
      util::StrAppend(&out, "        <property name=\"error_message\" value=\"",
                      XmlAttr(*error_message), "\" />\n");
    }
    if (tags) {
      util::StrAppend(&out, "        <property name=\"tags\" value=\"", XmlAttr(*tags), "\" />\n");
    }
    out += "        <property name=\"owner\" value=\"tt-xla\" />\n";
    out += "        <property name=\"group\" value=\"red\" />\n";
    out += "      </properties>\n";
    if (!outcome.empty()) util::StrAppend(&out, "      ", outcome, "\n");
    if (!system_out.empty()) {
      util::StrAppend(&out, "      <system-out>", XmlText(system_out), "</system-out>\n");
    }
    if (!system_err.empty()) {
      util::StrAppend(&out, "      <system-err>", XmlText(system_err), "</system-err>\n");
    }
    out += "    </testcase>\n";
    return out;
  }
};

// <failure message=...>text</failure> (likewise error, skipped).
inline std::string OutcomeXml(std::string_view element, std::string_view type,
                              std::string_view message, std::string_view text) {
  std::string out = util::StrCat("<", element);
  if (!type.empty()) util::StrAppend(&out, " type=\"", XmlAttr(type), "\"");
  util::StrAppend(&out, " message=\"", XmlAttr(message), "\"");
  if (text.empty()) return out + " />";
  return util::StrCat(out, ">", XmlText(text), "</", element, ">");
}

inline std::string Report(const std::vector<Case>& cases,
                          std::string_view timestamp = "2026-11-27T02:13:44.123456+00:00") {
  std::string body;
  for (const Case& c : cases) body += c.Xml();
  return util::StrCat(
      "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<testsuites>\n",
      "  <testsuite name=\"pytest\" errors=\"0\" failures=\"0\" skipped=\"0\" tests=\"",
      cases.size(), "\" time=\"3012.5\" timestamp=\"", timestamp, "\" hostname=\"n150-ci-07\">\n",
      body, "  </testsuite>\n</testsuites>\n");
}

}  // namespace triage::nightly::testing
