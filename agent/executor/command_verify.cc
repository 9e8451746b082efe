#include "agent/executor/command_verify.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <optional>
#include <utility>

#include "agent/executor/native_executor.h"
#include "agent/executor/native_tools.h"
#include "agent/playbooks/playbook.h"
#include "agent/playbooks/tools.h"
#include "agent/workspace/workspace.h"
#include "common/inventory/document.h"
#include "common/inventory/key_grammar.h"
#include "common/junit/reason.h"
#include "common/util/strings.h"

namespace triage::agent {
namespace {

// The native playbooks' verification and decision, and nothing else: no probe, no fix (the
// command made its fixes). Never registered: it is how the command executor reaches ShardRun's
// verification (one pytest session, a crashed session's entries run alone, the informational
// inference entry) and the verification table's decision (Playbook::Decide).
class FarmVerification : public playbooks::Playbook {
 public:
  const playbooks::CatalogEntry& Catalog() const override {
    static const playbooks::CatalogEntry entry{.name = "farm_verification",
                                               .version = "1",
                                               .estimate_seconds = 0,
                                               .rules = "",
                                               .probe_modes = {}};
    return entry;
  }
  playbooks::PhasePlan Plan(v1::ShardPhase) const override {
    return {.probe_and_fix = false, .verify = true};
  }
  absl::Status ProbeAndFix(playbooks::ShardRun&) const override { return absl::OkStatus(); }
};

void AddReview(v1::EntryOutcome& o, const std::string& note) {
  if (std::find(o.review().begin(), o.review().end(), note) == o.review().end()) {
    o.add_review(note);
  }
}

EntryFields Apply(EntryFields fields, const v1::EntryOutcome& o) {
  if (!o.changed()) return fields;
  for (const auto& name : o.edit().delete_()) fields.erase(name);
  for (const auto& f : o.edit().set()) fields[f.name()] = f.value();
  return fields;
}

// A value as text: strings as they are, lists as [a, b].
std::string Text(const v1::YamlValue& v) {
  switch (v.kind_case()) {
    case v1::YamlValue::kBoolValue:
      return v.bool_value() ? "true" : "false";
    case v1::YamlValue::kIntValue:
      return util::StrCat(v.int_value());
    case v1::YamlValue::kFloatValue:
      return util::StrCat(v.float_value());
    case v1::YamlValue::kListValue:
      return util::StrCat("[", util::StrJoin(v.list_value().items(), ", "), "]");
    default:
      return v.string_value();
  }
}

std::optional<std::string> Field(const EntryFields& f, const std::string& name) {
  auto it = f.find(name);
  if (it == f.end()) return std::nullopt;
  std::string t = Text(it->second);
  if (name == "reason" && t.empty()) return std::nullopt;
  return t;
}

// "status KNOWN_FAILURE_XFAIL, reason 'x'" / "status EXPECTED_PASSING, no reason".
std::string Describe(const EntryFields& f, bool with_pcc) {
  const auto status = Field(f, "status");
  const auto reason = Field(f, "reason");
  std::string out = util::StrCat("status ", status ? *status : "(none)", ", ",
                                 reason ? util::StrCat("reason '", *reason, "'") : "no reason");
  if (with_pcc) {
    const auto pcc = Field(f, "assert_pcc");
    util::StrAppend(&out, ", assert_pcc ", pcc ? *pcc : "(none)");
  }
  return out;
}

bool SetsField(const v1::EntryOutcome& o, std::string_view name) {
  if (!o.changed()) return false;
  return std::any_of(o.edit().set().begin(), o.edit().set().end(),
                     [&](const v1::FieldChange& f) { return f.name() == name; });
}

}  // namespace

DecisionCheck CheckCommandDecision(const EntryFields& base, const v1::EntryOutcome& command,
                                   const v1::EntryOutcome& farm) {
  const EntryFields by_command = Apply(base, command);
  const EntryFields by_farm = Apply(base, farm);
  const bool pcc = SetsField(farm, "assert_pcc");
  DecisionCheck check;
  check.agree = Field(by_command, "status") == Field(by_farm, "status");
  const auto a = Field(by_command, "reason");
  const auto b = Field(by_farm, "reason");
  check.agree = check.agree && a.has_value() == b.has_value() &&
                (!a || junit::NormalizeReason(*a, 0) == junit::NormalizeReason(*b, 0));
  if (pcc)
    check.agree = check.agree && Field(by_command, "assert_pcc") == Field(by_farm, "assert_pcc");
  check.command_wrote = command.changed()
                            ? Describe(by_command, pcc)
                            : util::StrCat("no YAML change (", Describe(base, pcc), ")");
  check.farm_writes = farm.changed() ? Describe(by_farm, pcc)
                                     : util::StrCat("no YAML change (", Describe(base, pcc), ")");
  return check;
}

absl::StatusOr<v1::ShardResult> RunFarmVerification(ExecContext& ctx,
                                                    const std::filesystem::path& scripts_dir) {
  // The native executor's: the same subprocesses, timeouts and evidence layout. A shard may
  // verify more than once (fix once, verify many: before and after its command runs), so the
  // runs are numbered on from the shard's earlier ones (runs/pytest-N).
  NativeToolsOptions options = NativeExecutor::ToolsOptionsFor(ctx, scripts_dir);
  std::error_code ec;
  for (const auto& d : std::filesystem::directory_iterator(ctx.shard_dir / "runs", ec)) {
    int n = 0;
    if (std::sscanf(d.path().filename().c_str(), "pytest-%d", &n) == 1) {
      options.first_run = std::max(options.first_run, n);
    }
  }
  NativeTools tools(std::move(options));
  // A verify phase: the loader may be gone (the command's doing), which verification tolerates.
  v1::ShardSpec spec = *ctx.spec;
  spec.set_phase(v1::PHASE_VERIFY);
  playbooks::PlaybookContext pc = NativeExecutor::ContextFor(ctx, spec, tools);
  static const FarmVerification kFarm;
  // JUnit files and logs are input from subprocesses: a shape the code did not expect fails this
  // shard with the reason, never the agent (as NativeExecutor::RunWith).
  try {
    return kFarm.Run(pc);
  } catch (const std::exception& e) {
    return absl::InternalError(util::StrCat(
        "shard ", spec.shard_id(), " (command, farm verification): malformed input: ", e.what()));
  }
}

void ApplyFarmVerification(const v1::ShardSpec& spec, lift::PinnedFiles& base_files,
                           const v1::ShardResult& farm, v1::ShardResult& result) {
  for (const auto& ev : farm.evidence()) *result.add_evidence() = ev;
  std::map<std::string, std::optional<inventory::Document>> docs;  // file -> at the pinned commit
  std::optional<inventory::KeyGrammar> grammar;                    // the pinned runner's
  auto base_of = [&](const std::string& file, const std::string& key) {
    auto it = docs.find(file);
    if (it == docs.end()) {
      if (!grammar) {
        grammar =
            inventory::GrammarOrDefault(base_files.ReadTtXla(std::string(inventory::kRunnerPath)));
      }
      auto text = base_files.ReadTtXla(file);
      it = docs.emplace(file, text.ok() ? std::optional(inventory::Document::Parse(
                                              file, *text, {.grammar = &*grammar}))
                                        : std::nullopt)
               .first;
    }
    EntryFields fields;
    const inventory::Entry* e = it->second ? it->second->Find(key) : nullptr;
    if (e == nullptr) return fields;
    for (const auto& name : e->FieldNamesForArch(spec.arch())) {
      fields[name] = lift::ToYaml(*e->FieldForArch(name, spec.arch()));
    }
    return fields;
  };
  const std::string arch = spec.arch().empty() ? "n150" : spec.arch();
  // The session logs (logs/NN-verify.log: named after no key) concern every entry the session
  // ran: each outcome links them beside its JUnit files, so the run that replaced a command's
  // decision is one click from the flag.
  std::vector<std::string> session_logs;
  for (const auto& ev : farm.evidence()) {
    if (!std::string_view(ev.name()).starts_with("logs/")) continue;
    bool keyed = false;
    for (const auto& e : spec.entries()) {
      keyed |= ev.name().find(e.key()) != std::string::npos ||
               ev.name().find(playbooks::KeyFileName(e.key())) != std::string::npos;
    }
    if (!keyed) session_logs.push_back(ev.name());
  }
  for (auto& o : *result.mutable_entries()) {
    const v1::EntryOutcome* f = nullptr;
    for (const auto& candidate : farm.entries()) {
      if (candidate.key() == o.key() && candidate.file() == o.file()) f = &candidate;
    }
    if (f == nullptr) continue;
    o.set_verdict(f->verdict());
    o.set_stage(f->stage());
    o.set_reason(f->reason());
    o.set_duration_seconds(f->duration_seconds());
    o.set_inference_outcome(f->inference_outcome());
    for (const auto& r : f->review()) AddReview(o, r);
    auto link = [&o](const std::string& name) {
      if (std::find(o.evidence().begin(), o.evidence().end(), name) == o.evidence().end()) {
        o.add_evidence(name);
      }
    };
    for (const auto& name : f->evidence()) link(name);
    for (const auto& name : session_logs) link(name);
    if (!o.fixed_by().empty() && f->verdict() != "no_evidence") {
      // Fix once, verify many (docs/remediation.md): no command ran for the entry; an earlier
      // change fixed it, and the farm's decision from this run is its decision.
      o.set_command_check("verified by the farm: no command run");
      if (f->verdict() != "pass") {
        AddReview(o, util::StrCat("passed with the change of ", o.fixed_by(),
                                  " before this shard's command runs; the farm's run on ", arch,
                                  " after them shows ", f->verdict()));
        o.clear_fixed_by();
      }
      o.set_changed(f->changed());
      if (f->changed()) {
        *o.mutable_edit() = f->edit();
      } else {
        o.clear_edit();
      }
      continue;
    }
    o.clear_fixed_by();
    if (f->verdict() == "no_evidence") {
      o.set_command_check("not verified");
      AddReview(o, util::StrCat("the farm's run on ", arch,
                                " left no testcase: the command's edit is not verified"));
      continue;
    }
    const DecisionCheck check = CheckCommandDecision(base_of(o.file(), o.key()), o, *f);
    if (check.agree) {
      o.set_command_check("verified by the farm");
      continue;
    }
    o.set_command_check("replaced by the farm's decision");
    AddReview(o, util::StrCat("command wrote ", check.command_wrote, "; the farm's run on ", arch,
                              " shows ", f->verdict(),
                              f->reason().empty() ? "" : util::StrCat(" (", f->reason(), ")"),
                              ": the farm writes ", check.farm_writes));
    o.set_changed(f->changed());
    if (f->changed()) {
      *o.mutable_edit() = f->edit();
    } else {
      o.clear_edit();
    }
  }
}

}  // namespace triage::agent
