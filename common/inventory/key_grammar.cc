#include "common/inventory/key_grammar.h"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <utility>

#include "common/util/strings.h"

namespace triage::inventory {
namespace {

constexpr std::string_view kFunction = "test_all_models_torch";
constexpr std::string_view kParallelismIds[] = {"single_device", "data_parallel",
                                                "tensor_parallel"};
constexpr std::string_view kRunModeIds[] = {"inference", "training"};

// ---------------------------------------------------------------------------------------------
// Python tokens: enough of Python's lexer to find logical lines, brackets and string literals.

enum class Tok { kName, kString, kOther, kNewline };

struct Token {
  Tok kind = Tok::kOther;
  std::string_view text;  // kName, kOther: the source text
  std::string value;      // kString: the decoded value
  bool plain = false;     // kString: a literal whose value is known (no f/b prefix, known escapes)
  int line = 0;           // 1-based
};

bool IsNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }

// A string prefix: r, u, b, f and their two-letter combinations, in any case.
bool IsStringPrefix(std::string_view s, bool& raw, bool& plain) {
  if (s.size() > 2) return false;
  raw = false;
  plain = true;
  for (char c : s) {
    switch (c | 0x20) {
      case 'r':
        raw = true;
        break;
      case 'u':
        break;
      case 'b':
      case 'f':
        plain = false;
        break;
      default:
        return false;
    }
  }
  return true;
}

class Lexer {
 public:
  Lexer(std::string_view text, std::string_view path) : text_(text), path_(path) {}

  absl::StatusOr<std::vector<Token>> Run() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\f' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else if (c == '\\' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '\n') {
        pos_ += 2;
        ++line_;
      } else if (c == '\n') {
        if (open_.empty() && !tokens_.empty() && tokens_.back().kind != Tok::kNewline) {
          Push(Tok::kNewline, pos_, 1);
        }
        ++pos_;
        ++line_;
      } else if (IsNameStart(c)) {
        const std::size_t start = pos_;
        while (pos_ < text_.size() && IsNameChar(text_[pos_])) ++pos_;
        bool raw = false, plain = false;
        if (pos_ < text_.size() && (text_[pos_] == '"' || text_[pos_] == '\'') &&
            IsStringPrefix(text_.substr(start, pos_ - start), raw, plain)) {
          if (auto s = String(raw, plain); !s.ok()) return s;
        } else {
          Push(Tok::kName, start, pos_ - start);
        }
      } else if (c == '"' || c == '\'') {
        if (auto s = String(/*raw=*/false, /*plain=*/true); !s.ok()) return s;
      } else if (c >= '0' && c <= '9') {
        const std::size_t start = pos_;
        while (pos_ < text_.size() && (IsNameChar(text_[pos_]) || text_[pos_] == '.')) ++pos_;
        Push(Tok::kOther, start, pos_ - start);
      } else {
        if (auto s = Bracket(c); !s.ok()) return s;
        Push(Tok::kOther, pos_, 1);
        ++pos_;
      }
    }
    if (!open_.empty()) {
      return Error(open_.back().second, util::StrCat("'", open_.back().first, "' is never closed"));
    }
    if (!tokens_.empty() && tokens_.back().kind != Tok::kNewline) Push(Tok::kNewline, pos_, 0);
    return std::move(tokens_);
  }

 private:
  absl::Status Error(int line, std::string_view why) const {
    return absl::InvalidArgumentError(util::StrCat(path_, ":", line, ": ", why));
  }

  void Push(Tok kind, std::size_t at, std::size_t size) {
    Token t;
    t.kind = kind;
    t.text = text_.substr(at, size);
    t.line = line_;
    tokens_.push_back(std::move(t));
  }

  absl::Status Bracket(char c) {
    if (c == '(' || c == '[' || c == '{') {
      open_.emplace_back(c, line_);
      return absl::OkStatus();
    }
    const char want = c == ')' ? '(' : c == ']' ? '[' : c == '}' ? '{' : '\0';
    if (want == '\0') return absl::OkStatus();
    if (open_.empty()) return Error(line_, util::StrCat("'", c, "' closes no bracket"));
    if (open_.back().first != want) {
      return Error(line_, util::StrCat("'", c, "' does not close '", open_.back().first, "' (line ",
                                       open_.back().second, ")"));
    }
    open_.pop_back();
    return absl::OkStatus();
  }

  // A string literal at pos_ (its quote); raw: r"...", plain: its value can be known.
  absl::Status String(bool raw, bool plain) {
    const char quote = text_[pos_];
    const bool triple = text_.substr(pos_, 3) == std::string(3, quote);
    const int first_line = line_;
    pos_ += triple ? 3 : 1;
    Token t;
    t.kind = Tok::kString;
    t.line = first_line;
    while (true) {
      if (pos_ >= text_.size()) return Error(first_line, "a string literal is never closed");
      const char c = text_[pos_];
      if (c == '\n') {
        if (!triple) return Error(first_line, "a string literal is not closed on its line");
        ++line_;
      }
      if (c == quote && (!triple || text_.substr(pos_, 3) == std::string(3, quote))) {
        pos_ += triple ? 3 : 1;
        break;
      }
      if (c == '\\' && pos_ + 1 < text_.size()) {
        const char next = text_[pos_ + 1];
        if (next == '\n') ++line_;
        if (raw) {
          t.value.push_back(c);
          t.value.push_back(next);
        } else if (next == '\\' || next == '\'' || next == '"') {
          t.value.push_back(next);
        } else if (next == 'n') {
          t.value.push_back('\n');
        } else if (next == 't') {
          t.value.push_back('\t');
        } else {
          plain = false;  // an escape whose value is not read here
        }
        pos_ += 2;
        continue;
      }
      t.value.push_back(c);
      ++pos_;
    }
    t.plain = plain;
    tokens_.push_back(std::move(t));
    return absl::OkStatus();
  }

  std::string_view text_;
  std::string_view path_;
  std::size_t pos_ = 0;
  int line_ = 1;
  std::vector<std::pair<char, int>> open_;  // open brackets and their lines
  std::vector<Token> tokens_;
};

