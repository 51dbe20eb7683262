// Experiment spec files for `tfctl submit`: JSON, or YAML converted to the
// very JSON the REST API takes, so both spellings of a spec mean the same.
//
// Thread safety: the functions keep no state and may be called from any
// thread.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace tfslurm::client {

// JSON when `path` ends in .json, YAML otherwise. Errors name the file and,
// for syntax errors, the line.
StatusOr<nlohmann::json> LoadSpecFile(const std::string& path);

// YAML text -> JSON. Unquoted scalars are typed by YAML 1.2's core schema
// (null, true/false, integers, floats); everything else is a string, so
// `time_limit: 02:00:00` and `on: [...]` stay strings as they would in JSON.
// `name` prefixes error messages.
StatusOr<nlohmann::json> YamlToJson(const std::string& text, const std::string& name);

}  // namespace tfslurm::client
