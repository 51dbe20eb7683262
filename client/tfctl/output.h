// Machine-readable output for `-o json` and `-o yaml`: the service's JSON as
// received, so scripts see every field the API has.
//
// Thread safety: functions of their arguments; PrintStructured also writes to
// `out`, which the caller must not share meanwhile.
#pragma once

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

namespace tfslurm::tfctl {

// kName is one experiment id per line, as `kubectl get -o name` (list only).
enum class OutputFormat { kTable, kJson, kYaml, kName };

// Block-style YAML with the same content as the JSON: strings that a YAML
// 1.1 or 1.2 reader would take for something else ("true", "on", "12",
// "02:00:00") are quoted.
std::string ToYaml(const nlohmann::json& value);

// Pretty JSON or YAML, ending with a newline. Control and bidi characters in
// strings are \u escapes, so the document is exact and safe on a terminal.
void PrintStructured(const nlohmann::json& value, OutputFormat format, std::ostream& out);

}  // namespace tfslurm::tfctl
