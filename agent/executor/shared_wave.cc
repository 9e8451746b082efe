#include "agent/executor/shared_wave.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>

#include "nlohmann/json.hpp"

#include "agent/workspace/workspace.h"
#include "common/command/shared_scope.h"
#include "common/util/file.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::agent {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr std::uintmax_t kMaxPythonBytes = 4 << 20;

std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> out;
  for (std::size_t start = 0;;) {
    const std::size_t at = s.find(sep, start);
    out.emplace_back(s.substr(start, at == std::string_view::npos ? s.npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

// "tools/mini_images.py" -> "tools.mini_images"; "tools/__init__.py" -> "tools"; "" when not
// a Python module.
std::string ModuleOf(std::string path) {
  if (!path.ends_with(".py")) return "";
  path.resize(path.size() - 3);
  if (path.ends_with("/__init__")) path.resize(path.size() - 9);
  std::replace(path.begin(), path.end(), '/', '.');
  return path;
}

// A relative module ("..x.y") as an absolute one: resolved against `package` (the importing
// file's package below the tt_forge_models root, dotted) when known, else its dots dropped (a
// loader's "from ...tools.x" climbs to the root).
std::string Absolute(const std::string& module, const std::optional<std::string>& package) {
  const std::size_t dots = module.find_first_not_of('.');
  const std::size_t n = dots == std::string::npos ? module.size() : dots;
  std::string rest = module.substr(n);
  if (n == 0 || !package) return rest;
  std::vector<std::string> parts =
      package->empty() ? std::vector<std::string>{} : Split(*package, '.');
  for (std::size_t up = 1; up < n && !parts.empty(); ++up) parts.pop_back();
  if (!rest.empty()) parts.push_back(rest);
  return util::StrJoin(parts, ".");
}

// The modules one Python source imports; "from a import b, c" gives a, a.b and a.c (b may be a
// submodule).
std::vector<std::string> ImportsOf(const std::string& text,
                                   const std::optional<std::string>& package) {
  std::vector<std::string> out;
  std::vector<std::string> lines = Split(text, '\n');
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::string line(util::TrimWhitespace(lines[i]));
    if (!line.starts_with("from ") && !line.starts_with("import ")) continue;
    // A parenthesised or continued name list goes on to the closing line.
    while (((line.find('(') != std::string::npos && line.find(')') == std::string::npos) ||
            line.ends_with("\\")) &&
           i + 1 < lines.size()) {
      if (line.ends_with("\\")) line.pop_back();
      line += " ";
      line += util::TrimWhitespace(lines[++i]);
    }
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    for (char& c : line) {
      if (c == '(' || c == ')' || c == ',') c = ' ';
    }
    std::vector<std::string> words;
    for (auto& w : Split(line, ' ')) {
      if (!w.empty()) words.push_back(w);
    }
    auto strip = [&package](const std::string& m) { return Absolute(m, package); };
    if (words.size() >= 2 && words[0] == "import") {
      for (std::size_t k = 1; k < words.size(); ++k) {
        if (words[k] == "as") {
          ++k;
          continue;
        }
        out.push_back(strip(words[k]));
      }
    } else if (words.size() >= 4 && words[0] == "from" && words[2] == "import") {
      const std::string base = strip(words[1]);
      out.push_back(base);
      for (std::size_t k = 3; k < words.size(); ++k) {
        if (words[k] == "as") {
          ++k;
          continue;
        }
        out.push_back(base.empty() ? words[k] : base + "." + words[k]);
      }
    }
  }
  return out;
}

bool Matches(const std::string& imported, const std::set<std::string>& modules) {
  const std::string m = "." + imported + ".";
  return std::any_of(modules.begin(), modules.end(), [&](const std::string& d) {
    return m.find("." + d + ".") != std::string::npos;
  });
}

bool FileImports(const fs::path& file, const std::set<std::string>& modules,
                 const std::optional<std::string>& package = std::nullopt) {
  auto text = util::ReadFile(file, kMaxPythonBytes);
  if (!text.ok()) return false;
  for (const auto& m : ImportsOf(*text, package)) {
    if (Matches(m, modules)) return true;
  }
  return false;
}

bool SafeRelative(const std::string& p) {
  if (p.empty() || p.front() == '/') return false;
  for (const auto& part : Split(p, '/')) {
    if (part == "..") return false;
  }
  return true;
}

std::uint64_t Fnv(std::string_view s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

std::set<std::string> ChangedModules(const fs::path& forge_root,
                                     const std::vector<std::string>& files) {
  std::set<std::string> modules;
  for (const auto& f : files) {
    const std::string prefix = "tt_forge_models:";
    if (!f.starts_with(prefix)) continue;
    if (std::string m = ModuleOf(f.substr(prefix.size())); !m.empty()) modules.insert(m);
  }
  if (modules.empty()) return modules;
  // The shared modules that import a changed one are changed for their importers too.
  struct Shared {
    fs::path file;
    std::string package;  // dotted, "" at the root
  };
  std::map<std::string, Shared> shared;  // module -> its file
  std::error_code ec;
  for (fs::directory_iterator it(forge_root, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec) && it->path().extension() == ".py") {
      shared[ModuleOf(it->path().filename().string())] = {it->path(), ""};
    }
  }
  for (fs::recursive_directory_iterator it(forge_root / "tools", ec), end; !ec && it != end;
       it.increment(ec)) {
    if (!it->is_regular_file(ec) || it->path().extension() != ".py") continue;
    const fs::path rel = fs::relative(it->path(), forge_root, ec);
    std::string package = rel.parent_path().generic_string();
    std::replace(package.begin(), package.end(), '/', '.');
    shared[ModuleOf(rel.generic_string())] = {it->path(), package};
  }
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& [module, s] : shared) {
      if (module.empty() || modules.count(module) || !FileImports(s.file, modules, s.package)) {
        continue;
      }
      modules.insert(module);
      grew = true;
    }
  }
  return modules;
}

