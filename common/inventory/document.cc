#include "common/inventory/document.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "common/inventory/schema.h"
#include "common/util/strings.h"
#include "common/util/text.h"
#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/exceptions.h"
#include "yaml-cpp/mark.h"
#include "yaml-cpp/parser.h"

namespace triage::inventory {
namespace {

using util::Diagnostic;
using util::Severity;

struct Duplicate {
  int depth;
  std::string key;
  SourcePos pos;
  int first_line;
};

struct TreeProblem {
  SourcePos pos;
  std::string message;
};

// Thrown from the event handler when a collection opens deeper than kMaxNesting: yaml-cpp
// recurses once per level, so parsing stops before the depth can exhaust the stack.
struct TooDeep {
  SourcePos pos;
};

// Builds a Value tree from yaml-cpp parser events, keeping the position of every key and value.
// Anchors, aliases and explicit tags are reported: tt-xla's files use none, and an alias would
// make an in-place edit change more than one entry.
class TreeBuilder : public YAML::EventHandler {
 public:
  explicit TreeBuilder(const std::string& bytes) : bytes_(bytes) {}

  void OnDocumentStart(const YAML::Mark& mark) override {
    ++documents_;
    if (documents_ > 1) {
      problems_.push_back({Pos(mark), "more than one YAML document in the file"});
    }
  }
  void OnDocumentEnd() override {}
  int documents() const { return documents_; }

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    CheckAnchor(mark, anchor);
    Value v;
    v.pos = Pos(mark);
    Add(std::move(v));
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override {
    problems_.push_back({Pos(mark), "aliases (*name) are not supported in test-config files"});
    Value v;
    v.pos = Pos(mark);
    Add(std::move(v));
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    CheckAnchor(mark, anchor);
    Value v;
    if (tag == "?") {
      v = ResolvePlainScalar(value);
    } else if (tag == "!") {
      v = Value::String(value);
      v.quoted = true;
      if (mark.pos >= 0 && static_cast<std::size_t>(mark.pos) < bytes_.size()) {
        char c = bytes_[mark.pos];
        if (c == '"' || c == '\'') v.quote = c;
      }
      if (v.quote != 0) CheckQuoted(mark, v.quote);
    } else {
      problems_.push_back({Pos(mark), util::StrCat("explicit tag '", tag, "' is not supported")});
      v = Value::String(value);
    }
    v.pos = Pos(mark);
    Add(std::move(v));
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value style) override {
    CheckAnchor(mark, anchor);
    CheckDepth(mark);
    Frame f;
    f.value.kind = Value::Kind::kList;
    f.value.pos = Pos(mark);
    f.value.flow = style == YAML::EmitterStyle::Flow;
    stack_.push_back(std::move(f));
  }
  void OnSequenceEnd() override { Pop(); }

  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value style) override {
    CheckAnchor(mark, anchor);
    CheckDepth(mark);
    Frame f;
    f.value.kind = Value::Kind::kMap;
    f.value.pos = Pos(mark);
    f.value.flow = style == YAML::EmitterStyle::Flow;
    stack_.push_back(std::move(f));
  }
  void OnMapEnd() override { Pop(); }

  Value TakeRoot() { return std::move(root_); }
  std::vector<TreeProblem>& problems() { return problems_; }
  std::vector<Duplicate>& duplicates() { return duplicates_; }

 private:
  struct Frame {
    Value value;
    bool has_key = false;
    std::string key;
    SourcePos key_pos;
    std::unordered_map<std::string, int> seen;  // key -> line of first occurrence
  };

  static SourcePos Pos(const YAML::Mark& m) { return {m.line, m.column}; }

  void CheckDepth(const YAML::Mark& mark) {
    if (stack_.size() >= kMaxNesting) throw TooDeep{Pos(mark)};
  }

  void CheckAnchor(const YAML::Mark& mark, YAML::anchor_t anchor) {
    if (anchor != YAML::NullAnchor) {
      problems_.push_back({Pos(mark), "anchors (&name) are not supported in test-config files"});
    }
  }

