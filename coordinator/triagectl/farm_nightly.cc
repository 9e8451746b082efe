#include "coordinator/triagectl/farm_nightly.h"

#include <chrono>
#include <set>

#include "common/nightly/intake.h"
#include "common/nightly/policy.h"
#include "common/util/file.h"
#include "common/util/strings.h"
#include "coordinator/planning/nightly_chunks.h"
#include "coordinator/triagectl/farm_common.h"
#include "coordinator/triagectl/inventory_cmd.h"
#include "yaml-cpp/yaml.h"

namespace triage::ctl::farm {

std::optional<int> AddNightlyOptions(const FarmOptions& o, v1::StartSweepRequest& req,
                                     std::ostream& err) {
  const bool asked_options = o.confirm > 0 || o.no_confirm || o.max_device_hours > 0 ||
                             o.pcc_margin > 0 || o.pcc_step > 0 || o.pcc_far_below > 0 ||
                             o.regression_runs > 0 || o.promote_runs > 0 || !o.policy.empty() ||
                             o.no_learn;
  if (o.recheck_skipped && !o.nightly.empty()) {
    err << "triagectl: --recheck-skipped and --nightly are two kinds of sweep: start them "
           "separately\n";
    return kExitUsage;
  }
  const char* flag = o.recheck_skipped ? "--recheck-skipped" : "--nightly";
  if (o.select.failing && !o.nightly.empty()) {
    // --failing --nightly: the runs select the entries; no nightly sweep (SelectFailedInNight).
    if (asked_options || o.recheck_skipped) {
      err << "triagectl: with --failing, --nightly only selects the entries whose test failed in "
             "the runs: the nightly sweep's options and --recheck-skipped do not apply\n";
      return kExitUsage;
    }
    return SelectFailedInNight(o, req, err);
  }
  if (o.nightly.empty() && !o.recheck_skipped) {
    if (asked_options) {
      err << "triagectl: --confirm, --no-confirm, --max-device-hours, the PCC and run options, "
             "--policy and --no-learn are for nightly sweeps: give --nightly DIR (or "
             "--recheck-skipped)\n";
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
  v1::NightlyOptions& n = *req.mutable_nightly_options();
  n.set_confirm(o.confirm);
  n.set_no_confirm(o.no_confirm);
  n.set_max_device_hours(o.max_device_hours);
  n.set_pcc_margin(o.pcc_margin);
  n.set_pcc_step(o.pcc_step);
  n.set_pcc_far_below(o.pcc_far_below);
  n.set_regression_runs(o.regression_runs);
  n.set_promote_runs(o.promote_runs);
  n.set_no_learn(o.no_learn);
  if (!o.policy.empty()) {
    // Read and checked here, so that an error names the file and line on this machine.
    auto text = util::ReadFile(o.policy);
    if (!text.ok()) {
      err << "triagectl: --policy " << util::MessageOf(text.status()) << "\n";
      return kExitUsage;
    }
    if (auto policy = nightly::ReadPolicy(*text, o.policy); !policy.ok()) {
      err << "triagectl: --policy " << util::MessageOf(policy.status()) << "\n";
      return kExitUsage;
    }
    n.set_policy_text(std::move(*text));
    n.set_policy_file(o.policy);
  }
  return std::nullopt;
}

std::optional<int> UploadNightlyRuns(Client& client, const FarmOptions& o,
                                     v1::StartSweepRequest& req, std::ostream& err) {
  grpc::ClientContext ctx;
  rpc::AddBearer(ctx, client.token());
  // Reading the runs is part of the stream's life: an hour covers the largest ones.
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::hours(1));
  v1::NightlyUpload upload;
  auto writer = client.stub()->UploadNightly(&ctx, &upload);
  // The coordinator refused (or went away): its reason is the stream's status.
  auto refused = [&]() -> int {
    grpc::Status st = writer->Finish();
    if (st.error_code() == grpc::StatusCode::UNIMPLEMENTED && st.error_message().empty()) {
      err << "triagectl: the coordinator at " << o.conn.coordinator
          << " takes no nightly uploads (UploadNightly): it is older than this triagectl; "
             "upgrade it\n";
      return kExitUsage;
    }
    return Error(
        err, st.ok() ? absl::UnknownError("the upload stream ended early") : client.Describe(st));
  };
  int runs = 0;
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
      // Unreadable input: the coordinator drops what was sent.
      ctx.TryCancel();
      (void)writer->Finish();
      err << "triagectl: " << util::MessageOf(run.status()) << "\n";
      return kExitUsage;
    }
    const std::string label = run->label();
    const int files = run->files_size();
    const std::int64_t testcases = run->testcases();
    const int records = run->records_size();
    const int problems = run->problems_size();
    std::size_t bytes = 0;
    const bool sent = coord::ChunkNightlyRun(std::move(*run), coord::kNightlyChunkBytes,
                                             [&](v1::NightlyChunk& chunk) {
                                               bytes += chunk.ByteSizeLong();
                                               return writer->Write(chunk);
                                             });
    if (!sent) return refused();
    ++runs;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    err << "triagectl: nightly " << label << ": " << files << " files, " << testcases
        << " testcases, " << records << " model test records"
        << (problems > 0 ? util::StrCat(", ", problems, " left out") : "") << ", "
        << util::StrCat(static_cast<double>(bytes * 10 / (1 << 20)) / 10.0) << " MiB sent ("
        << util::StrCat(static_cast<int>(seconds * 10) / 10.0) << " s)\n";
  }
  v1::NightlyChunk last;
  last.set_last(true);
  last.set_runs(runs);
  if (!writer->Write(last)) return refused();
  writer->WritesDone();
  grpc::Status st = writer->Finish();
  if (!st.ok()) return Error(err, client.Describe(st));
  req.set_nightly_upload(upload.upload_id());
  return std::nullopt;
}

