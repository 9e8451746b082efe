#include "agent/playbooks/dtype_bfloat16/dtype_bfloat16.h"

#include <algorithm>

#include "agent/playbooks/missing_inputs/missing_inputs.h"
#include "agent/playbooks/python_edit.h"
#include "agent/playbooks/shard_run.h"
#include "common/util/strings.h"

namespace triage::playbooks {

// ---------------------------------------------------------------------------------------------
// Decision tables

bool HasBf16Signature(const std::string& text) {
  for (std::string_view sig : {"must have the same dtype", "not implemented for 'BFloat16'",
                               "dtypes match", "expected scalar type"}) {
    if (text.find(sig) != std::string::npos) return true;
  }
  return false;
}

std::string_view DtypeRowName(DtypeRow row) {
  switch (row) {
    case DtypeRow::kProceed:
      return "proceed";
    case DtypeRow::kEscalate:
      return "escalate";
    case DtypeRow::kNotReproduced:
      return "not_reproduced";
    case DtypeRow::kOtherError:
      return "gate_misfired";
    case DtypeRow::kNeedsUnpack:
      return "needs_unpack";
  }
  return "?";
}

bool UnpackFailed(const ProbeDoc& d) {
  if (d.has_unpacked && !d.unpacked_ok) return true;
  return d.error && d.error->message.find("unpack_forward_output") != std::string::npos;
}

DtypeRow ClassifyDtype(const ProbeDoc& bf16, const ProbeDoc& f32) {
  // The forward pass ran in bfloat16: no dtype failure to fix, only unpack_forward_output's.
  if (UnpackFailed(bf16)) return DtypeRow::kNeedsUnpack;
  if (bf16.ok) return DtypeRow::kNotReproduced;
  // The probe runs this phase in bfloat16, so the dtype signature alone is the gate here (older
  // torch words some of these errors without "BFloat16").
  if (!bf16.error || !HasBf16Signature(bf16.error->message)) return DtypeRow::kOtherError;
  // A float32 phase that fails only in unpack_forward_output ran the forward pass: the dtype row
  // goes on, and the unpack_forward_output playbook follows it on the fixed loader. One that
  // fails for a missing training input (missing_inputs' signatures) fails on what another
  // playbook fixes, not on the dtype: the dtype row goes on too, and its re-probe decides
  // (the mismatch gone and that failure in its place: missing_inputs runs next).
  if (!f32.ok && !UnpackFailed(f32) &&
      !(f32.error && missing_inputs::HasMissingInputsSignature(f32.error->message))) {
    return DtypeRow::kEscalate;
  }
  return DtypeRow::kProceed;
}

// ---------------------------------------------------------------------------------------------
// The playbook

namespace dtype_bfloat16 {
namespace {

class DtypeBfloat16 : public Playbook {
 public:
  const CatalogEntry& Catalog() const override { return kCatalog; }
  absl::Status ProbeAndFix(ShardRun& run) const override;