  // yaml-cpp accepts an unclosed quote at the end of the input; tt-xla's files never continue a
  // quoted string over several lines, so both are errors here.
  void CheckQuoted(const YAML::Mark& mark, char quote) {
    std::size_t i = static_cast<std::size_t>(mark.pos) + 1;
    bool closed = false;
    bool newline = false;
    while (i < bytes_.size()) {
      char c = bytes_[i];
      if (c == '\n') newline = true;
      if (quote == '"' && c == '\\') {
        i += 2;
        continue;
      }
      if (c == quote) {
        if (quote == '\'' && i + 1 < bytes_.size() && bytes_[i + 1] == '\'') {
          i += 2;
          continue;
        }
        closed = true;
        break;
      }
      ++i;
    }
    if (!closed) {
      problems_.push_back({Pos(mark), util::StrCat("unclosed ", quote == '"' ? "double" : "single",
                                                   "-quoted string")});
    } else if (newline) {
      problems_.push_back({Pos(mark),
                           "quoted string continues over several lines (unclosed "
                           "quote?); test-config strings are single-line"});
    }
  }

  void Add(Value v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return;
    }
    Frame& top = stack_.back();
    if (top.value.kind == Value::Kind::kList) {
      top.value.list.push_back(std::move(v));
      return;
    }
    if (!top.has_key) {
      if (v.kind == Value::Kind::kList || v.kind == Value::Kind::kMap) {
        problems_.push_back({v.pos, "complex mapping keys are not supported"});
      }
      top.has_key = true;
      top.key = v.kind == Value::Kind::kNull ? "" : v.string;
      top.key_pos = v.pos;
      return;
    }
    top.has_key = false;
    auto [it, inserted] = top.seen.emplace(top.key, top.key_pos.line);
    if (!inserted) {
      duplicates_.push_back({static_cast<int>(stack_.size()), top.key, top.key_pos, it->second});
    }
    top.value.map.push_back({std::move(top.key), top.key_pos, std::move(v)});
  }

  void Pop() {
    Value v = std::move(stack_.back().value);
    stack_.pop_back();
    Add(std::move(v));
  }

  const std::string& bytes_;
  std::vector<Frame> stack_;
  Value root_;
  int documents_ = 0;
  std::vector<TreeProblem> problems_;
  std::vector<Duplicate> duplicates_;
};

bool IsConflictMarker(std::string_view line) {
  for (std::string_view marker : {"<<<<<<<", "=======", ">>>>>>>", "|||||||"}) {
    if (line.starts_with(marker)) {
      std::string_view rest = line.substr(marker.size());
      if (rest.empty() || rest[0] == ' ') return true;
    }
  }
  return false;
}

// A value that opens a quote on a line and does not close it there: tt-xla's strings are all
// single-line, and yaml-cpp would otherwise read on into the next entries and report a
// confusing error far from the cause.
std::optional<std::size_t> UnclosedQuoteAt(std::string_view line) {
  std::size_t i = 0;
  while (i < line.size() && line[i] == ' ') ++i;
  if (i >= line.size() || line[i] == '#') return std::nullopt;
  std::size_t value;
  if (line.substr(i).starts_with("- ")) {
    value = i + 2;
  } else {
    if (line[i] == '"' || line[i] == '\'') return std::nullopt;  // quoted keys: leave to yaml-cpp
    std::size_t colon = line.find(": ", i);
    if (colon == std::string_view::npos) return std::nullopt;
    value = colon + 2;
  }
  while (value < line.size() && line[value] == ' ') ++value;
  if (value >= line.size()) return std::nullopt;
  const char quote = line[value];
  if (quote != '"' && quote != '\'') return std::nullopt;
  for (std::size_t k = value + 1; k < line.size(); ++k) {
    if (quote == '"' && line[k] == '\\') {
      ++k;
    } else if (line[k] == quote) {
      if (quote == '\'' && k + 1 < line.size() && line[k + 1] == '\'') {
        ++k;
        continue;
      }
      return std::nullopt;
    }
  }
  return value;
}

}  // namespace

std::string FrameworkOfPath(std::string_view path) {
  const std::string_view marker = "test_config/";
  const auto at = path.find(marker);
  if (at == std::string_view::npos) return "";
  const std::string_view rest = path.substr(at + marker.size());
  const auto slash = rest.find('/');
  return slash == std::string_view::npos ? "" : std::string(rest.substr(0, slash));
}

std::string_view Entry::StringField(std::string_view name) const {
  const Value* v = Field(name);
  return v != nullptr && v->is_string() ? std::string_view(v->string) : std::string_view();
}

std::string_view Entry::Status() const {
  const Value* v = Field("status");
  if (v == nullptr || !v->is_string()) return "UNSPECIFIED";
  auto canonical = CanonicalStatus(v->string);
  return canonical ? *canonical : std::string_view(v->string);
}

