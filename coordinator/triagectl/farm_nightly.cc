#include "coordinator/triagectl/farm_nightly.h"

#include <chrono>

#include "common/nightly/intake.h"
#include "common/util/file.h"
#include "common/util/strings.h"
#include "coordinator/triagectl/farm_common.h"
#include "coordinator/triagectl/inventory_cmd.h"
#include "yaml-cpp/yaml.h"

namespace triage::ctl::farm {

std::optional<int> AddNightly(const FarmOptions& o, v1::StartSweepRequest& req, std::ostream& err) {
  const bool asked_options = o.confirm > 0 || o.no_confirm || o.max_device_hours > 0 ||
                             o.pcc_margin > 0 || o.pcc_step > 0 || o.pcc_far_below > 0 ||
                             o.regression_runs > 0 || o.promote_runs > 0;
  if (o.recheck_skipped && !o.nightly.empty()) {
    err << "triagectl: --recheck-skipped and --nightly are two kinds of sweep: start them "
           "separately\n";
    return kExitUsage;
  }
  const char* flag = o.recheck_skipped ? "--recheck-skipped" : "--nightly";
  if (o.nightly.empty() && !o.recheck_skipped) {
    if (asked_options) {
      err << "triagectl: --confirm, --no-confirm, --max-device-hours and the PCC and run "
             "options are for nightly sweeps: give --nightly DIR (or --recheck-skipped)\n";
      return kExitUsage;
    }
    return std::nullopt;
  }
  if (!o.playbooks.empty()) {
    err << "triagectl: a " << (o.recheck_skipped ? "recheck" : "nightly")
        << " sweep's entries are the rules' candidates: --playbooks does not apply to " << flag
        << "\n";
    return kExitUsage;
  }
  if (o.incremental) {
    err << "triagectl: --incremental does not apply to " << flag
        << " (every candidate is confirmed at the sweep's commits)\n";
    return kExitUsage;
  }
  if (o.recheck_skipped && o.no_confirm) {
    err << "triagectl: --no-confirm does not apply to --recheck-skipped: no run has shown "
           "anything yet\n";
    return kExitUsage;
  }
  req.set_recheck_skipped(o.recheck_skipped);
  if (o.no_confirm && (o.confirm > 0 || o.max_device_hours > 0)) {
    err << "triagectl: --no-confirm runs nothing on the fleet: --confirm and --max-device-hours "
           "do not apply\n";
    return kExitUsage;
  }
  for (const auto& path : o.nightly) {
    const auto start = std::chrono::steady_clock::now();
    nightly::IntakeOptions options;
    options.progress = [&](int files, std::int64_t testcases) {
      if (files % 50 == 0) {
        err << "triagectl: " << path << ": " << files << " files, " << testcases
            << " testcases read\n";
      }
    };
    auto run = nightly::ReadNightlyRun(path, options);
    if (!run.ok()) {
      // Unreadable input: nothing was sent.
      err << "triagectl: " << util::MessageOf(run.status()) << "\n";
      return kExitUsage;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    err << "triagectl: nightly " << run->label() << ": " << run->files_size() << " files, "
        << run->testcases() << " testcases, " << run->records_size() << " model test records"
        << (run->problems_size() > 0 ? util::StrCat(", ", run->problems_size(), " left out") : "")
        << " (" << util::StrCat(static_cast<int>(seconds * 10) / 10.0) << " s)\n";
    *req.add_nightly() = std::move(*run);
  }
  v1::NightlyOptions& n = *req.mutable_nightly_options();
  n.set_confirm(o.confirm);
  n.set_no_confirm(o.no_confirm);
  n.set_max_device_hours(o.max_device_hours);
  n.set_pcc_margin(o.pcc_margin);
  n.set_pcc_step(o.pcc_step);
  n.set_pcc_far_below(o.pcc_far_below);
  n.set_regression_runs(o.regression_runs);
  n.set_promote_runs(o.promote_runs);
  return std::nullopt;
}

std::optional<int> ReadIssueLinks(const std::string& path,
                                  std::map<std::string, std::string>& links, std::ostream& err) {
  auto text = util::ReadFile(path, 8 << 20);
  if (!text.ok()) return Error(err, text.status());
  YAML::Node root;
  try {
    root = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    err << "triagectl: " << path << ":" << e.mark.line + 1 << ": not YAML or JSON: " << e.msg
        << "\n";
    return kExitUsage;
  }
  if (root.IsNull()) return std::nullopt;
  if (!root.IsMap()) {
    err << "triagectl: " << path
        << ": must be a mapping of failure cluster ids (c-xxxxxxxx) or entry keys to URLs\n";
    return kExitUsage;
  }
  for (const auto& item : root) {
    const auto line = item.first.Mark().line + 1;
    if (!item.first.IsScalar() || !item.second.IsScalar()) {
      err << "triagectl: " << path << ":" << line << ": each link is `id-or-key: url`\n";
      return kExitUsage;
    }
    const std::string key = item.first.as<std::string>();
    const std::string url = item.second.as<std::string>();
    if (!url.starts_with("https://") && !url.starts_with("http://")) {
      err << "triagectl: " << path << ":" << line << ": " << key << ": '" << url
          << "' is not an http(s) URL\n";
      return kExitUsage;
    }
    if (url.find_first_of(" \t\r\n\"") != std::string::npos) {
      err << "triagectl: " << path << ":" << line << ": " << key
          << ": a URL has no spaces or quotes\n";
      return kExitUsage;
    }
    links[key] = url;
  }
  return std::nullopt;
}

}  // namespace triage::ctl::farm