// ---------------------------------------------------------------------------------------------
// The decorators above the function.

using Range = std::pair<std::size_t, std::size_t>;  // [first, last) token indexes

bool IsOp(const Token& t, std::string_view op) { return t.kind == Tok::kOther && t.text == op; }
bool IsName(const Token& t, std::string_view name) {
  return t.kind == Tok::kName && t.text == name;
}

// The index just past the bracket opened at tokens[open] (the lexer checked they balance).
std::size_t Closing(const std::vector<Token>& tokens, std::size_t open) {
  int depth = 0;
  for (std::size_t i = open; i < tokens.size(); ++i) {
    if (tokens[i].kind != Tok::kOther) continue;
    const std::string_view t = tokens[i].text;
    if (t == "(" || t == "[" || t == "{") ++depth;
    if (t == ")" || t == "]" || t == "}") {
      if (--depth == 0) return i + 1;
    }
  }
  return tokens.size();
}

// The comma-separated items inside the brackets [open, close): each item's token range, a
// trailing comma ignored.
std::vector<Range> Items(const std::vector<Token>& tokens, std::size_t open, std::size_t close) {
  std::vector<Range> out;
  std::size_t start = open + 1;
  for (std::size_t i = open + 1; i + 1 < close;) {
    if (tokens[i].kind == Tok::kOther &&
        (tokens[i].text == "(" || tokens[i].text == "[" || tokens[i].text == "{")) {
      i = Closing(tokens, i);
      continue;
    }
    if (IsOp(tokens[i], ",")) {
      out.emplace_back(start, i);
      start = i + 1;
    }
    ++i;
  }
  if (start < close - 1) out.emplace_back(start, close - 1);
  return out;
}

// The value of a range that is one string literal (adjacent literals concatenated).
std::optional<std::string> StringOf(const std::vector<Token>& tokens, Range r) {
  if (r.first >= r.second) return std::nullopt;
  std::string out;
  for (std::size_t i = r.first; i < r.second; ++i) {
    if (tokens[i].kind != Tok::kString || !tokens[i].plain) return std::nullopt;
    out += tokens[i].value;
  }
  return out;
}

// A call's arguments: positional ones, and keyword ones by name.
struct Arguments {
  std::vector<Range> positional;
  std::vector<std::pair<std::string_view, Range>> keyword;

  std::optional<Range> Get(std::size_t index, std::string_view name) const {
    for (const auto& [n, r] : keyword) {
      if (n == name) return r;
    }
    if (index < positional.size()) return positional[index];
    return std::nullopt;
  }
};