const Value* Entry::FieldForArch(std::string_view name, std::string_view arch) const {
  if (const Value* overrides = Field("arch_overrides")) {
    if (const Value* fields = overrides->Find(arch)) {
      if (const Value* v = fields->Find(name)) return v;
    }
  }
  return Field(name);
}

std::vector<std::string> Entry::FieldNamesForArch(std::string_view arch) const {
  std::vector<std::string> names;
  auto add = [&](const Value& fields) {
    for (const auto& item : fields.map) {
      if (item.key != "arch_overrides" &&
          std::find(names.begin(), names.end(), item.key) == names.end()) {
        names.push_back(item.key);
      }
    }
  };
  add(value);
  if (const Value* overrides = Field("arch_overrides")) {
    if (const Value* fields = overrides->Find(arch); fields != nullptr && fields->is_map()) {
      add(*fields);
    }
  }
  return names;
}

std::string_view Entry::StatusForArch(std::string_view arch) const {
  const Value* v = FieldForArch("status", arch);
  if (v == nullptr || !v->is_string()) return "UNSPECIFIED";
  auto canonical = CanonicalStatus(v->string);
  return canonical ? *canonical : std::string_view(v->string);
}

std::vector<std::string> Entry::OverrideArchs() const {
  std::vector<std::string> archs;
  if (const Value* overrides = Field("arch_overrides"); overrides && overrides->is_map()) {
    for (const auto& item : overrides->map) archs.push_back(item.key);
  }
  return archs;
}

Document Document::Parse(std::string path, std::string bytes, const ParseOptions& options) {
  Document doc;
  doc.path_ = std::move(path);
  doc.bytes_ = std::make_shared<const std::string>(std::move(bytes));
  if (options.grammar != nullptr && options.grammar != &DefaultKeyGrammar()) {
    doc.grammar_ = std::make_shared<const KeyGrammar>(*options.grammar);
  }
  const std::string& text = *doc.bytes_;
  doc.line_starts_.push_back(0);
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n' && i + 1 < text.size()) doc.line_starts_.push_back(i + 1);
  }
  if (text.empty()) doc.line_starts_.clear();

  // Where the file sits tells the framework and, by its name, run mode and parallelism.
  std::string_view p = doc.path_;
  doc.framework_ = FrameworkOfPath(p);
  std::string_view base = p.substr(p.rfind('/') == std::string_view::npos ? 0 : p.rfind('/') + 1);
  for (std::string_view mode : {"inference", "training"}) {
    for (std::string_view par : {"single_device", "data_parallel", "tensor_parallel"}) {
      if (base == util::StrCat("test_config_", mode, "_", par, ".yaml")) {
        doc.run_mode_ = std::string(mode);
        doc.parallelism_ = std::string(par);
      }
    }
  }

  if (!doc.PreCheck(options)) return doc;

  std::istringstream in(text);
  TreeBuilder builder(text);
  try {
    YAML::Parser parser(in);
    // One document is read; the start of a second is already an error, and yaml-cpp 0.7 can
    // start documents forever on some malformed input (a stray ',' at the top level).
    while (parser.HandleNextDocument(builder) && builder.documents() < 2) {
    }
  } catch (const TooDeep& e) {
    doc.AddError(e.pos, util::StrCat("nested deeper than ", kMaxNesting, " levels"));
    return doc;
  } catch (const YAML::Exception& e) {
    doc.AddError({e.mark.line, e.mark.column}, util::StrCat("YAML syntax error: ", e.msg));
    return doc;
  } catch (const std::exception& e) {
    // Whatever else the parser throws (out of memory, ...): still an error about this file.
    doc.AddError({}, util::StrCat("cannot parse: ", e.what()));
    return doc;
  }
  for (auto& problem : builder.problems()) doc.AddError(problem.pos, problem.message);
  for (auto& dup : builder.duplicates()) {
    std::string what = dup.depth == 2 ? "duplicate entry key" : "duplicate key";
    if (dup.depth == 1) what = "duplicate top-level key";
    if (dup.depth >= 3) what = "duplicate field";
    doc.AddError(dup.pos,
                 util::StrCat(what, " '", dup.key, "' (first at line ", dup.first_line + 1, ")"));
  }
  doc.Build(builder.TakeRoot());
  util::SortDiagnostics(doc.diagnostics_);
  return doc;
}

