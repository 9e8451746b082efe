#include "common/config/config.h"

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <iostream>
#include <limits>

#include "CLI/CLI.hpp"
#include "common/util/file.h"
#include "common/util/strings.h"
#include "yaml-cpp/yaml.h"

extern char** environ;

namespace triage::config {
namespace {

std::string Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

std::string RangeText(const Range& r) {
  if (r.max == std::numeric_limits<std::int64_t>::max() || r.max == kMaxSeconds) {
    return r.max == kMaxSeconds ? util::StrCat("at least ", r.min, " (at most ", r.max, ")")
                                : util::StrCat("at least ", r.min);
  }
  return util::StrCat("between ", r.min, " and ", r.max);
}

}  // namespace

std::string EnvName(std::string_view prefix, std::string_view field) {
  std::string out(prefix);
  for (char c : field) out.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(c)));
  return out;
}

std::string LegacyEnvWarning(std::string_view old_name, std::string_view new_name) {
  return util::StrCat(old_name, " is set but no longer read (ignored): use ", new_name);
}

TextCheck HostPort(bool allow_empty) {
  return [allow_empty](std::string_view v) -> std::string {
    if (v.empty()) return allow_empty ? "" : "expected host:port, got an empty value";
    const auto colon = v.rfind(':');
    if (colon == std::string_view::npos) return "expected host:port (no ':port')";
    std::string_view host = v.substr(0, colon);
    const std::string_view port = v.substr(colon + 1);
    if (host.starts_with('[') != host.ends_with(']') ||
        (!host.starts_with('[') && host.find(':') != std::string_view::npos)) {
      return "expected host:port (an IPv6 host goes in brackets: [::1]:port)";
    }
    for (char c : host) {
      if (std::isspace(static_cast<unsigned char>(c)) || c == '/') {
        return "expected host:port (the host has a space or '/')";
      }
    }
    int p = -1;
    auto res = std::from_chars(port.data(), port.data() + port.size(), p);
    if (port.empty() || res.ec != std::errc() || res.ptr != port.data() + port.size() || p < 0 ||
        p > 65535) {
      return util::StrCat("port must be a number in 0..65535, got '", port, "'");
    }
    return "";
  };
}

TextCheck OneOf(std::vector<std::string> words) {
  return [words = std::move(words)](std::string_view v) -> std::string {
    for (const auto& w : words) {
      if (v == w) return "";
    }
    return util::StrCat("expected one of ", util::StrJoin(words, ", "));
  };
}

TextCheck NonEmpty() {
  return [](std::string_view v) -> std::string { return v.empty() ? "must not be empty" : ""; };
}

void Schema::Add(std::string name, std::string* field, std::string doc, TextCheck check) {
  Field f{std::move(name), field, std::move(doc)};
  f.check = std::move(check);
  fields_.push_back(std::move(f));
}
void Schema::Add(std::string name, std::int64_t* field, std::string doc,
                 std::optional<Range> range) {
  Field f{std::move(name), field, std::move(doc)};
  f.range = range;
  fields_.push_back(std::move(f));
}
void Schema::Add(std::string name, double* field, std::string doc) {
  fields_.push_back({std::move(name), field, std::move(doc)});
}
void Schema::Add(std::string name, bool* field, std::string doc) {
  fields_.push_back({std::move(name), field, std::move(doc)});
}
void Schema::Add(std::string name, std::vector<std::string>* field, std::string doc) {
  fields_.push_back({std::move(name), field, std::move(doc)});
}

std::string Schema::DocOf(const Field& f) {
  if (!f.range) return f.doc;
  if (f.range->max == std::numeric_limits<std::int64_t>::max() || f.range->max == kMaxSeconds) {
    return util::StrCat(f.doc, " (at least ", f.range->min, ")");
  }
  return util::StrCat(f.doc, " (", f.range->min, "..", f.range->max, ")");
}