Arguments ArgumentsOf(const std::vector<Token>& tokens, std::size_t open, std::size_t close) {
  Arguments args;
  for (const Range& r : Items(tokens, open, close)) {
    if (r.second - r.first >= 2 && tokens[r.first].kind == Tok::kName &&
        IsOp(tokens[r.first + 1], "=") &&
        (r.first + 2 >= r.second || !IsOp(tokens[r.first + 2], "="))) {
      args.keyword.emplace_back(tokens[r.first].text, Range{r.first + 2, r.second});
    } else {
      args.positional.push_back(r);
    }
  }
  return args;
}

// Whether r is a list or tuple display: "[...]" or "(...)" spanning the whole range.
bool IsDisplay(const std::vector<Token>& tokens, Range r) {
  return r.second > r.first && (IsOp(tokens[r.first], "[") || IsOp(tokens[r.first], "(")) &&
         Closing(tokens, r.first) == r.second;
}

// The ids an `ids=` argument lists as string literals; nullopt when it is anything else.
std::optional<std::vector<std::string>> LiteralIds(const std::vector<Token>& tokens, Range r) {
  if (!IsDisplay(tokens, r)) return std::nullopt;
  std::vector<std::string> ids;
  for (const Range& item : Items(tokens, r.first, r.second)) {
    std::optional<std::string> id = StringOf(tokens, item);
    if (!id) return std::nullopt;
    ids.push_back(std::move(*id));
  }
  if (ids.empty()) return std::nullopt;
  return ids;
}

// The ids of argvalues written as pytest.param(..., id="x") items; nullopt unless every item is.
std::optional<std::vector<std::string>> ParamIds(const std::vector<Token>& tokens, Range r) {
  if (!IsDisplay(tokens, r)) return std::nullopt;
  std::vector<std::string> ids;
  for (const Range& item : Items(tokens, r.first, r.second)) {
    const std::size_t i = item.first;
    if (item.second - i < 4 || !IsName(tokens[i], "pytest") || !IsOp(tokens[i + 1], ".") ||
        !IsName(tokens[i + 2], "param") || !IsOp(tokens[i + 3], "(") ||
        Closing(tokens, i + 3) != item.second) {
      return std::nullopt;
    }
    const Arguments args = ArgumentsOf(tokens, i + 3, item.second);
    std::optional<std::string> id;
    for (const auto& [name, value] : args.keyword) {
      if (name == "id") id = StringOf(tokens, value);
    }
    if (!id) return std::nullopt;
    ids.push_back(std::move(*id));
  }
  if (ids.empty()) return std::nullopt;
  return ids;
}

// One @pytest.mark.parametrize(...) above the function.
struct Parametrize {
  int line = 0;
  std::string name;  // argnames when a string literal
  std::optional<std::vector<std::string>> ids;
};

template <std::size_t N>
bool AllAmong(const std::vector<std::string>& ids, const std::string_view (&known)[N]) {
  return std::all_of(ids.begin(), ids.end(), [&](const std::string& id) {
    return std::find(std::begin(known), std::end(known), id) != std::end(known);
  });
}

}  // namespace