bool Document::PreCheck(const ParseOptions& options) {
  const std::string& text = *bytes_;
  if (text.size() > options.max_bytes) {
    AddError({}, util::StrCat("file is ", text.size(), " bytes, over the limit of ",
                              options.max_bytes, " bytes"));
    return false;
  }
  if (auto nul = text.find('\0'); nul != std::string::npos) {
    util::LineCol lc = util::LineColAt(text, nul);
    AddError({lc.line - 1, lc.col - 1}, "contains a NUL byte");
    return false;
  }
  if (auto bad = util::FirstInvalidUtf8(text)) {
    util::LineCol lc = util::LineColAt(text, *bad);
    AddError({lc.line - 1, lc.col - 1},
             util::StrCat("invalid UTF-8 byte 0x",
                          util::Hex(static_cast<unsigned char>(text[*bad]), 2)));
    return false;
  }
  // Line endings: one error for the whole file. A CRLF file is a mistake in tt-xla, and an edit
  // must never rewrite line endings, so such a file is neither read nor written.
  if (auto cr = text.find('\r'); cr != std::string::npos) {
    util::LineCol lc = util::LineColAt(text, cr);
    std::size_t crlf = 0, lone = 0;
    for (std::size_t i = cr; i < text.size(); ++i) {
      if (text[i] != '\r') continue;
      (i + 1 < text.size() && text[i + 1] == '\n' ? crlf : lone)++;
    }
    if (lone == 0) {
      AddError({lc.line - 1, lc.col - 1},
               util::StrCat("uses CRLF line endings (first at line ", lc.line, ", ", crlf,
                            " line(s) in all); test-config files use LF only"));
    } else {
      AddError({lc.line - 1, lc.col - 1},
               util::StrCat("contains carriage return characters (first at line ", lc.line, ", ",
                            crlf + lone, " in all); test-config files use LF only"));
    }
    return false;
  }
  bool fatal = false;
  for (int i = 0; i < line_count(); ++i) {
    std::string_view line = Line(i);
    if (IsConflictMarker(line)) {
      AddError({i, 0}, util::StrCat("merge conflict marker '", line.substr(0, 7), "'"));
      fatal = true;
    }
    for (std::size_t c = 0; c < line.size() && (line[c] == ' ' || line[c] == '\t'); ++c) {
      if (line[c] == '\t') {
        AddError({i, static_cast<int>(c)}, "tab character in indentation (YAML needs spaces)");
        fatal = true;
        break;
      }
    }
    if (auto open = UnclosedQuoteAt(line)) {
      AddError({i, static_cast<int>(*open)},
               util::StrCat("unclosed ", line[*open] == '"' ? "double" : "single",
                            "-quoted string (test-config strings are single-line)"));
      fatal = true;
    }
  }
  if (!text.empty() && text.back() != '\n') {
    AddWarning({line_count() - 1, 0}, "file does not end with a newline");
  }
  return !fatal;
}

void Document::Build(Value root) {
  if (root.is_null()) return;  // empty file
  if (!root.is_map()) {
    AddError(root.pos, util::StrCat("top level must be a mapping with '", kTestConfigRoot,
                                    "', got a ", root.KindName()));
    return;
  }
  const bool placeholders_file = std::string_view(path_).ends_with("test_config_placeholders.yaml");
  const std::string_view expected = placeholders_file ? kPlaceholderRoot : kTestConfigRoot;
  MapItem* section = nullptr;
  for (MapItem& item : root.map) {
    if (item.key == expected || item.key == kTestConfigRoot || item.key == kPlaceholderRoot) {
      if (section == nullptr) section = &item;
      continue;
    }
    AddError(item.key_pos,
             util::StrCat("unknown top-level key '", item.key, "' (expected '", expected, "')"));
  }
  if (section == nullptr) return;
  root_key_ = section->key;
  // Where the section ends: the next top-level key, or the end of the file.
  int bound = line_count() - 1;
  for (const MapItem& item : root.map) {
    if (item.key_pos.line > section->key_pos.line) {
      bound = std::min(bound, item.key_pos.line - 1);
    }
  }
  Value& body = section->value;
  if (body.is_null()) return;
  if (!body.is_map() || body.flow) {
    AddError(body.pos.known() ? body.pos : section->key_pos,
             util::StrCat("'", root_key_, "' must be a block mapping of entries"));
    return;
  }
  entries_.reserve(body.map.size());
  for (std::size_t i = 0; i < body.map.size(); ++i) {
    MapItem& item = body.map[i];
    Entry entry;
    entry.key = item.key;
    entry.pos = item.key_pos;
    entry.first_line = item.key_pos.line;
    int end = i + 1 < body.map.size() ? body.map[i + 1].key_pos.line - 1 : bound;
    while (end > entry.first_line && util::IsBlankOrComment(Line(end))) --end;
    entry.last_line = end;
    entry.value = std::move(item.value);
    CheckEntry(entry);
    entries_.push_back(std::move(entry));
  }
}