Schema::Field* Schema::Find(std::string_view name) {
  for (auto& f : fields_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

absl::Status Schema::Set(std::string_view name, std::string_view value, const std::string& source) {
  Field* f = Find(name);
  if (f == nullptr) {
    return absl::InvalidArgumentError(util::StrCat(source, ": unknown setting '", name, "'"));
  }
  const std::string v = Trim(value);
  auto bad = [&](std::string_view what) {
    return absl::InvalidArgumentError(
        util::StrCat(source, ": ", name, ": expected ", what, ", got '", value, "'"));
  };
  if (auto* s = std::get_if<std::string*>(&f->target)) {
    if (f->check) {
      if (std::string problem = f->check(value); !problem.empty()) {
        return absl::InvalidArgumentError(
            util::StrCat(source, ": ", name, ": ", problem, ", got '", value, "'"));
      }
    }
    **s = std::string(value);
  } else if (auto* i = std::get_if<std::int64_t*>(&f->target)) {
    std::int64_t x = 0;
    auto res = std::from_chars(v.data(), v.data() + v.size(), x);
    if (v.empty() || res.ec != std::errc() || res.ptr != v.data() + v.size()) {
      return bad(res.ec == std::errc::result_out_of_range ? "an integer that fits in 64 bits"
                                                          : "an integer");
    }
    if (f->range && (x < f->range->min || x > f->range->max)) {
      return absl::InvalidArgumentError(util::StrCat(
          source, ": ", name, ": out of range: ", "must be ", RangeText(*f->range), ", got ", x));
    }
    **i = x;
  } else if (auto* d = std::get_if<double*>(&f->target)) {
    char* end = nullptr;
    double x = std::strtod(v.c_str(), &end);
    if (v.empty() || end != v.c_str() + v.size()) return bad("a number");
    **d = x;
  } else if (auto* b = std::get_if<bool*>(&f->target)) {
    if (v == "true" || v == "1" || v == "yes" || v == "on") {
      **b = true;
    } else if (v == "false" || v == "0" || v == "no" || v == "off") {
      **b = false;
    } else {
      return bad("true or false");
    }
  } else if (auto* l = std::get_if<std::vector<std::string>*>(&f->target)) {
    (*l)->clear();
    std::size_t start = 0;
    while (start <= v.size()) {
      std::size_t comma = v.find(',', start);
      std::string item = Trim(std::string_view(v).substr(
          start, comma == std::string::npos ? std::string::npos : comma - start));
      if (!item.empty()) (*l)->push_back(item);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return absl::OkStatus();
}

absl::Status Schema::LoadYaml(std::string_view text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        util::StrCat(source, ":", e.mark.line + 1, ":", e.mark.column + 1, ": ", e.msg));
  }
  if (root.IsNull()) return absl::OkStatus();
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(util::StrCat(source, ": expected a mapping of settings"));
  }
  for (const auto& kv : root) {
    const auto mark = kv.first.Mark();
    const std::string where = util::StrCat(source, ":", mark.line + 1, ":", mark.column + 1);
    const std::string name = kv.first.Scalar();
    Field* f = Find(name);
    if (f == nullptr) {
      return absl::InvalidArgumentError(util::StrCat(where, ": unknown setting '", name, "'"));
    }
    if (std::holds_alternative<std::vector<std::string>*>(f->target) && kv.second.IsSequence()) {
      auto* l = std::get<std::vector<std::string>*>(f->target);
      l->clear();
      for (const auto& item : kv.second) {
        if (!item.IsScalar()) {
          return absl::InvalidArgumentError(util::StrCat(where, ": ", name, ": expected strings"));
        }
        l->push_back(item.Scalar());
      }
      continue;
    }
    if (!kv.second.IsScalar() && !kv.second.IsNull()) {
      return absl::InvalidArgumentError(
          util::StrCat(where, ": ", name, ": expected a single value"));
    }
    if (auto st = Set(name, kv.second.IsNull() ? "" : kv.second.Scalar(), where); !st.ok()) {
      return st;
    }
  }
  return absl::OkStatus();
}

absl::Status Schema::LoadEnvironment(const std::map<std::string, std::string>& environment) {
  warnings_.clear();
  for (auto& f : fields_) {
    const std::string name = EnvName(env_prefix_, f.name);
    auto it = environment.find(name);
    if (it == environment.end()) {
      const std::string legacy = EnvName(kLegacyEnvPrefix, f.name);
      if (legacy != name && environment.count(legacy) != 0) {
        warnings_.push_back(LegacyEnvWarning(legacy, name));
      }
      continue;
    }
    if (auto st = Set(f.name, it->second, util::StrCat("environment ", it->first)); !st.ok()) {
      return st;
    }
  }
  return absl::OkStatus();
}

std::string Schema::FlagText(const Field& f) {
  if (auto* s = std::get_if<std::string*>(&f.target)) {
    return util::StrCat("TEXT [", (*s)->empty() ? "\"\"" : **s, "]");
  }
  if (auto* i = std::get_if<std::int64_t*>(&f.target)) return util::StrCat("INT [", **i, "]");
  if (auto* d = std::get_if<double*>(&f.target)) return util::StrCat("FLOAT [", **d, "]");
  if (auto* b = std::get_if<bool*>(&f.target)) {
    return util::StrCat("BOOL [", **b ? "true" : "false", "]");
  }
  auto* l = std::get<std::vector<std::string>*>(f.target);
  return util::StrCat("TEXT ... [", util::StrJoin(*l, ","), "]");
}

void Schema::AddFlags(CLI::App& app) {
  app.add_option("--config", config_path_, "YAML config file (settings below as keys)");
  app.add_flag("--print-config", print_config_,
               "Print every setting with its value and meaning, then exit");
  for (auto& f : fields_) {
    std::string doc = util::StrCat(DocOf(f), " [env ", EnvName(env_prefix_, f.name), "]");
    if (std::holds_alternative<bool*>(f.target)) {
      // --name alone is true; --name=false also works.
      f.option = app.add_flag("--" + f.name, f.flag_value, doc);
    } else if (std::holds_alternative<std::vector<std::string>*>(f.target)) {
      // --name a,b and --name a b; repeated flags add up.
      f.option = app.add_option("--" + f.name, f.flag_values, doc)->delimiter(',');
    } else {
      f.option = app.add_option("--" + f.name, f.flag_value, doc);
    }
    f.option->option_text(FlagText(f));
  }
}

absl::Status Schema::Apply(const std::map<std::string, std::string>& environment) {
  if (!config_path_.empty()) {
    auto text = util::ReadFile(config_path_, 1 << 20);
    if (!text.ok()) return text.status();
    if (auto st = LoadYaml(*text, config_path_); !st.ok()) return st;
  }
  if (auto st = LoadEnvironment(environment); !st.ok()) return st;
  for (auto& f : fields_) {
    if (f.option == nullptr || f.option->count() == 0) continue;
    std::string value = std::holds_alternative<std::vector<std::string>*>(f.target)
                            ? util::StrJoin(f.flag_values, ",")
                            : f.flag_value;
    if (std::holds_alternative<bool*>(f.target) && value.empty()) value = "true";
    if (auto st = Set(f.name, value, util::StrCat("flag --", f.name)); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status Schema::Apply() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view kv = *e;
    auto eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    if (!kv.starts_with("TRIAGE_")) continue;
    env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return Apply(env);
}

std::string Schema::Describe() const {
  std::string out;
  for (const auto& f : fields_) {
    std::string value;
    if (auto* s = std::get_if<std::string*>(&f.target)) {
      value = util::StrCat("\"", **s, "\"");
    } else if (auto* i = std::get_if<std::int64_t*>(&f.target)) {
      value = util::StrCat(**i);
    } else if (auto* d = std::get_if<double*>(&f.target)) {
      value = util::StrCat(**d);
    } else if (auto* b = std::get_if<bool*>(&f.target)) {
      value = **b ? "true" : "false";
    } else if (auto* l = std::get_if<std::vector<std::string>*>(&f.target)) {
      value = util::StrCat("[", util::StrJoin(**l, ", "), "]");
    }
    util::StrAppend(&out, f.name, ": ", value, "  # ", DocOf(f), "\n");
  }
  return out;
}

std::string_view ProjectVersion() { return TRIAGE_VERSION; }

std::optional<int> ParseCommandLine(Schema& schema, CLI::App& app, int argc, char** argv,
                                    std::string_view program) {
  schema.AddFlags(app);
  app.set_version_flag("--version", util::StrCat(program, " ", TRIAGE_VERSION));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  auto st = schema.Apply();
  for (const auto& w : schema.warnings()) std::cerr << program << ": warning: " << w << "\n";
  if (!st.ok()) {
    std::cerr << program << ": " << util::MessageOf(st) << "\n";
    return 2;
  }
  if (schema.print_requested()) {
    std::cout << schema.Describe();
    return 0;
  }
  return std::nullopt;
}

}  // namespace triage::config
