// The spec fields `tfctl submit` takes as flags. A flag overrides the same
// field of a spec file; without a file the flags alone make the spec.
//
// Thread safety: ComposeSpec is a pure function of its arguments.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace tfslurm::client {

struct SpecFlags {
  std::optional<std::string> id;
  std::optional<int> ps;
  std::optional<int> workers;
  std::optional<int> nodes;
  std::optional<int> tasks_per_node;
  std::optional<std::string> partition;
  std::optional<std::string> time_limit;
  std::vector<std::string> env;        // --env NAME=VALUE, each one variable of the spec's env
  std::optional<std::string> workdir;  // --workdir, already made absolute
  // The directory tfctl runs in: the workdir when neither --workdir nor the
  // spec file names one, as sbatch runs a job where it was submitted from.
  std::optional<std::string> default_workdir;
  std::vector<std::string> command;  // the arguments after `--`; empty: keep the file's
};

// Writes the flags into `spec` (an object, or null for "no file"). Then, as
// a convenience for specs written by hand, fills in the task layout when it
// is missing: with neither resources.nodes nor resources.tasks_per_node, one
// task per node; with one of them, the other when the cluster's task count
// divides evenly. Everything else is left for the service to check, so
// every remaining problem is reported once, by field, by the service.
StatusOr<nlohmann::json> ComposeSpec(nlohmann::json spec, const SpecFlags& flags);

// `tfctl resume --set PATH=VALUE`: writes VALUE at the dotted spec PATH of
// `changes` (a merge patch, POST /experiments/{id}/resume), e.g.
// restart.max_restarts=5 gives {"restart": {"max_restarts": 5}}. VALUE is
// read as JSON when it is JSON (5, true, null, ["a", "b"]) and as a string
// otherwise; under env it is always a string (env.LR=0.1 is "0.1"), and
// null unsets the variable. InvalidArgument for a PATH with an empty part or
// an assignment without '='.
Status SetSpecField(nlohmann::json& changes, const std::string& assignment);

}  // namespace tfslurm::client
