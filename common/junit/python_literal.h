#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/inventory/value.h"

namespace triage::junit {

// Parses one Python literal as pytest writes a recorded property: str(value), which for dicts and
// lists is repr() of the items. tt-xla's runner records its `tags` property this way, so the text
// uses single quotes, True/False/None and nan, and is not JSON.
//
// Accepted:
//   dict {'a': 1}          -> map (non-string keys become their source text: {1: 'x'} -> key "1")
//   set {1, 2}             -> list
//   list [..], tuple (..)  -> list ((1) is just 1, as in Python)
//   'str', "str", b'..', r'..', u'..'  with Python escapes (\n \t \\ \' \" \xNN \uNNNN
//                          \UNNNNNNNN, octal); \x and \u in str literals are code points and are
//                          written as UTF-8, in bytes literals \xNN is the raw byte
//   123, -0x1f, 1_000, 1.5, 1e-3, -0.5  (ints beyond int64 become floats)
//   True False None nan inf -inf float('nan') float('-inf')
//   <BringupStatus.FAILED_RUNTIME: 'failed_runtime'>   -> "BringupStatus.FAILED_RUNTIME"
//   <other repr>           -> the whole text, brackets included
//   torch.bfloat16         -> "torch.bfloat16" (str() of enums and dtypes: a dotted name)
// A bare name without a dot that is not one of the constants (true, null, foo) is an error, so a
// JSON text is rejected instead of being half-understood.
//
// Errors are InvalidArgument and name the byte offset of the problem.
absl::StatusOr<inventory::Value> ParsePythonLiteral(std::string_view text);

// The same syntax, read at a cost linear in the text's size whatever it holds: only the values of
// the top-level dict's keys in `keep` are built (in the result's map, in the text's order); every
// other value is checked as ParsePythonLiteral checks it (the same texts are accepted, a text it
// refuses is refused) and skipped without being built. When the text is not a dict the result is
// an empty value of its kind (a set or a list: an empty list). The kept values may hold at most
// max_items items of lists, tuples, sets and dicts in all (the top-level keys kept count too):
// past that the answer is ResourceExhausted, naming the byte. Syntax errors are InvalidArgument.
absl::StatusOr<inventory::Value> ParsePythonDictKeys(std::string_view text,
                                                     const std::vector<std::string_view>& keep,
                                                     std::size_t max_items = 10000);

}  // namespace triage::junit
