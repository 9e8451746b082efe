#include "coordinator/planning/start_request.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>

#include "agent/playbooks/catalog.h"
#include "common/command/command_params.h"
#include "common/command/shared_scope.h"
#include "common/inventory/schema.h"
#include "common/nightly/policy_options.h"
#include "common/nightly/record.h"
#include "common/util/strings.h"
#include "google/protobuf/field_mask.pb.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/field_mask_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "nlohmann/json.hpp"

namespace triage::coord {

absl::StatusOr<std::map<std::string, double>> ParseDurations(const std::string& json) {
  std::map<std::string, double> out;
  if (json.empty()) return out;
  try {
    auto j = nlohmann::json::parse(json);
    if (!j.is_object()) {
      return absl::InvalidArgumentError("durations: expected a JSON object of node id -> seconds");
    }
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.value().is_number()) out[it.key()] = it.value().get<double>();
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(util::StrCat("durations: invalid JSON: ", e.what()));
  }
  return out;
}

absl::Status ValidateRequestId(std::string_view id) {
  constexpr std::size_t kMaxLength = 200;
  if (id.size() > kMaxLength) {
    return absl::InvalidArgumentError(
        util::StrCat("request_id is longer than ", kMaxLength, " characters (", id.size(), ")"));
  }
  for (std::size_t i = 0; i < id.size(); ++i) {
    const auto u = static_cast<unsigned char>(id[i]);
    if (u <= 0x20 || u >= 0x7f) {
      return absl::InvalidArgumentError(
          util::StrCat("request_id: character ", i + 1, " (0x", util::Hex(u, 2),
                       ") is not allowed: printable ASCII without spaces only"));
    }
  }
  return absl::OkStatus();
}

std::string NightlyDigest(const google::protobuf::RepeatedPtrField<v1::NightlyRun>& runs) {
  // SHA-256 over "<size>:<run serialized deterministically>" per run, fed run by run.
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  for (const auto& run : runs) {
    std::string one;
    {
      google::protobuf::io::StringOutputStream stream(&one);
      google::protobuf::io::CodedOutputStream coded(&stream);
      coded.SetSerializationDeterministic(true);
      run.SerializeToCodedStream(&coded);
      coded.Trim();
    }
    const std::string size = util::StrCat(one.size(), ":");
    EVP_DigestUpdate(ctx.get(), size.data(), size.size());
    EVP_DigestUpdate(ctx.get(), one.data(), one.size());
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &length);
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += util::Hex(digest[i], 2);
  return hex;
}

v1::StartSweepRequest WithoutNightlyRuns(const v1::StartSweepRequest& req) {
  if (req.nightly().empty()) return req;
  // Every field but the runs, copied without copying the runs (they may be a few hundred MB).
  google::protobuf::FieldMask mask;
  const auto* descriptor = v1::StartSweepRequest::descriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const auto* field = descriptor->field(i);
    if (field->number() != v1::StartSweepRequest::kNightlyFieldNumber) {
      mask.add_paths(field->name());
    }
  }
  v1::StartSweepRequest kept;
  google::protobuf::util::FieldMaskUtil::MergeMessageTo(
      req, mask, google::protobuf::util::FieldMaskUtil::MergeOptions(), &kept);
  kept.set_nightly_digest(NightlyDigest(req.nightly()));
  return kept;
}

absl::Status CheckNightlyRecord(const v1::NightlyRecord& r, std::string_view where) {
  if (!nightly::IsModelTestFunction(r.test_function())) {
    return absl::InvalidArgumentError(util::StrCat(
        where, ": ", r.source(), ": '", r.test_function(), "' is not a model test function"));
  }
  if (auto st = nightly::CheckKey(r.key()); !st.ok()) {
    return absl::InvalidArgumentError(
        util::StrCat(where, ": ", r.source(), ": ", util::MessageOf(st)));
  }
  if (!inventory::IsKnownArch(r.arch())) {
    return absl::InvalidArgumentError(
        util::StrCat(where, ": ", r.source(), ": ", r.key(), ": unknown arch '", r.arch(), "'"));
  }
  if (auto st = nightly::CheckPcc(r); !st.ok()) {
    return absl::InvalidArgumentError(util::StrCat(where, ": ", r.source(), ": ", r.test_function(),
                                                   "[", r.key(), "] on ", r.arch(), ": ",
                                                   util::MessageOf(st)));
  }
  return absl::OkStatus();
}

std::string NightlyRunName(int index, const v1::NightlyRun& run) {
  return util::StrCat("nightly run ", index + 1, " (",
                      run.label().empty() ? "unnamed" : run.label(), ")");
}

