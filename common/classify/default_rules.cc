#include <string_view>

namespace triage::classify {

// Reason patterns of the three playbooks tt-xla triages in bulk (docs/classify.md). RE2 syntax,
// matched anywhere in the reason.
std::string_view DefaultRulesYaml() {
  return R"yaml(# triage-farm classification rules: YAML reason -> playbook and flavor.
playbooks:
  - name: unpack_forward_output
    run_modes: [training]
    flavors:
      # The runner's canonical reason for a model whose output class has no handler.
      - name: not_implemented
        any:
          - "tt-forge-models doesn't implement unpack_forward_output for this model"
      # The ValueError text itself, naming the class.
      - name: no_handler
        any:
          - 'No handler for class (\w+) exists in `unpack_forward_output`'
  - name: dtype_bfloat16
    run_modes: [training]
    # The dtype_bfloat16 gate: BFloat16 plus one of the dtype signatures.
    require: ['BFloat16']
    flavors:
      - name: op_not_implemented
        any:
          - "not implemented for 'BFloat16'"
      - name: cross_dtype
        any:
          - 'must have the same dtype'
          - 'dtypes match'
          - 'expected scalar type'
  - name: missing_inputs
    run_modes: [training]
    flavors:
      - name: decoder_input_ids
        any:
          - 'You have to specify either decoder_input_ids or decoder_inputs_embeds'
      - name: detection_targets
        any:
          - 'targets should not be none when in training mode'
          - 'Model expects targets to be passed while in training mode'
          - "'NoneType' object has no attribute 'max'"
      - name: batchnorm_single_value
        any:
          - 'Expected more than 1 value per channel when training'
)yaml";
}

}  // namespace triage::classify
