// nightly_replay: tt-xla's real maintenance rounds replayed through the nightly rules, and the
// result compared field by field with what the engineers wrote (docs/nightly.md, "Replaying the
// rounds engineers landed").
//
// Each round of the commits file (one JSON object per line: the round's changed entries with
// their fields before and after, and the PCC figures its pull request quotes) is presented the
// way a night would present it:
//   - the checkout: every changed entry as it was before the round, in its test-config file;
//   - the night: per entry and arch the runner ran it on, two runs whose records are what CI
//     showed, synthesized from the entry after the round (the engineer's reading of CI) and the
//     figures the PR quotes (the PCC measured; when the PR quotes none, one the engineer's
//     threshold admits);
//   - the rules: Judge, then DecideNightly confirmed by two fleet runs that behave alike, then
//     Place and the editor (a skipped entry goes through the recheck sweep's DecideRecheck:
//     skips do not run at night).
// Fields compared per entry and arch, as the entry resolves there: status, assert_pcc,
// required_pcc (0.99 when absent), bringup_status and the reason without its tracking link.
// "changed" fields are those the engineer changed; a "spurious" field is one the engineer left
// as it was and the farm changed.
//
//   nightly_replay [--commits FILE] [--misses N] [--json FILE]

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/nightly_replay_night.h"
#include "common/inventory/document.h"
#include "common/inventory/editor.h"
#include "common/inventory/key.h"
#include "common/inventory/key_grammar.h"
#include "common/nightly/behaviour.h"
#include "common/nightly/decide.h"
#include "common/nightly/learn.h"
#include "common/nightly/placement.h"
#include "common/nightly/rules.h"
#include "common/util/strings.h"
#include "nlohmann/json.hpp"

namespace triage::bench {
namespace {

using nightly::OnArch;
using nlohmann::json;

constexpr std::string_view kTestConfigDir = "tests/runner/test_config/";

// ---- The checkout: entries rendered as a test-config file ----------------------------------

std::string Scalar(const json& v) {
  if (v.is_string()) return inventory::DoubleQuote(v.get<std::string>());
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  if (v.is_number()) {
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%.10g", v.get<double>());
    std::string s = buf;
    if (s.find_first_of(".e") == std::string::npos) s += ".0";
    return s;
  }
  return "null";
}

void RenderFields(const json& fields, int indent, std::string& out) {
  const std::string pad(indent, ' ');
  for (const auto& [name, v] : fields.items()) {
    if (v.is_object()) {
      out += util::StrCat(pad, name, ":\n");
      RenderFields(v, indent + 2, out);
    } else if (v.is_array()) {
      std::vector<std::string> items;
      for (const auto& item : v) items.push_back(Scalar(item));
      out += util::StrCat(pad, name, ": [", util::StrJoin(items, ", "), "]\n");
    } else {
      out += util::StrCat(pad, name, ": ", Scalar(v), "\n");
    }
  }
}

// One test-config file holding these entries (key, fields), null fields left out.
std::string RenderFile(const std::vector<std::pair<std::string, const json*>>& entries) {
  std::string out = "test_config:\n";
  for (const auto& [key, fields] : entries) {
    if (fields == nullptr || fields->is_null()) continue;
    out += util::StrCat("  ", inventory::DoubleQuote(key), ":\n");
    // status first, as tt-xla writes entries.
    json ordered = json::object();
    if (fields->contains("status")) ordered["status"] = (*fields)["status"];
    RenderFields(ordered, 4, out);
    json rest = *fields;
    rest.erase("status");
    RenderFields(rest, 4, out);
  }
  return out;
}

// The runners of the older key grammars, as the rounds' keys show them: a run-mode-like segment
// between parallelism and run mode (`...-single_device-full-inference`), and before that no
// parallelism segment (`...-full-inference`). A round is read with the grammar of its time.
constexpr char kRunnerHead[] = R"(
@pytest.mark.parametrize(
    "run_mode",
    [
        pytest.param(RunMode.INFERENCE, id="inference"),
        pytest.param(RunMode.TRAINING, id="training"),
    ],
)
@pytest.mark.parametrize(
    "op_by_op",
    [None, OpByOpBackend.TORCH, OpByOpBackend.STABLEHLO],
    ids=["full", "op_by_op_torch", "op_by_op_stablehlo"],
)
)";
constexpr char kRunnerParallelism[] = R"(@pytest.mark.parametrize(
    "parallelism",
    [
        pytest.param(Parallelism.SINGLE_DEVICE, id="single_device"),
        pytest.param(Parallelism.DATA_PARALLEL, id="data_parallel"),
        pytest.param(Parallelism.TENSOR_PARALLEL, id="tensor_parallel"),
    ],
)
)";
constexpr char kRunnerTail[] = R"(@pytest.mark.parametrize(
    "test_entry", test_entries, ids=DynamicLoader.create_test_id_generator(MODELS_ROOT_TORCH)
)
def test_all_models_torch(test_entry, parallelism, op_by_op, run_mode, record_property):
    pass
)";

