#include "common/classify/classify.h"

#include <algorithm>

#include "common/inventory/schema.h"
#include "common/util/file.h"
#include "common/util/strings.h"
#include "re2/re2.h"
#include "yaml-cpp/yaml.h"

namespace triage::classify {
namespace {

constexpr std::string_view kDefaultStatuses[] = {"NOT_SUPPORTED_SKIP", "KNOWN_FAILURE_XFAIL"};

class RuleError {
 public:
  explicit RuleError(std::string source) : source_(std::move(source)) {}
  absl::Status At(const YAML::Node& node, std::string_view message) const {
    const YAML::Mark m = node.Mark();
    if (m.is_null()) return absl::InvalidArgumentError(util::StrCat(source_, ": ", message));
    return absl::InvalidArgumentError(
        util::StrCat(source_, ":", m.line + 1, ":", m.column + 1, ": ", message));
  }

 private:
  std::string source_;
};

absl::StatusOr<std::vector<std::string>> StringList(const YAML::Node& node, std::string_view field,
                                                    const RuleError& err) {
  std::vector<std::string> out;
  if (!node) return out;
  if (!node.IsSequence()) return err.At(node, util::StrCat(field, ": expected a list of strings"));
  for (const auto& item : node) {
    if (!item.IsScalar()) return err.At(item, util::StrCat(field, ": expected a string"));
    out.push_back(item.Scalar());
  }
  return out;
}

absl::StatusOr<std::vector<std::unique_ptr<re2::RE2>>> Patterns(const YAML::Node& node,
                                                                std::string_view field,
                                                                const RuleError& err) {
  std::vector<std::unique_ptr<re2::RE2>> out;
  if (!node) return out;
  if (!node.IsSequence()) return err.At(node, util::StrCat(field, ": expected a list of patterns"));
  for (const auto& item : node) {
    if (!item.IsScalar()) return err.At(item, util::StrCat(field, ": expected a pattern string"));
    re2::RE2::Options options;
    options.set_log_errors(false);
    auto re = std::make_unique<re2::RE2>(item.Scalar(), options);
    if (!re->ok()) {
      return err.At(
          item, util::StrCat(field, ": invalid RE2 pattern '", item.Scalar(), "': ", re->error()));
    }
    out.push_back(std::move(re));
  }
  return out;
}

bool Contains(const std::vector<std::string>& list, std::string_view s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

}  // namespace

Classifier::~Classifier() = default;
Classifier::Classifier(Classifier&&) noexcept = default;
Classifier& Classifier::operator=(Classifier&&) noexcept = default;

// Every exception yaml-cpp may throw while the rules are read (a node of an unexpected shape, a
// document nested too deep) becomes an error naming the rules file.
absl::StatusOr<Classifier> Classifier::FromYaml(std::string_view yaml, std::string source) try {
  RuleError err(source);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(util::StrCat(
        source, ":", e.mark.line + 1, ":", e.mark.column + 1, ": YAML syntax error: ", e.msg));
  }
  if (!root.IsMap() || !root["playbooks"] || !root["playbooks"].IsSequence()) {
    return err.At(root, "expected a mapping with a 'playbooks' list");
  }
  for (const auto& key : root) {
    if (key.first.Scalar() != "playbooks") {
      return err.At(key.first, util::StrCat("unknown key '", key.first.Scalar(), "'"));
    }
  }
  Classifier c;
  for (const auto& pb : root["playbooks"]) {
    if (!pb.IsMap()) return err.At(pb, "each playbook must be a mapping");
    for (const auto& key : pb) {
      const std::string& k = key.first.Scalar();
      if (k != "name" && k != "run_modes" && k != "statuses" && k != "require" && k != "flavors") {
        return err.At(key.first, util::StrCat("unknown playbook field '", k, "'"));
      }
    }
    Rule rule;
    if (!pb["name"] || !pb["name"].IsScalar() || pb["name"].Scalar().empty()) {
      return err.At(pb, "playbook without a name");
    }
    rule.playbook = pb["name"].Scalar();
    for (const Rule& other : c.rules_) {
      if (other.playbook == rule.playbook) {
        return err.At(pb["name"], util::StrCat("playbook '", rule.playbook, "' defined twice"));
      }
    }
    auto run_modes = StringList(pb["run_modes"], "run_modes", err);
    if (!run_modes.ok()) return run_modes.status();
    for (const auto& m : *run_modes) {
      if (m != "training" && m != "inference") {
        return err.At(pb["run_modes"], util::StrCat("run_modes: unknown run mode '", m, "'"));
      }
    }
    rule.run_modes = std::move(*run_modes);
    auto statuses = StringList(pb["statuses"], "statuses", err);
    if (!statuses.ok()) return statuses.status();
    for (auto& s : *statuses) {
      auto canonical = inventory::CanonicalStatus(s);
      if (!canonical)
        return err.At(pb["statuses"], util::StrCat("statuses: unknown status '", s, "'"));
      rule.statuses.emplace_back(*canonical);
    }
    if (rule.statuses.empty())
      rule.statuses.assign(std::begin(kDefaultStatuses), std::end(kDefaultStatuses));
    auto require = Patterns(pb["require"], "require", err);
    if (!require.ok()) return require.status();
    rule.require = std::move(*require);
    if (!pb["flavors"] || !pb["flavors"].IsSequence() || pb["flavors"].size() == 0) {
      return err.At(
          pb, util::StrCat("playbook '", rule.playbook, "' needs a non-empty 'flavors' list"));
    }
    for (const auto& fl : pb["flavors"]) {
      if (!fl.IsMap() || !fl["name"] || !fl["name"].IsScalar()) {
        return err.At(fl, "each flavor needs a name");
      }
      for (const auto& key : fl) {
        if (key.first.Scalar() != "name" && key.first.Scalar() != "any") {
          return err.At(key.first, util::StrCat("unknown flavor field '", key.first.Scalar(), "'"));
        }
      }
      Flavor flavor;
      flavor.name = fl["name"].Scalar();
      auto any = Patterns(fl["any"], "any", err);
      if (!any.ok()) return any.status();
      if (any->empty())
        return err.At(fl, util::StrCat("flavor '", flavor.name, "' has no patterns"));
      flavor.any = std::move(*any);
      rule.flavors.push_back(std::move(flavor));
    }
    c.rules_.push_back(std::move(rule));
  }
  return c;
} catch (const YAML::Exception& e) {
  if (e.mark.is_null()) return absl::InvalidArgumentError(util::StrCat(source, ": ", e.msg));
  return absl::InvalidArgumentError(
      util::StrCat(source, ":", e.mark.line + 1, ":", e.mark.column + 1, ": ", e.msg));
} catch (const std::exception& e) {
  return absl::InvalidArgumentError(util::StrCat(source, ": cannot read the rules: ", e.what()));
}

absl::StatusOr<Classifier> Classifier::FromFile(const std::filesystem::path& path) {
  auto text = util::ReadFile(path, 1 << 20);
  if (!text.ok()) return text.status();
  return FromYaml(*text, path.string());
}

std::optional<Match> Classifier::ClassifyReason(std::string_view reason, std::string_view status,
                                                std::string_view run_mode) const {
  if (reason.empty()) return std::nullopt;
  const re2::StringPiece text(reason.data(), reason.size());
  for (const Rule& rule : rules_) {
    if (!rule.run_modes.empty() && !run_mode.empty() && !Contains(rule.run_modes, run_mode)) {
      continue;
    }
    if (!Contains(rule.statuses, status)) continue;
    bool gated = std::all_of(rule.require.begin(), rule.require.end(),
                             [&](const auto& re) { return re2::RE2::PartialMatch(text, *re); });
    if (!gated) continue;
    for (const Flavor& flavor : rule.flavors) {
      for (const auto& re : flavor.any) {
        const int groups = re->NumberOfCapturingGroups();
        std::vector<re2::StringPiece> pieces(groups);
        std::vector<re2::RE2::Arg> args(groups);
        std::vector<re2::RE2::Arg*> arg_ptrs(groups);
        for (int i = 0; i < groups; ++i) {
          args[i] = &pieces[i];
          arg_ptrs[i] = &args[i];
        }
        if (re2::RE2::PartialMatchN(text, *re, arg_ptrs.data(), groups)) {
          Match m;
          m.playbook = rule.playbook;
          m.flavor = flavor.name;
          m.reason = std::string(reason);
          for (const auto& p : pieces) m.captures.emplace_back(p.data(), p.size());
          return m;
        }
      }
    }
  }
  return std::nullopt;
}

Classification Classifier::Classify(const inventory::Entry& entry) const {
  Classification out;
  const std::string_view run_mode = entry.parts ? std::string_view(entry.parts->run_mode) : "";
  out.reason = std::string(entry.StringField("reason"));
  if (auto m = ClassifyReason(out.reason, entry.Status(), run_mode)) {
    out.match = std::move(m);
    return out;
  }
  // Entries with only arch_overrides keep their reason per arch.
  for (const std::string& arch : entry.OverrideArchs()) {
    const inventory::Value* reason = entry.FieldForArch("reason", arch);
    if (reason == nullptr || !reason->is_string()) continue;
    if (out.reason.empty()) out.reason = reason->string;
    if (auto m = ClassifyReason(reason->string, entry.StatusForArch(arch), run_mode)) {
      m->arch = arch;
      out.match = std::move(m);
      return out;
    }
  }
  if (out.reason.empty()) {
    out.why_not = "no reason";
  } else if (!Contains(
                 std::vector<std::string>(std::begin(kDefaultStatuses), std::end(kDefaultStatuses)),
                 entry.Status()) &&
             entry.OverrideArchs().empty()) {
    out.why_not = util::StrCat("status ", entry.Status());
  } else {
    out.why_not = "reason matches no playbook";
  }
  return out;
}

std::vector<std::string> Classifier::Playbooks() const {
  std::vector<std::string> out;
  for (const Rule& r : rules_) out.push_back(r.playbook);
  return out;
}

std::vector<std::string> Classifier::Flavors(std::string_view playbook) const {
  std::vector<std::string> out;
  for (const Rule& r : rules_) {
    if (r.playbook != playbook) continue;
    for (const Flavor& f : r.flavors) out.push_back(f.name);
  }
  return out;
}

}  // namespace triage::classify