const KeyGrammar::Segment* KeyGrammar::Find(std::string_view name) const {
  for (const Segment& s : segments) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::string KeyGrammar::Pattern() const {
  std::string out = "<model_path>/<framework>[-<variant>]";
  for (const Segment& s : segments) util::StrAppend(&out, "-<", s.name, ">");
  return out;
}

const KeyGrammar& DefaultKeyGrammar() {
  static const KeyGrammar* const kDefault = [] {
    auto* g = new KeyGrammar;
    g->segments.push_back({"parallelism", {"single_device", "data_parallel", "tensor_parallel"}});
    g->segments.push_back({"run_mode", {"inference", "training"}});
    g->source = std::string(kBuiltInGrammar);
    return g;
  }();
  return *kDefault;
}

absl::StatusOr<KeyGrammar> ReadKeyGrammar(std::string_view runner_text, std::string_view path) {
  auto error = [&](int line, std::string_view why) {
    return absl::InvalidArgumentError(util::StrCat(path, ":", line, ": ", why));
  };
  absl::StatusOr<std::vector<Token>> lexed = Lexer(runner_text, path).Run();
  if (!lexed.ok()) return lexed.status();
  const std::vector<Token>& tokens = *lexed;

  // The function: `def test_all_models_torch(` starting a logical line.
  std::size_t def = tokens.size();
  for (std::size_t i = 0; i + 2 < tokens.size(); ++i) {
    const bool line_start = i == 0 || tokens[i - 1].kind == Tok::kNewline;
    if (line_start && IsName(tokens[i], "def") && IsName(tokens[i + 1], kFunction) &&
        IsOp(tokens[i + 2], "(")) {
      def = i;
      break;
    }
  }
  if (def == tokens.size()) {
    return absl::InvalidArgumentError(
        util::StrCat(path, ": no 'def ", kFunction, "(' (the runner's model test) in the file"));
  }
  const int def_line = tokens[def].line;

  // The logical lines right above it that are decorators, top to bottom.
  std::vector<Range> decorators;
  for (std::size_t end = def; end > 0 && tokens[end - 1].kind == Tok::kNewline;) {
    std::size_t start = end - 1;
    while (start > 0 && tokens[start - 1].kind != Tok::kNewline) --start;
    if (!IsOp(tokens[start], "@")) break;
    decorators.emplace_back(start, end - 1);
    end = start;
  }
  std::reverse(decorators.begin(), decorators.end());

  std::vector<Parametrize> params;
  for (const Range& d : decorators) {
    const std::size_t i = d.first + 1;
    const bool parametrize = d.second - i >= 5 && IsName(tokens[i], "pytest") &&
                             IsOp(tokens[i + 1], ".") && IsName(tokens[i + 2], "mark") &&
                             IsOp(tokens[i + 3], ".") && IsName(tokens[i + 4], "parametrize");
    if (!parametrize) continue;  // a mark: no id
    Parametrize p;
    p.line = tokens[d.first].line;
    const std::size_t open = i + 5;
    if (open >= d.second || !IsOp(tokens[open], "(") || Closing(tokens, open) != d.second) {
      return error(p.line, "@pytest.mark.parametrize is not one call on its decorator line");
    }
    const Arguments args = ArgumentsOf(tokens, open, d.second);
    if (std::optional<Range> names = args.Get(0, "argnames")) {
      p.name = StringOf(tokens, *names).value_or("");
    }
    if (std::optional<Range> ids = args.Get(3, "ids")) p.ids = LiteralIds(tokens, *ids);
    if (!p.ids) {
      if (std::optional<Range> values = args.Get(1, "argvalues")) {
        p.ids = ParamIds(tokens, *values);
      }
    }
    params.push_back(std::move(p));
  }
  if (params.empty()) {
    // The ids come from elsewhere (a conftest's pytest_generate_tests): the built-in grammar,
    // which is what such a runner makes.
    return DefaultKeyGrammar();
  }
  if (params.back().ids) {
    return error(params.back().line,
                 util::StrCat("the parametrize nearest def ", kFunction, "( (line ", def_line,
                              ") has literal ids; it must be the test entry, whose ids the "
                              "loaders make"));
  }

  KeyGrammar grammar;
  grammar.source = util::StrCat(path, ":", def_line);
  // Key order: from the decorator nearest the function up, the entry left out.
  for (std::size_t k = params.size() - 1; k-- > 0;) {
    const Parametrize& p = params[k];
    const std::string shown = p.name.empty() ? "" : util::StrCat("('", p.name, "', ...)");
    if (!p.ids) {
      return error(p.line, util::StrCat("@pytest.mark.parametrize", shown,
                                        " above the test entry has no literal ids "
                                        "(pytest.param(..., id=\"...\") items or ids=[...])"));
    }
    KeyGrammar::Segment segment;
    segment.ids = *p.ids;
    if (AllAmong(segment.ids, kParallelismIds)) {
      segment.name = "parallelism";
    } else if (AllAmong(segment.ids, kRunModeIds)) {
      segment.name = "run_mode";
    } else if (!p.name.empty()) {
      segment.name = p.name;
    } else {
      return error(p.line, "the parametrize's argument name is not a string literal");
    }
    for (const std::string& id : segment.ids) {
      if (id.empty()) return error(p.line, util::StrCat("an empty id in ", segment.name));
    }
    if (grammar.Find(segment.name) != nullptr) {
      return error(p.line, util::StrCat("a second ", segment.name, " segment"));
    }
    grammar.segments.push_back(std::move(segment));
  }
  if (grammar.Find("run_mode") == nullptr) {
    return error(def_line, util::StrCat("no run mode parametrize (ids inference/training) above "
                                        "def ",
                                        kFunction, "("));
  }
  return grammar;
}

KeyGrammar GrammarOrDefault(const absl::StatusOr<std::string>& runner) {
  if (runner.ok()) {
    auto grammar = ReadKeyGrammar(*runner, kRunnerPath);
    if (grammar.ok()) return std::move(*grammar);
  }
  return DefaultKeyGrammar();
}

}  // namespace triage::inventory
