#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace triage::playbooks {

// The lines of a file (no line ends) and back; final_newline: end with '\n'.
std::vector<std::string> PythonLines(const std::string& text);
std::string JoinPythonLines(const std::vector<std::string>& lines, bool final_newline);

// Where a method of the top-level `class ModelLoader` is (0-based line indices).
struct MethodSpan {
  int def_line = 0;     // `def name(`
  int header_end = 0;   // the line that closes the signature (`):`)
  int body_first = 0;   // the first statement of the body (after a docstring when skip_doc)
  int last = 0;         // the last line of the body
  int indent = 0;       // of the def line
  int body_indent = 0;  // of the body's statements
};
// nullopt: no top-level ModelLoader or no such method directly in its body. skip_doc:
// body_first is the first statement after the method's docstring.
std::optional<MethodSpan> FindModelLoaderMethod(const std::vector<std::string>& lines,
                                                std::string_view name, bool skip_doc = false);

// The change in bracket depth over a line of Python, ignoring strings and a trailing comment.
int BracketDelta(std::string_view line);

// Minimal, textual edits of a loader (tt-forge-models' <model>/pytorch/loader.py). Nothing else
// in the file changes; every edit is one method or one argument.

// Adds a method to `class ModelLoader` (after the last line of its body, indented like the
// body). method: the method's lines indented for a class body (4 spaces). Fails when the file
// has no top-level ModelLoader class or it already defines the method.
absl::StatusOr<std::string> AddMethodToModelLoader(const std::string& text,
                                                   const std::string& method_name,
                                                   const std::string& method);

// Removes a method of `class ModelLoader` (its decorators, its lines and the blank lines before
// it). NotFound when ModelLoader does not define it directly.
absl::StatusOr<std::string> RemoveMethodFromModelLoader(const std::string& text,
                                                        std::string_view method_name);

// Adds `import torch` after the module's imports unless it is already imported.
std::string EnsureImportTorch(const std::string& text);

// The dtype fix (docs/playbooks.md, "dtype_bfloat16"): exactly one `dtype=dtype_override` added to
// a tensor constructor (torch.zeros/ones/full/empty/randn/rand/tensor/eye/linspace) in load_inputs
// or load_model that has none, or, when the offending input comes from another call, one
// `.to(dtype_override)` cast after its assignment.
struct DtypeFix {
  std::string text;         // the new file contents
  int line = 0;             // 1-based line of the edit
  std::string variable;     // the input it fixes
  std::string description;  // "loader.py:42: torch.zeros(...) gets dtype=dtype_override"
};
// offending: names of floating inputs that stayed float32 in the bfloat16 phase. Chooses the
// constructor assigned to one of them; with exactly one constructor and one offender, that one.
// nullopt: no identifiable fix site (then the playbook falls back to xfail only).
std::optional<DtypeFix> FindDtypeFix(const std::string& text,
                                     const std::vector<std::string>& offending);

}  // namespace triage::playbooks
