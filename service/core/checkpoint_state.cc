#include "service/core/checkpoint_state.h"

#include <regex>
#include <sstream>

namespace tfslurm {
namespace {

// Compiled at program start, on one thread: compiling a std::regex writes
// libstdc++'s shared ctype cache, which TSan reports when two threads
// compile at once (a function-local static compiles on first use, on
// whichever request thread gets there).
const std::regex kLine(R"re(^\s*model_checkpoint_path\s*:\s*"((?:[^"\\]|\\.)*)")re");
const std::regex kStep(R"(-(\d{1,18})$)");

}  // namespace

std::optional<CheckpointState> ParseCheckpointState(const std::string& contents) {
  std::istringstream in(contents);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, kLine)) continue;
    CheckpointState state{m[1].str()};
    std::smatch s;
    if (std::regex_search(state.path, s, kStep)) state.step = std::stoll(s[1].str());
    return state;
  }
  return std::nullopt;
}

}  // namespace tfslurm