void Document::CheckEntry(Entry& entry) {
  const bool placeholder = root_key_ == kPlaceholderRoot;
  if (entry.key.empty()) {
    AddError(entry.pos, "empty entry key");
    return;
  }
  if (!placeholder) {
    auto parts = ParseKey(entry.key, grammar());
    if (!parts.ok()) {
      AddError(entry.pos, std::string(parts.status().message()));
    } else {
      entry.loader = parts->LoaderPath();
      // The runner keys tests by their id, not by file, so a misfiled key still runs: a
      // warning, not an error.
      if (!run_mode_.empty() && parts->run_mode != run_mode_) {
        AddWarning(entry.pos, util::StrCat("key '", entry.key, "' has run mode '", parts->run_mode,
                                           "' but this file holds ", run_mode_, " entries"));
      }
      // A grammar without a parallelism segment: the file name's is not the key's to match.
      if (!parallelism_.empty() && !parts->parallelism.empty() &&
          parts->parallelism != parallelism_) {
        AddWarning(entry.pos,
                   util::StrCat("key '", entry.key, "' has parallelism '", parts->parallelism,
                                "' but this file holds ", parallelism_, " entries"));
      }
      entry.parts = std::move(*parts);
    }
  }
  const Value& v = entry.value;
  if (v.is_null()) {
    AddError(entry.pos, util::StrCat("entry '", entry.key, "' has no fields"));
    return;
  }
  if (!v.is_map()) {
    AddError(v.pos, util::StrCat("entry '", entry.key, "' must be a mapping of fields, got a ",
                                 v.KindName()));
    return;
  }
  if (v.flow) {
    AddError(v.pos, util::StrCat("entry '", entry.key,
                                 "' is written in flow style ({...}); use one field per line"));
  }
  for (const MapItem& field : v.map) {
    if (FindField(field.key) == nullptr) {
      AddError(field.key_pos, util::StrCat("unknown field '", field.key, "'"));
      continue;
    }
    std::vector<ValueProblem> problems;
    CheckField(field.key, field.value, /*in_override=*/false, problems);
    for (auto& problem : problems) {
      AddError(problem.pos.known() ? problem.pos : field.key_pos, std::move(problem.message));
    }
    if (field.key == "arch_overrides" && field.value.is_map()) {
      if (field.value.flow) {
        AddError(field.value.pos, "arch_overrides must be a block mapping");
      }
      for (const MapItem& arch : field.value.map) {
        if (arch.value.is_map() && arch.value.flow) {
          AddError(arch.value.pos,
                   util::StrCat("arch_overrides.", arch.key, " must be a block mapping"));
        }
        if (arch.value.is_map() && arch.value.map.empty()) {
          AddError(arch.key_pos, util::StrCat("arch_overrides.", arch.key, " is empty"));
        }
      }
    }
  }
}

const Entry* Document::Find(std::string_view key) const {
  for (const Entry& e : entries_) {
    if (e.key == key) return &e;
  }
  return nullptr;
}

std::string_view Document::Line(int i) const {
  const std::string& text = *bytes_;
  std::size_t start = line_starts_[i];
  std::size_t end = text.find('\n', start);
  if (end == std::string::npos) end = text.size();
  return std::string_view(text).substr(start, end - start);
}

std::string Document::EntryText(const Entry& e) const {
  std::string out;
  for (int i = e.first_line; i <= e.last_line; ++i) util::StrAppend(&out, Line(i), "\n");
  return out;
}

bool Document::ends_with_newline() const { return !bytes_->empty() && bytes_->back() == '\n'; }

void Document::AddError(SourcePos pos, std::string message) {
  diagnostics_.push_back(Diagnostic{path_, pos.known() ? pos.line + 1 : 0,
                                    pos.known() ? pos.col + 1 : 0, Severity::kError,
                                    std::move(message)});
}

void Document::AddWarning(SourcePos pos, std::string message) {
  diagnostics_.push_back(Diagnostic{path_, pos.known() ? pos.line + 1 : 0,
                                    pos.known() ? pos.col + 1 : 0, Severity::kWarning,
                                    std::move(message)});
}

}  // namespace triage::inventory