bool DirImports(const fs::path& dir, const std::set<std::string>& modules) {
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec) && it->path().extension() == ".py" &&
        FileImports(it->path(), modules)) {
      return true;
    }
  }
  return false;
}

absl::StatusOr<v1::ShardResult> RunSharedWave(ExecContext& ctx, const VerifyFn& verify) {
  const v1::ShardSpec& spec = *ctx.spec;
  const auto param = spec.params().find(std::string(command::kWaveParam));
  if (param == spec.params().end()) {
    return absl::InvalidArgumentError("params.wave: missing");
  }
  const json wave = json::parse(param->second, nullptr, /*allow_exceptions=*/false);
  if (!wave.is_object() || !wave.contains("candidates") || !wave["candidates"].is_array()) {
    return absl::InvalidArgumentError("params.wave: not a JSON object with a candidates array");
  }
  std::vector<std::string> files(spec.fan_out().shared_files().begin(),
                                 spec.fan_out().shared_files().end());
  // A tt-xla change (its Python package) reaches every test through the runner.
  const bool every = std::any_of(files.begin(), files.end(),
                                 [](const std::string& f) { return f.starts_with("tt-xla:"); });
  const fs::path forge = ctx.workspace->forge_root();
  const std::set<std::string> modules = ChangedModules(forge, files);
  std::vector<std::string> pre_forge;  // forge paths the lead changed
  for (const auto& fe : spec.pre_apply()) {
    if (fe.repo() == "tt_forge_models") pre_forge.push_back(fe.path());
  }
  const int sample = std::max(0, wave.value("sample", 0));
  std::vector<v1::ShardEntry> selected, passing;
  std::map<std::string, std::string> loader_of;  // file + key -> loader dir
  int not_affected = 0, candidates = 0;
  std::map<std::string, bool> affected_dir;
  for (const auto& c : wave["candidates"]) {
    if (!c.is_object()) continue;
    ++candidates;
    const std::string loader = c.value("loader", "");
    if (!SafeRelative(loader)) {
      ++not_affected;
      continue;
    }
    const std::string dir = loader.substr(0, loader.rfind('/') + 1);
    auto [at, fresh] = affected_dir.try_emplace(dir, false);
    if (fresh) {
      const std::string forge_prefix = "third_party/tt_forge_models/";
      const std::string in_forge =
          dir.starts_with(forge_prefix) ? dir.substr(forge_prefix.size()) : dir;
      at->second = every || DirImports(ctx.workspace->root() / dir, modules) ||
                   std::any_of(pre_forge.begin(), pre_forge.end(),
                               [&](const std::string& p) { return p.starts_with(in_forge); });
    }
    if (!at->second) {
      ++not_affected;
      continue;
    }
    v1::ShardEntry e;
    e.set_file(c.value("file", ""));
    e.set_key(c.value("key", ""));
    e.set_status(c.value("status", ""));
    e.set_reason(c.value("reason", ""));
    e.set_cluster(c.value("cluster", ""));
    loader_of[e.file() + "\n" + e.key()] = dir;
    (c.value("selected", false) ? selected : passing).push_back(std::move(e));
  }
  // The passing sample: one per loader first, in a stable order.
  std::sort(passing.begin(), passing.end(), [](const v1::ShardEntry& a, const v1::ShardEntry& b) {
    return std::make_pair(Fnv(a.key()), a.key()) < std::make_pair(Fnv(b.key()), b.key());
  });
  std::vector<const v1::ShardEntry*> check;
  for (const auto& e : selected) check.push_back(&e);
  std::set<std::string> loaders_taken;
  std::vector<const v1::ShardEntry*> rest;
  int taken = 0;
  for (const auto& e : passing) {
    if (taken < sample && loaders_taken.insert(loader_of[e.file() + "\n" + e.key()]).second) {
      check.push_back(&e);
      ++taken;
    } else {
      rest.push_back(&e);
    }
  }
  for (const auto* e : rest) {
    if (taken >= sample) break;
    check.push_back(e);
    ++taken;
  }
  if (ctx.progress) {
    ctx.progress("wave", "",
                 {util::StrCat(check.size(), " of ", candidates, " candidates import ",
                               util::StrJoin(files, ", "), " or share its loader")});
  }
  v1::ShardResult result;
  result.set_status(v1::ShardResult::SUCCEEDED);
  json checked = json::array();
  if (!check.empty()) {
    auto farm = verify(check);
    if (!farm.ok()) return farm.status();
    std::map<std::string, const v1::EntryOutcome*> by_entry;
    for (const auto& o : farm->entries()) by_entry[o.file() + "\n" + o.key()] = &o;
    for (std::size_t k = 0; k < check.size(); ++k) {
      const v1::ShardEntry* e = check[k];
      auto o = by_entry.find(e->file() + "\n" + e->key());
      const bool sel = k < selected.size();  // the selected ones come first
      checked.push_back({{"file", e->file()},
                         {"key", e->key()},
                         {"status", e->status()},
                         {"selected", sel},
                         {"verdict", o == by_entry.end() ? "" : o->second->verdict()},
                         {"reason", o == by_entry.end() ? "" : o->second->reason()}});
    }
    for (const auto& ev : farm->evidence()) *result.add_evidence() = ev;
  }
  const json findings = {{"lead", wave.value("lead", "")},
                         {"shared_files", files},
                         {"candidates", candidates},
                         {"not_affected", not_affected},
                         {"checked", std::move(checked)}};
  v1::Evidence* ev = result.add_evidence();
  ev->set_name("wave.json");
  ev->set_kind("wave");
  ev->set_content(findings.dump(2) + "\n");
  return result;
}

}  // namespace triage::agent
