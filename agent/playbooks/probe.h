#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace triage::playbooks {

// One document of agent/scripts/triage_probe.py (schema 1, docs/probe.md).
struct ProbeDoc {
  std::string key;
  std::string loader;
  std::string phase;  // structure | bfloat16 | float32
  bool ok = false;
  int seq = 0;
  struct Error {
    std::string type;
    std::string message;
    std::string traceback;
    // "RuntimeError: <first line of the message>"
    std::string Line() const;
  };
  std::optional<Error> error;
  struct Input {
    std::string name;
    std::string dtype;  // "" when not a tensor
    std::string kind;
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
  nlohmann::json raw;
};

absl::StatusOr<ProbeDoc> ParseProbeDoc(const nlohmann::json& j);
// stdout of the probe: one document per line (other lines are an error).
absl::StatusOr<std::vector<ProbeDoc>> ParseProbeOutput(const std::string& text);
// A file of docs/evidence.md's layout: one document, or a JSON array of documents.
absl::StatusOr<std::vector<ProbeDoc>> ParseProbeFile(const std::string& text,
                                                     const std::string& source);

// "list[Tensor] of length 3, shapes [(B, 8, 8, 8), ...]"-style one-line description of a NODE.
std::string DescribeTree(const nlohmann::json& node, int depth = 0);

}  // namespace triage::playbooks
