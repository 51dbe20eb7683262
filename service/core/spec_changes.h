// What a resume may change in an experiment's spec (POST
// /experiments/{id}/resume with `changes`): the fields that leave the
// checkpoint in MODEL_DIR valid for the next attempt. The changes are a JSON
// merge patch (RFC 7386) on the spec's canonical form; the result is checked
// by ParseSpec like a new spec, then compared with the current one field by
// field, and a change that would not fit the checkpoint (the cluster's shape,
// the framework, the model_dir) is refused naming the field and why.
//
// Thread safety: a pure function.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "service/core/spec.h"

namespace tfslurm {

struct ChangedSpec {
  ExperimentSpec spec;
  // For people: each changed field by its dotted path, with its old and new
  // value where it is short and not the env's (a value there may be a
  // secret), e.g. "resources.time_limit 00:10:00 -> 00:20:00; env.LR".
  // Empty when nothing changed.
  std::string summary;
};

// The fields a resume may change, for messages and docs.
inline constexpr const char* kResumableFields =
    "command, env, workdir, resources.time_limit and the other resources but the number of tasks, "
    "restart, checkpoint, progress, network";

// `changes` must be an object (a merge patch: a key set to null goes back to
// its default, e.g. {"env": {"LR": null}} unsets LR). InvalidArgument with
// FieldErrors for a patch that makes an invalid spec, or that changes a field
// a resume may not change.
StatusOr<ChangedSpec> ApplySpecChanges(const ExperimentSpec& current, const nlohmann::json& changes,
                                       const SpecLimits& limits);

}  // namespace tfslurm