absl::Status ValidateNightly(const v1::StartSweepRequest& req, bool runs_to_come) {
  const v1::NightlyOptions& o = req.nightly_options();
  if (!req.nightly().empty() && !req.nightly_upload().empty()) {
    return absl::InvalidArgumentError(
        "give the nightly runs (nightly) or an upload of them (nightly_upload), not both");
  }
  const bool nightly = !req.nightly().empty() || !req.nightly_upload().empty() || runs_to_come;
  if (req.recheck_skipped() && nightly) {
    return absl::InvalidArgumentError(
        "recheck_skipped and nightly are two kinds of sweep: start them separately");
  }
  const char* kind = req.recheck_skipped() ? "a recheck sweep" : "a nightly sweep";
  if (!nightly && !req.recheck_skipped()) {
    if (o.ByteSizeLong() > 0) {
      return absl::InvalidArgumentError(
          "nightly_options are for a nightly sweep: give its runs (nightly)");
    }
    return absl::OkStatus();
  }
  if (!req.playbooks().empty()) {
    return absl::InvalidArgumentError(
        util::StrCat(kind, "'s entries are the rules' candidates: playbooks do not apply"));
  }
  if (req.incremental()) {
    return absl::InvalidArgumentError(util::StrCat("incremental does not apply to ", kind));
  }
  auto range = [](std::string_view name, double v, double lo, double hi) -> absl::Status {
    if (v < lo || v > hi || std::isnan(v)) {
      return absl::InvalidArgumentError(util::StrCat("nightly_options.", name, " must be between ",
                                                     lo, " and ", hi, " (0: the default), got ",
                                                     v));
    }
    return absl::OkStatus();
  };
  for (absl::Status st :
       {range("confirm", o.confirm(), 0, 20),
        range("max_device_hours", o.max_device_hours(), 0, 1e5),
        range("pcc_margin", o.pcc_margin(), 0, 0.5), range("pcc_step", o.pcc_step(), 0, 0.5),
        range("pcc_far_below", o.pcc_far_below(), 0, 1),
        range("regression_runs", o.regression_runs(), 0, 100),
        range("promote_runs", o.promote_runs(), 0, 100)}) {
    if (!st.ok()) return st;
  }
  if (o.no_confirm() && (o.confirm() > 0 || o.max_device_hours() > 0)) {
    return absl::InvalidArgumentError(
        "nightly_options: no_confirm runs nothing: confirm and max_device_hours do not apply");
  }
  if (auto st = nightly::CheckAskedPolicy(o); !st.ok()) return st;
  std::size_t records = 0;
  for (int i = 0; i < req.nightly_size(); ++i) {
    const v1::NightlyRun& run = req.nightly(i);
    const std::string where = NightlyRunName(i, run);
    for (const auto& r : run.records()) {
      if (++records > kMaxNightlyRecords) {
        return absl::InvalidArgumentError(
            util::StrCat(where, ": more than ", kMaxNightlyRecords,
                         " records in all: give fewer runs at a time"));
      }
      if (auto st = CheckNightlyRecord(r, where); !st.ok()) return st;
    }
    if (run.duplicate_testcases() < 0 || run.testcases() < 0 || run.not_model_tests() < 0) {
      return absl::InvalidArgumentError(
          util::StrCat(where, ": a negative count of testcases, duplicates or other tests"));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> StartOptionsDiffer(const v1::StartSweepRequest& first,
                                            const v1::StartSweepRequest& again) {
  // Not options of the sweep: why it was asked (audit), the key itself, and the durations (the
  // first sweep keeps none, and they only order the work).
  // An upload's id names how the runs came, not what they are: the digest compares them.
  static const std::set<std::string> kIgnored = {"reason", "request_id", "durations_json",
                                                 "nightly_upload"};
  // What the coordinator resolved when the first one started (the policy) is not asked.
  auto asked = [](v1::StartSweepRequest r) {
    r.mutable_nightly_options()->clear_policy_yaml();
    r.mutable_nightly_options()->clear_policy_sources();
    r.mutable_nightly_options()->clear_policy_learned_from();
    if (r.nightly_options().ByteSizeLong() == 0) r.clear_nightly_options();
    return r;
  };
  const v1::StartSweepRequest first_asked = asked(first), again_asked = asked(again);
  const auto* descriptor = v1::StartSweepRequest::descriptor();
  std::vector<std::string> differ;
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const auto* field = descriptor->field(i);
    if (kIgnored.count(field->name())) continue;
    // Each side with only this field kept.
    auto only = [&](const v1::StartSweepRequest& r) {
      v1::StartSweepRequest kept = r;
      const auto* reflection = kept.GetReflection();
      for (int j = 0; j < descriptor->field_count(); ++j) {
        if (j != i) reflection->ClearField(&kept, descriptor->field(j));
      }
      return kept;
    };
    if (!google::protobuf::util::MessageDifferencer::Equals(only(first_asked), only(again_asked))) {
      differ.push_back(field->name());
    }
  }
  return differ;
}

// A selection compiled into out.selector, and what it does not combine with.
static absl::Status CheckSelection(const v1::StartSweepRequest& req, StartRequest& out) {
  const v1::Selection& sel = req.selection();
  if (sel.ByteSizeLong() == 0) return absl::OkStatus();
  auto selector = Selector::Compile(sel);
  if (!selector.ok()) return selector.status();
  if (!req.nightly().empty() || !req.nightly_upload().empty() || req.recheck_skipped()) {
    return absl::InvalidArgumentError(
        util::StrCat("selection: ", req.recheck_skipped() ? "a recheck sweep" : "a nightly sweep",
                     " takes its entries from its own rules; a selection does not apply"));
  }
  if (req.incremental()) {
    return absl::InvalidArgumentError(
        "selection: an incremental sweep carries whole loaders; a selection does not combine "
        "with incremental");
  }
  if (sel.failing()) {
    if (out.executor != "command") {
      return absl::InvalidArgumentError(util::StrCat(
          "selection.failing: no playbook handles every failing entry; it needs the command "
          "executor (executor command), not ",
          out.executor));
    }
    if (!req.playbooks().empty() || !req.rules_yaml().empty()) {
      return absl::InvalidArgumentError(
          "selection.failing takes every failing entry, with or without a reason: playbooks and "
          "rules_yaml do not apply");
    }
  }
  out.selector = std::make_shared<const Selector>(std::move(*selector));
  return absl::OkStatus();
}

absl::StatusOr<StartRequest> ValidateStartRequest(const v1::StartSweepRequest& req,
                                                  const StartDefaults& defaults,
                                                  bool nightly_to_come) {
  if (req.repo_path().empty() == req.git_url().empty()) {
    return absl::InvalidArgumentError("give exactly one of repo_path or git_url");
  }
  StartRequest out;
  out.executor = req.executor().empty() ? defaults.executor : req.executor();
  if (out.executor != "native" && out.executor != "command" && out.executor != "replay") {
    return absl::InvalidArgumentError(
        util::StrCat("unknown executor '", out.executor, "' (native, command, replay)"));
  }
  for (const auto& arch : req.archs()) {
    if (!inventory::IsKnownArch(arch)) {
      return absl::InvalidArgumentError(util::StrCat("unknown arch '", arch, "'"));
    }
  }
  out.archs.assign(req.archs().begin(), req.archs().end());
  if (out.archs.empty())
    out.archs = req.recheck_skipped() ? defaults.recheck_archs : defaults.archs;
  // 0: the coordinator's max_attempts.
  if (req.max_attempts() < 0 || req.max_attempts() > 1000) {
    return absl::InvalidArgumentError(
        util::StrCat("max_attempts must be between 1 and 1000 (0: the coordinator's default), got ",
                     req.max_attempts()));
  }
  if (req.max_failed_shards() < 0 || req.max_failed_shards() > 100000) {
    return absl::InvalidArgumentError(
        util::StrCat("max_failed_shards must be between 0 (no budget) and 100000, got ",
                     req.max_failed_shards()));
  }
  if (auto st = ValidateRequestId(req.request_id()); !st.ok()) return st;
  if (auto st = ValidateNightly(req, nightly_to_come); !st.ok()) return st;
  if (!req.since().empty() && !req.incremental()) {
    return absl::InvalidArgumentError("since names the sweep to carry from: it needs incremental");
  }
  if (out.executor == "command") {
    // Refused now, not on every agent later.
    auto params = command::ParseParams({req.params().begin(), req.params().end()});
    if (!params.ok()) return params.status();
  }
  if (req.params().count(std::string(command::kWaveParam))) {
    return absl::InvalidArgumentError(
        "params.wave is the coordinator's own (a shared fix's wave shard): a sweep may not set it");
  }
  out.rules = &playbooks::DefaultClassifier();
  if (!req.rules_yaml().empty()) {
    auto c = classify::Classifier::FromYaml(req.rules_yaml(), "rules");
    if (!c.ok()) return c.status();
    out.custom_rules = std::make_shared<const classify::Classifier>(std::move(*c));
    out.rules = out.custom_rules.get();
  }
  const auto known = out.rules->Playbooks();
  for (const auto& pb : req.playbooks()) {
    if (std::find(known.begin(), known.end(), pb) == known.end()) {
      return absl::InvalidArgumentError(util::StrCat("unknown playbook '", pb, "'"));
    }
  }
  out.playbooks.assign(req.playbooks().begin(), req.playbooks().end());
  if (auto st = CheckSelection(req, out); !st.ok()) return st;
  auto durations = ParseDurations(req.durations_json());
  if (!durations.ok()) return durations.status();
  out.durations = std::move(*durations);
  return out;
}

}  // namespace triage::coord