// The grammar a key was made by: today's, else the older ones.
const inventory::KeyGrammar& GrammarOf(const std::string& key) {
  static const inventory::KeyGrammar kFull = *inventory::ReadKeyGrammar(
      std::string(kRunnerHead) + kRunnerParallelism + kRunnerTail, "runner of December 2025");
  static const inventory::KeyGrammar kFullNoParallelism =
      *inventory::ReadKeyGrammar(std::string(kRunnerHead) + kRunnerTail, "runner of October 2025");
  for (const inventory::KeyGrammar* g :
       {&inventory::DefaultKeyGrammar(), &kFull, &kFullNoParallelism}) {
    if (inventory::ParseKey(key, *g).ok()) return *g;
  }
  return inventory::DefaultKeyGrammar();
}

// The YAML file the round's file is today (a .py round: the .yaml of the same name).
std::string YamlPath(std::string file) {
  if (file.ends_with(".py")) file = file.substr(0, file.size() - 3) + ".yaml";
  return file;
}

// ---- The comparison ------------------------------------------------------------------------

constexpr std::string_view kFields[] = {"status", "assert_pcc", "required_pcc", "bringup_status",
                                        "reason"};

std::string Collapse(std::string_view s) {
  std::string out;
  bool space = false;
  for (char c : s) {
    if (c == ' ' || c == '\t' || c == '\n') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

std::string FieldOf(const OnArch& y, std::string_view field) {
  if (!y.exists) return "<no entry>";
  if (field == "status") return y.status;
  if (field == "assert_pcc") return y.assert_pcc ? "true" : "false";
  if (field == "required_pcc") {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.4f", y.required_pcc.value_or(nightly::kDefaultRequiredPcc));
    return buf;
  }
  if (field == "bringup_status") return y.bringup_status;
  return Collapse(nightly::WithoutUrl(y.reason));
}

struct Tally {
  int fields = 0, agree = 0;           // every field the engineer's entry has, per arch
  int changed = 0, changed_agree = 0;  // the fields the engineer changed
  int unchanged = 0, spurious = 0;     // fields the engineer left; the farm changed
  int entries = 0, entries_exact = 0;  // entries with every field as the engineer's
  void Add(const Tally& o) {
    fields += o.fields, agree += o.agree, changed += o.changed, changed_agree += o.changed_agree;
    unchanged += o.unchanged, spurious += o.spurious, entries += o.entries;
    entries_exact += o.entries_exact;
  }
};

std::string Pct(int a, int b) {
  if (b == 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", 100.0 * a / b);
  return buf;
}

std::string Quarter(const std::string& date) {
  const int month = std::stoi(date.substr(5, 2));
  return util::StrCat(date.substr(0, 4), "-Q", (month - 1) / 3 + 1);
}

struct Miss {
  std::string round, key, arch, field, before, engineer, farm, how, kind;
};

// ---- One entry replayed ---------------------------------------------------------------------

struct EntryResult {
  Tally tally;
  std::vector<Miss> misses;
  std::string error;  // the replay could not read or edit the entry
};

const inventory::Entry* Only(const inventory::Document& doc) {
  return doc.entries().empty() ? nullptr : &doc.entries().front();
}

// A changed entry of a round, its test-config file before and after the round parsed.
struct ParsedEntry {
  const json* e = nullptr;
  std::string key, path;
  std::optional<inventory::Document> before_doc, after_doc;
  std::string after_text;  // the block as the engineer wrote it
  std::string error;       // why it is not replayed ("" when it is)
};

ParsedEntry ParseEntry(const json& e) {
  ParsedEntry p;
  p.e = &e;
  p.key = e["key"].get<std::string>();
  p.path = YamlPath(e["file"].get<std::string>());
  if (auto raw = e.find("after_raw"); raw != e.end() && raw->is_string()) {
    p.after_text = raw->get<std::string>();
  }
  const json& before = e["before"];
  const json& after = e["after"];
  if (after.is_null()) {
    p.error = "the engineer removed the entry (the rules never remove one)";
    return p;
  }
  const inventory::ParseOptions grammar{.grammar = &GrammarOf(p.key)};
  p.before_doc = inventory::Document::Parse(p.path, RenderFile({{p.key, &before}}), grammar);
  p.after_doc = inventory::Document::Parse(p.path, RenderFile({{p.key, &after}}), grammar);
  for (const auto* d : {&*p.before_doc, &*p.after_doc}) {
    if (!d->ok()) {
      p.error = util::StrCat("not read: ", d->diagnostics().front().message);
      return p;
    }
  }
  return p;
}

EntryResult ReplayEntry(const json& round, const ParsedEntry& p,
                        const nightly::RuleOptions& options) {
  EntryResult res;
  const json& e = *p.e;
  const std::string& key = p.key;
  const std::string& path = p.path;
  const json& before = e["before"];
  const json& after = e["after"];
  if (!p.error.empty()) {
    res.error = p.error;
    return res;
  }
  const inventory::Document& before_doc = *p.before_doc;
  const inventory::Entry* b_entry = Only(before_doc);
  const inventory::Entry* a_entry = Only(*p.after_doc);
  const std::vector<std::string> archs = Archs(key, before, after);

  // The night and the rules, arch by arch.
  std::map<std::string, Synth> synth;
  for (const auto& arch : archs) {
    synth[arch] = Synthesize(key, arch, nightly::Resolve(b_entry, arch),
                             nightly::Resolve(a_entry, arch), Figure(e["pr_figures"], arch));
  }
  std::vector<nightly::ArchTarget> targets;
  std::map<std::string, std::string> kinds;
  for (const auto& arch : archs) {
    const OnArch yaml = nightly::Resolve(b_entry, arch);
    const v1::NightlyRecord& rec = synth[arch].record;
    const std::vector<v1::NightlyRecord> runs = {rec, rec};
    // The fleet's confirmation runs: the agent's plugin keeps a crash's last fatal message.
    v1::NightlyRecord fleet = rec;
    if (rec.crash_signal() > 0 && rec.crash_signal() != 9)
      fleet.set_real_error(rec.error_message());
    const std::vector<v1::NightlyRecord> confirmations = {fleet, fleet};
    v1::ShardEntry se;
    se.set_key(key);
    se.set_file(path);
    v1::EntryOutcome out;
    if (yaml.exists && yaml.status == "NOT_SUPPORTED_SKIP") {
      v1::NightlyCandidate& c = *se.mutable_nightly();
      c.set_kind("recheck");
      c.set_arch(arch);
      c.set_test_function(rec.test_function());
      c.set_status(yaml.status);
      c.set_reason(yaml.reason);
      c.set_bringup_status(yaml.bringup_status);
      if (yaml.required_pcc) c.set_required_pcc(*yaml.required_pcc);
      c.set_assert_pcc(yaml.assert_pcc);
      for (const auto& a : archs) c.add_archs(a);
      out = nightly::DecideRecheck(se, confirmations, options);
    } else {
      nightly::History h;
      h.test_function = rec.test_function();
      h.key = key;
      h.arch = arch;
      h.records = runs;
      for (const auto& other : archs) {
        if (other != arch && nightly::RanToEnd(nightly::BehaviourOf(synth[other].record))) {
          h.completed_elsewhere.push_back(other);
        }
      }
      nightly::Judgement j = nightly::Judge(h, yaml, options);
      if (j.kind != nightly::Judgement::Kind::kCandidate) continue;
      *se.mutable_nightly() = j.candidate;
      for (const auto& a : archs) se.mutable_nightly()->add_archs(a);
      out = nightly::DecideNightly(se, confirmations, options, nightly::DecideMode::kConfirm);
    }
    if (!out.changed()) continue;
    kinds[arch] = out.nightly().kind();
    nightly::ArchTarget t;
    t.arch = arch;
    t.edit = out.edit();
    t.pcc_comment = out.nightly().pcc_comment();
    targets.push_back(std::move(t));
  }

  // The farm's entry: its archs' targets placed and written by the editor.
  std::optional<inventory::Document> farm_doc;
  if (!targets.empty()) {
    std::vector<inventory::EntryEdit> edits;
    if (b_entry == nullptr) {
      if (targets.size() == archs.size()) {
        if (auto placed = nightly::PlaceNew(key, archs, targets)) edits = std::move(*placed);
      }
    } else {
      edits = nightly::Place(*b_entry, archs, targets).edits;
    }
    if (!edits.empty()) {
      std::optional<inventory::Document> empty;
      if (b_entry == nullptr) {
        empty =
            inventory::Document::Parse(path, "test_config:\n", {.grammar = &before_doc.grammar()});
      }
      const inventory::Document& base = b_entry == nullptr ? *empty : before_doc;
      auto text = inventory::ApplyEdits(base, edits);
      if (!text.ok()) {
        res.error = util::StrCat("edit refused: ", util::MessageOf(text.status()));
        return res;
      }
      farm_doc = inventory::Document::Parse(path, *text, {.grammar = &before_doc.grammar()});
    }
  }
  const inventory::Entry* f_entry =
      farm_doc ? farm_doc->Find(key) : (b_entry == nullptr ? nullptr : b_entry);

  bool exact = true;
  for (const auto& arch : archs) {
    const OnArch b = nightly::Resolve(b_entry, arch);
    const OnArch a = nightly::Resolve(a_entry, arch);
    const OnArch f = nightly::Resolve(f_entry, arch);
    for (std::string_view field : kFields) {
      const std::string bv = FieldOf(b, field), av = FieldOf(a, field), fv = FieldOf(f, field);
      const bool engineer_wrote = !(av.empty() && bv.empty());
      if (engineer_wrote) {
        ++res.tally.fields;
        res.tally.agree += av == fv;
      }
      if (av != bv) {
        ++res.tally.changed;
        res.tally.changed_agree += av == fv;
      } else {
        ++res.tally.unchanged;
        res.tally.spurious += fv != bv;
      }
      if (av != fv) {
        exact = false;
        res.misses.push_back(
            {util::StrCat(round["short"].get<std::string>(), " ", round["date"].get<std::string>()),
             key, arch, std::string(field), bv, av, fv, synth[arch].how,
             kinds.count(arch) ? kinds[arch] : "none"});
      }
    }
  }
  res.tally.entries = 1;
  res.tally.entries_exact = exact;
  return res;
}

void PrintRow(const std::string& name, const Tally& t) {
  std::printf("| %-26s | %7d | %7s | %7d | %7s | %9d | %8d | %7d | %7s |\n", name.c_str(), t.fields,
              Pct(t.agree, t.fields).c_str(), t.changed, Pct(t.changed_agree, t.changed).c_str(),
              t.unchanged, t.spurious, t.entries, Pct(t.entries_exact, t.entries).c_str());
}

int Main(int argc, char** argv) {
  CLI::App app{
      "nightly_replay: tt-xla's maintenance rounds replayed through the nightly rules, compared "
      "field by field with what the engineers wrote"};
  std::string commits = std::string(TRIAGE_SHARED_DIR) + "/data/maintenance/commits.jsonl";
  int show_misses = 0;
  std::string json_out, policy_file;
  app.add_option("--policy", policy_file,
                 "a nightly policy file (docs/nightly.md, \"The policy\")");
  app.add_option("--commits", commits, "the rounds, one JSON object per line")
      ->capture_default_str();
  app.add_option("--misses", show_misses, "list this many fields the farm wrote otherwise");
  app.add_option("--json", json_out, "write the tallies as JSON to this file");
  std::string policy_at;
  app.add_option("--policy-at", policy_at,
                 "print the policy learned for this round (its short sha) and its evidence");
  CLI11_PARSE(app, argc, argv);

  std::ifstream in(commits);
  if (!in) {
    std::cerr << "nightly_replay: cannot read " << commits << "\n";
    return 2;
  }
  nightly::RuleOptions options;
  std::string policy_text;
  const bool file_policy = !policy_file.empty();
  if (file_policy) {
    std::ifstream pf(policy_file);
    std::stringstream text;
    text << pf.rdbuf();
    if (!pf) {
      std::cerr << "nightly_replay: cannot read " << policy_file << "\n";
      return 2;
    }
    policy_text = text.str();
    auto policy = nightly::ReadPolicy(policy_text, policy_file);
    if (!policy.ok()) {
      std::cerr << "nightly_replay: " << policy.status().message() << "\n";
      return 2;
    }
    options = nightly::WithPolicy(options, *policy);
  }
  // Every round read and parsed first: the learned policy of a round reads the rounds before it.
  std::vector<json> rounds_json;
  int line_no = 0;
  std::string line;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    try {
      rounds_json.push_back(json::parse(line));
    } catch (const std::exception& ex) {
      std::cerr << commits << ":" << line_no << ": not JSON: " << ex.what() << "\n";
      return 2;
    }
  }
  std::vector<std::vector<ParsedEntry>> parsed(rounds_json.size());
  std::vector<nightly::Round> history(rounds_json.size());
  int entries = 0;
  for (std::size_t i = 0; i < rounds_json.size(); ++i) {
    const json& round = rounds_json[i];
    history[i].commit = round["short"].get<std::string>();
    history[i].date = round["date"].get<std::string>();
    for (const auto& e : round["entries"]) {
      parsed[i].push_back(ParseEntry(e));
      ++entries;
    }
    for (const ParsedEntry& p : parsed[i]) {
      if (!p.error.empty()) continue;
      nightly::EntryChange c;
      c.key = p.key;
      c.before = (*p.e)["before"].is_null() ? nullptr : Only(*p.before_doc);
      c.after = Only(*p.after_doc);
      c.after_text = p.after_text;
      history[i].changes.push_back(std::move(c));
    }
  }
  const int rounds = static_cast<int>(rounds_json.size());

  // Three replays: the policy as given (the defaults, or --policy), the policy learned from the
  // rounds before each round (--policy's knobs still win), and in hindsight the learned policy
  // with every knob the round itself speaks to set as the round shows it: how far the knobs
  // could go if each round's own habits were known beforehand (a bound on learning, not a
  // result).
  struct Replay {
    Tally all;
    std::map<std::string, Tally> by_class, by_quarter;
    std::map<std::string, int> not_read;
    std::vector<Miss> misses;
  };
  Replay fixed, learned, hindsight;
  for (std::size_t i = 0; i < rounds_json.size(); ++i) {
    const json& round = rounds_json[i];
    const std::string quarter = Quarter(round["date"].get<std::string>());
    nightly::Learned l = nightly::LearnPolicy(std::span<const nightly::Round>(history.data(), i));
    nightly::RuleOptions learned_options = nightly::WithPolicy(options, l.policy);
    if (!policy_at.empty() && history[i].commit == policy_at) {
      std::printf("policy learned for %s (%s):\n%s", policy_at.c_str(), history[i].date.c_str(),
                  nightly::PolicyYaml(l.policy).c_str());
      for (const auto& [knob, items] : l.evidence) {
        for (const auto& ev : items) {
          std::printf("  %s: %s from %s %s %s\n", knob.c_str(), ev.value.c_str(), ev.commit.c_str(),
                      ev.date.c_str(), ev.key.c_str());
        }
      }
    }
    if (file_policy) {
      auto over = nightly::ReadPolicy(policy_text, policy_file, l.policy);
      if (over.ok()) learned_options = nightly::WithPolicy(options, *over);
    }
    // In hindsight: the knobs the round itself speaks to as it shows them, the others learned.
    nightly::RuleOptions hindsight_options = nightly::WithPolicy(
        options,
        nightly::LearnPolicy(std::span<const nightly::Round>(history.data() + i, 1), l.policy)
            .policy);
    for (const ParsedEntry& p : parsed[i]) {
      for (auto [replay, o] : {std::pair{&fixed, &options}, std::pair{&learned, &learned_options},
                               std::pair{&hindsight, &hindsight_options}}) {
        EntryResult r = ReplayEntry(round, p, *o);
        if (!r.error.empty()) {
          ++replay->not_read[r.error.substr(0, r.error.find(':'))];
          continue;
        }
        replay->all.Add(r.tally);
        replay->by_quarter[quarter].Add(r.tally);
        for (const auto& c : (*p.e)["classes"]) replay->by_class[c.get<std::string>()].Add(r.tally);
        for (auto& m : r.misses) replay->misses.push_back(std::move(m));
      }
    }
  }
  const Tally& all = learned.all;
  const auto& by_class = learned.by_class;
  const auto& by_quarter = learned.by_quarter;
  const auto& not_read = learned.not_read;
  const auto& misses = learned.misses;
  std::printf("nightly_replay: %d rounds, %d changed entries (%s)\n\n", rounds, entries,
              commits.c_str());
  std::printf("| %-26s | %7s | %7s | %7s | %7s | %9s | %8s | %7s | %7s |\n", "rows", "fields",
              "agree", "changed", "agree", "unchanged", "spurious", "entries", "exact");
  std::printf("|%s|\n", std::string(114, '-').c_str());
  PrintRow(policy_file.empty() ? "all, default policy" : "all, --policy", fixed.all);
  for (const auto& [q, t] : fixed.by_quarter) PrintRow(util::StrCat("  ", q), t);
  PrintRow("all, learned policy", all);
  for (const auto& [q, t] : by_quarter) PrintRow(util::StrCat("  ", q), t);
  for (const auto& [c, t] : by_class) PrintRow(util::StrCat("  ", c), t);
  PrintRow("all, hindsight (a bound)", hindsight.all);
  std::printf("\nnot replayed:");
  if (not_read.empty()) std::printf(" none");
  for (const auto& [why, n] : not_read) std::printf(" %d %s;", n, why.c_str());
  std::printf("\n");
  for (const auto& [name, t] : {std::pair<std::string, const Tally*>{
                                    policy_file.empty() ? "default" : "--policy", &fixed.all},
                                {"learned", &all},
                                {"hindsight (the round's own choices known)", &hindsight.all}}) {
    std::printf(
        "%s policy: changed fields as engineers wrote them: %d of %d (%s); spurious changes: %d "
        "of %d unchanged fields\n",
        name.c_str(), t->changed_agree, t->changed, Pct(t->changed_agree, t->changed).c_str(),
        t->spurious, t->unchanged);
  }
  // The policy the whole history teaches: what a sweep after the last round would use.
  const nightly::Learned now = nightly::LearnPolicy(history);
  std::printf("\npolicy learned from all %d rounds:\n%s", rounds,
              nightly::PolicyYaml(now.policy).c_str());
  for (int i = 0; i < show_misses && i < static_cast<int>(misses.size()); ++i) {
    const Miss& m = misses[static_cast<std::size_t>(i)];
    std::printf("miss %s %s %s %s: before '%s' engineer '%s' farm '%s' [%s; %s]\n", m.round.c_str(),
                m.key.c_str(), m.arch.c_str(), m.field.c_str(), m.before.c_str(),
                m.engineer.c_str(), m.farm.c_str(), m.kind.c_str(), m.how.c_str());
  }
  if (!json_out.empty()) {
    json j;
    auto tj = [](const Tally& t) {
      return json{{"fields", t.fields},       {"agree", t.agree},
                  {"changed", t.changed},     {"changed_agree", t.changed_agree},
                  {"unchanged", t.unchanged}, {"spurious", t.spurious},
                  {"entries", t.entries},     {"entries_exact", t.entries_exact}};
    };
    j["all"] = tj(all);
    for (const auto& [q, t] : by_quarter) j["by_quarter"][q] = tj(t);
    for (const auto& [c, t] : by_class) j["by_class"][c] = tj(t);
    for (const auto& [why, n] : not_read) j["not_replayed"][why] = n;
    std::ofstream(json_out) << j.dump(1) << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace triage::bench

int main(int argc, char** argv) { return triage::bench::Main(argc, argv); }
