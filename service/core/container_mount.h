// One mount of a task's container: shared by the spec (`container.mounts`)
// and the agent protocol's Assignment, which carries the task's mounts; and
// what a role runs in, as the API shows it.
//
// Thread safety: a plain value.
#pragma once

#include <string>

namespace tfslurm {

struct ContainerMount {
  std::string source;  // absolute path on the node
  std::string target;  // absolute path inside the container
  bool read_only = false;
  bool operator==(const ContainerMount& o) const {
    return source == o.source && target == o.target && read_only == o.read_only;
  }
};

// The image and the runtime a role's tasks run in (ExperimentView).
struct RoleContainer {
  std::string role;  // chief | ps | worker | evaluator; "rank" | "process" for PyTorch, JAX
  std::string image;
  std::string runtime;  // pyxis | enroot | oci | apptainer; auto when the site names none
};

}  // namespace tfslurm
