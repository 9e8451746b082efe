#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace triage::playbooks {

// One document of agent/scripts/triage_probe.py (schema 1, docs/probe.md).
struct ProbeDoc {
  std::string key;
  std::string loader;
  std::string phase;  // structure | bfloat16 | float32 | train | eval
  bool ok = false;
  int seq = 0;
  struct Error {
    std::string type;
    std::string message;
    std::string traceback;
    // inputs mode: the innermost frame of the traceback (root-relative file when under the
    // workspace), and whether it lies in the loader's directory; empty when unknown.
    std::string site_file;
    std::string site_function;
    int site_line = 0;
    bool site_in_loader_dir = false;
    // ModuleNotFoundError's module name ("" otherwise).
    std::string module;
    // "RuntimeError: <first line of the message>"
    std::string Line() const;
  };
  std::optional<Error> error;
  struct Input {
    std::string name;
    std::string dtype;  // "" when not a tensor
    std::string kind;
    std::vector<std::int64_t> shape;  // empty when not a tensor (or a 0-d tensor)
    nlohmann::json tree;              // inputs mode: NODE of a non-tensor item (null otherwise)
  };
  std::vector<Input> inputs;
  // The loader's ModelInfo (its values as strings, "" when absent); nullopt when the document
  // has none (a loader without _get_model_info, or evidence recorded before the probe read it).
  struct ModelInfo {
    std::string model;
    std::string variant;
    std::string task;
    std::string source;
  };
  std::optional<ModelInfo> model_info;
  bool has_output = false;
  std::string output_class;
  std::string output_module;
  nlohmann::json tree;  // NODE
  bool has_unpacked = false;
  bool unpacked_ok = false;
  std::string unpacked_kind;
  std::string unpacked_error;
  std::string backward;  // ok | failed | skipped

  // --- inputs mode only (docs/probe.md, "inputs mode"); absent in the other modes.
  std::string variant_member;  // the ModelVariant member's name ("" without one)
  // What load_inputs returned: dict | list | tuple | tensor | <type name>; "" when it did not run.
  std::string container;
  struct Param {
    std::string name;
    std::string kind;  // positional | keyword_only | var_positional | var_keyword
    bool has_default = false;
    std::string default_repr;  // repr() of the default ("" without one)
  };
  struct Forward {
    std::string model_class;   // type(model).__name__
    std::string model_module;  // type(model).__module__
    std::string qualname;      // the forward function's __qualname__
    std::string file;          // its file, root-relative when under the workspace
    bool in_loader_dir = false;
    std::vector<Param> params;  // without self
    bool Has(std::string_view name) const;
    // The position of a parameter among those that bind positionally, -1 when none.
    int PositionOf(std::string_view name) const;
  };
  std::optional<Forward> forward;
  std::vector<Param> load_inputs_params;        // without self
  std::vector<std::string> load_inputs_passed;  // the keyword arguments the probe passed
  // How the inputs bind to the forward's parameters (input name -> parameter name, in input
  // order), or why they do not.
  bool has_binding = false;
  bool binding_ok = false;
  std::vector<std::pair<std::string, std::string>> binding;
  std::string binding_error;
  // The model's HF-style config, when it has one.
  struct Config {
    std::optional<bool> is_encoder_decoder;
    std::optional<std::int64_t> decoder_start_token_id;
    std::optional<std::int64_t> pad_token_id;
  };
  std::optional<Config> config;
  // Requirements-like files next to the loader (requirements*.txt), with their package lines.
  struct Requirements {
    std::string file;  // the file name: requirements.txt, requirements.nodeps.txt, ...
    std::vector<std::string> packages;
  };
  std::vector<Requirements> requirements;

  nlohmann::json raw;
};

// The phases a probe mode prints, in order (docs/probe.md): structure -> [structure],
// dtype -> [bfloat16, float32], inputs -> [train, eval]; empty for an unknown mode.
std::vector<std::string> ProbePhases(std::string_view mode);

absl::StatusOr<ProbeDoc> ParseProbeDoc(const nlohmann::json& j);
// stdout of the probe: one document per line (other lines are an error).
absl::StatusOr<std::vector<ProbeDoc>> ParseProbeOutput(const std::string& text);
// A file of docs/evidence.md's layout: one document, or a JSON array of documents.
absl::StatusOr<std::vector<ProbeDoc>> ParseProbeFile(const std::string& text,
                                                     const std::string& source);

// "list[Tensor] of length 3, shapes [(B, 8, 8, 8), ...]"-style one-line description of a NODE.
std::string DescribeTree(const nlohmann::json& node, int depth = 0);

}  // namespace triage::playbooks