std::optional<int> SelectFailedInNight(const FarmOptions& o, v1::StartSweepRequest& req,
                                       std::ostream& err) {
  const std::set<std::string> archs = o.archs.empty()
                                          ? std::set<std::string>{"n150"}
                                          : std::set<std::string>(o.archs.begin(), o.archs.end());
  std::set<std::string> failed;
  for (const auto& path : o.nightly) {
    auto run = nightly::ReadNightlyRun(path, {});
    if (!run.ok()) {
      err << "triagectl: --nightly: " << util::MessageOf(run.status()) << "\n";
      return kExitUsage;
    }
    int here = 0;
    for (const auto& r : run->records()) {
      const bool failing = r.outcome() == v1::NightlyRecord::FAILED ||
                           r.outcome() == v1::NightlyRecord::ERROR ||
                           r.outcome() == v1::NightlyRecord::XFAILED;
      if (!failing || (!r.arch().empty() && !archs.count(r.arch()))) continue;
      here += failed.insert(r.key()).second;
    }
    err << "triagectl: nightly " << run->label() << ": " << run->records_size()
        << " model test records, " << here << " more failed on " << util::StrJoin(archs, ", ")
        << "\n";
  }
  v1::Selection& sel = *req.mutable_selection();
  if (sel.keys_size() > 0) {
    std::set<std::string> asked(sel.keys().begin(), sel.keys().end());
    std::erase_if(failed, [&](const std::string& k) { return !asked.count(k); });
  }
  if (failed.empty()) {
    err << "triagectl: --nightly: no model test failed in " << util::StrJoin(o.nightly, ", ")
        << (sel.keys_size() > 0 ? " among the --keys" : "") << " on " << util::StrJoin(archs, ", ")
        << ": nothing to select\n";
    return kExitUsage;
  }
  sel.clear_keys();
  for (const auto& k : failed) sel.add_keys(k);
  err << "triagectl: --nightly: the sweep takes the failing entries among " << failed.size()
      << " tests that failed\n";
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
