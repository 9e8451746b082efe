#pragma once

// The checkout's house style for unpack_forward_output (docs/playbooks.md, "Which attribute is
// registered"): the overrides other loaders of the same tt-forge-models checkout already carry.
// Pure functions of loader texts; reading the files is the playbook's.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace triage::playbooks {

// An existing `unpack_forward_output` override that reduces its whole parameter with an imported
// helper and concatenates the result (the form tt-forge-models uses for outputs of several
// heads):
//     def unpack_forward_output(self, fwd_output):
//         import torch
//         from ...tools.utils import extract_tensors_recursive
//         tensors = []
//         extract_tensors_recursive(fwd_output, tensors)
//         if tensors:
//             return torch.cat([t.flatten() for t in tensors])
struct HouseOverride {
  std::string loader;  // relative to the tt-forge-models root: yolo_mini/pytorch/loader.py
  int line = 0;        // 1-based line of its `def unpack_forward_output(`
  std::string param;   // its parameter (fwd_output)
  std::string helper;  // the imported helper it hands the whole parameter to
  // Its statements after the docstring, indented relative to the body (nested blocks keep their
  // extra indentation), comments and blank lines left out.
  std::vector<std::string> body;

  // "yolo_mini/pytorch/loader.py:42's override"
  std::string Citation() const;
};

// The house-form override of a loader's text (loader: its path relative to the tt-forge-models
// root), or nullopt when it has none: the loader's ModelLoader has no unpack_forward_output, or
// its body does not pass its whole parameter to a helper it imports and does not concatenate
// (torch.cat), or it reads self (model-specific).
std::optional<HouseOverride> ParseHouseOverride(std::string_view loader, std::string_view text);

// The form to follow among a checkout's house overrides: the most common body (parameter and
// import depth normalised), then the first loader in path order; nullopt for none.
std::optional<HouseOverride> ChooseHouseOverride(std::vector<HouseOverride> found);

// The statements of a new override in the house form for the loader `target` (relative to the
// tt-forge-models root), reducing `expr` (forward_output, or a part of it such as
// forward_output[1]): the house statements with the house parameter replaced by expr and each
// relative import re-anchored to the target's depth. nullopt when an import cannot be moved (it
// names a module inside the house loader's own model directory).
std::optional<std::vector<std::string>> HouseStatementsFor(const HouseOverride& house,
                                                           std::string_view target,
                                                           std::string_view expr);

}  // namespace triage::playbooks
