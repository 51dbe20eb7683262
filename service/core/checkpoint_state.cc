#include "service/core/checkpoint_state.h"

#include <regex>
#include <sstream>

namespace tfslurm {

std::optional<CheckpointState> ParseCheckpointState(const std::string& contents) {
  static const std::regex kLine(R"re(^\s*model_checkpoint_path\s*:\s*"((?:[^"\\]|\\.)*)")re");
  std::istringstream in(contents);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, kLine)) continue;
    CheckpointState state{m[1].str()};
    static const std::regex kStep(R"(-(\d{1,18})$)");
    std::smatch s;
    if (std::regex_search(state.path, s, kStep)) state.step = std::stoll(s[1].str());
    return state;
  }
  return std::nullopt;
}

}  // namespace tfslurm