 private:
  // The proceed row: the loader fix for cross-dtype entries (re-probed), the reason otherwise.
  // Entries whose re-probe shows unpack_forward_output failing are added to needs_unpack.
  absl::Status Fix(ShardRun& run, const std::vector<EntryWork*>& proceeding,
                   std::vector<EntryWork*>& needs_unpack) const;
};

// The entry needs the unpack_forward_output playbook next (docs/playbooks.md, "Chaining").
void StopForUnpack(EntryWork& w) {
  ShardRun::Stop(w, std::string(DtypeRowName(DtypeRow::kNeedsUnpack)),
                 v1::EntryOutcome::NEEDS_PLAYBOOK, "unpack_forward_output");
}

}  // namespace

// docs/playbooks.md, "dtype_bfloat16".
absl::Status DtypeBfloat16::ProbeAndFix(ShardRun& run) const {
  std::vector<EntryWork*> proceeding;
  std::vector<EntryWork*> needs_unpack;  // proceeding entries whose float32 phase failed to unpack
  for (auto& w : run.entries()) {
    if (run.Cancelled()) return absl::CancelledError("cancelled");
    run.Progress("probe", w.entry->key());
    auto docs = run.ProbeOrStop(w, "dtype");
    if (!docs.ok()) return docs.status();
    if (!*docs) continue;
    w.probe = (**docs)[0];
    w.probe32 = (**docs)[1];
    w.out->set_output_class(!w.probe32->output_class.empty() ? w.probe32->output_class
                                                             : w.probe->output_class);
    const DtypeRow row = ClassifyDtype(*w.probe, *w.probe32);
    const std::string e16 = w.probe->error ? w.probe->error->Line() : "OK";
    const std::string e32 = w.probe32->error ? w.probe32->error->Line() : "OK";
    w.out->set_probe_finding(util::StrCat("BFLOAT16: ", w.probe->ok ? "OK" : "FAILED - " + e16,
                                          "; FLOAT32: ", w.probe32->ok ? "OK" : "FAILED - " + e32));
    switch (row) {
      case DtypeRow::kProceed:
        proceeding.push_back(&w);
        if (UnpackFailed(*w.probe32)) needs_unpack.push_back(&w);
        break;
      case DtypeRow::kEscalate:
        run.Review(w, util::StrCat("escalate: float32 fails too (", e32, "); bfloat16: ", e16));
        break;
      case DtypeRow::kNotReproduced:
        run.Review(w,
                   "the failure did not reproduce on CPU (the bfloat16 phase passed): re-run "
                   "pytest first; nothing edited");
        break;
      case DtypeRow::kOtherError:
        run.Review(w, util::StrCat("the bfloat16 error has no dtype signature (", e16,
                                   "): another playbook applies"));
        break;
      case DtypeRow::kNeedsUnpack:
        // Named by the stop: the shard runs it next, or reports the stop when it cannot.
        break;
    }
    if (row == DtypeRow::kNeedsUnpack) {
      w.out->set_fix_path("none");
      StopForUnpack(w);
    } else if (row != DtypeRow::kProceed) {
      w.out->set_fix_path("none");
      run.Stop(w, std::string(DtypeRowName(row)));
    }
  }
  if (proceeding.empty()) return absl::OkStatus();
  if (auto st = Fix(run, proceeding, needs_unpack); !st.ok()) return st;
  // The dtype fix first, then unpack_forward_output on the fixed loader.
  for (EntryWork* w : needs_unpack) StopForUnpack(*w);
  return absl::OkStatus();
}

absl::Status DtypeBfloat16::Fix(ShardRun& run, const std::vector<EntryWork*>& proceeding,
                                std::vector<EntryWork*>& needs_unpack) const {
  const bool cross = std::any_of(proceeding.begin(), proceeding.end(),
                                 [](EntryWork* w) { return w->entry->flavor() == "cross_dtype"; });
  if (!cross) {
    for (EntryWork* w : proceeding) {
      w->out->set_fix_path("none");
      w->out->set_why_not_other(
          "op not implemented for BFloat16: no loader edit can add a kernel; xfail with the "
          "verbatim error");
    }
    return absl::OkStatus();
  }
  // Cross-dtype: the float inputs that stayed float32 in the bfloat16 phase.
  std::vector<std::string> offending;
  for (EntryWork* w : proceeding) {
    for (const auto& in : w->probe->inputs) {
      if (in.dtype == "torch.float32" &&
          std::find(offending.begin(), offending.end(), in.name) == offending.end()) {
        offending.push_back(in.name);
      }
    }
  }
  run.Progress("fix");
  auto fix = FindDtypeFix(run.loader_text(), offending);
  if (!fix) {
    for (EntryWork* w : proceeding) {
      w->out->set_fix_path("none");
      w->out->set_why_not_other(
          util::StrCat("no fix site in the loader for the float32 input(s) ",
                       offending.empty() ? "(none reported)" : util::StrJoin(offending, ", "),
                       ": xfail with the verbatim error"));
    }
    return absl::OkStatus();
  }
  const std::string before = run.loader_text();
  run.loader_text() = fix->text;
  if (auto st = run.WriteLoader(); !st.ok()) return st;
  bool revert = false;
  std::vector<EntryWork*> needs_inputs;  // the fix holds, and the forward now needs inputs
  for (EntryWork* w : proceeding) {
    run.Progress("re-probe", w->entry->key());
    auto docs = run.tools().Probe(w->entry->key(), "dtype");
    if (!docs.ok() || docs->size() < 2) {
      if (!docs.ok() && !absl::IsNotFound(docs.status()) &&
          !absl::IsDeadlineExceeded(docs.status())) {
        return docs.status();
      }
      run.Review(*w, "no probe result after the loader fix");
      continue;
    }
    const ProbeDoc& b = (*docs)[0];
    const ProbeDoc& f = (*docs)[1];
    w->out->set_fix_path("loader_dtype");
    const bool still_mismatched =
        !b.ok && b.error && HasBf16Signature(b.error->message) &&
        b.error->message.find("not implemented for 'BFloat16'") == std::string::npos;
    if (!still_mismatched && (UnpackFailed(b) || UnpackFailed(f))) {
      // The fix let the forward pass run in bfloat16; unpack_forward_output is next.
      w->fixed = true;
      const ProbeDoc& failed = UnpackFailed(b) ? b : f;
      const std::string why = !failed.unpacked_error.empty() ? failed.unpacked_error
                              : failed.error                 ? failed.error->Line()
                                                             : "?";
      w->out->set_probe_finding(util::StrCat(w->out->probe_finding(), "; after ", fix->description,
                                             ": the forward pass runs, unpack_forward_output "
                                             "FAILED - ",
                                             why));
      w->out->set_why_not_other(
          "a float32 tensor built without dtype_override: the one-line "
          "loader fix makes the inputs bfloat16");
      if (std::find(needs_unpack.begin(), needs_unpack.end(), w) == needs_unpack.end()) {
        needs_unpack.push_back(w);
      }
    } else if (b.ok && f.ok) {
      w->fixed = true;
      w->out->set_probe_finding(util::StrCat(w->out->probe_finding(), "; after ", fix->description,
                                             ": BFLOAT16 OK, FLOAT32 OK"));
      w->out->set_why_not_other(
          "a float32 tensor built without dtype_override: the one-line "
          "loader fix makes the inputs bfloat16");
    } else if (still_mismatched) {
      revert = true;
      run.Review(*w, util::StrCat("the loader fix did not remove the dtype mismatch (",
                                  b.error->Line(), "): reverted, xfail only"));
    } else {
      w->fixed = true;
      w->out->set_probe_finding(util::StrCat(
          w->out->probe_finding(), "; after ", fix->description, ": BFLOAT16 FAILED - ",
          b.error ? b.error->Line() : "?", " (a new CPU error; the fix is kept)"));
      w->out->set_why_not_other(
          "the fix removed the dtype mismatch; the new CPU error is the "
          "reason now");
      // A failure missing_inputs fixes: that playbook runs next on the fixed loader
      // (docs/playbooks.md, "Chaining"), not a verification of a known problem.
      if (b.error && missing_inputs::HasMissingInputsSignature(b.error->message)) {
        needs_inputs.push_back(w);
      }
    }
  }
  if (revert) {
    run.loader_text() = before;
    if (auto st = run.WriteLoader(); !st.ok()) return st;
    for (EntryWork* w : proceeding) {
      w->fixed = false;
      w->out->set_fix_path("none");
    }
    return absl::OkStatus();
  }
  for (EntryWork* w : needs_inputs) {
    ShardRun::Stop(*w, "needs_inputs", v1::EntryOutcome::NEEDS_PLAYBOOK, "missing_inputs");
  }
  // A loader fix changes inference too: a KFX inference entry with a bfloat16 reason is stale.
  for (EntryWork* w : proceeding) {
    if (HasBf16Signature(w->inference_reason)) {
      ShardRun::FlagStaleInference(*w, "the loader fix", "with a bfloat16 reason");
    }
  }
  return absl::OkStatus();
}

std::unique_ptr<Playbook> Make() { return std::make_unique<DtypeBfloat16>(); }

}  // namespace dtype_bfloat16
}  // namespace triage::playbooks
