#include "common/evidence/evidence_layout.h"

#include <cctype>

#include "common/util/strings.h"

namespace triage::evidence {

std::string ShardDirName(const v1::ShardSpec& spec) {
  std::string phase = "full";
  if (spec.phase() == v1::PHASE_PROBE) phase = "probe";
  if (spec.phase() == v1::PHASE_VERIFY) phase = "verify";
  // third_party/tt_forge_models/<model_path>/pytorch/loader.py -> <model_path> with '/' -> "__"
  std::string model = spec.loader();
  constexpr std::string_view kPrefix = "third_party/tt_forge_models/";
  if (std::string_view(model).starts_with(kPrefix)) model.erase(0, kPrefix.size());
  if (auto at = model.rfind("/pytorch/loader.py"); at != std::string::npos) model.erase(at);
  std::string safe;
  for (char c : model) {
    if (c == '/') {
      safe += "__";
    } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.') {
      safe.push_back(c);
    } else {
      safe.push_back('_');
    }
  }
  return util::StrCat("w", spec.wave(), "-", phase, "-", spec.arch().empty() ? "cpu" : spec.arch(),
                      "-", spec.playbook(), "-", safe);
}

}  // namespace triage::evidence
