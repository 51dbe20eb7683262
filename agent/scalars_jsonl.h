// The JSON-lines scalars file (TFSLURM_SCALARS_FILE) for programs that do not
// write TensorBoard summaries: one object per line,
//
//   {"step": 120, "loss": 0.31, "accuracy": 0.9}
//   {"step": 130, "wall_time": 1717000000.5, "loss": 0.29}
//
// "step" (an integer) is required; "wall_time" (seconds since the epoch) is
// optional, the time the agent read the line by default; every other key with
// a number value is a scalar, its key the tag as written. Keys with other
// values are ignored. NaN, Infinity and -Infinity, which Python's json module
// writes for a diverged loss although JSON has no such numbers, are accepted.
//
// Thread safety: a pure function.
#ifndef TFSLURM_AGENT_SCALARS_JSONL_H_
#define TFSLURM_AGENT_SCALARS_JSONL_H_

#include <string_view>
#include <vector>

#include "agent/event_scalars.h"
#include "base/status.h"

namespace tfslurm::agent {

// The scalars of one line (without its '\n'); `now` is the default
// wall_time. An invalid line is InvalidArgument saying why, and yields
// nothing. A blank line is valid and yields nothing.
StatusOr<std::vector<ScalarPoint>> ParseScalarsLine(std::string_view line, double now);

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_SCALARS_JSONL_H_
