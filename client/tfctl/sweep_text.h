// tfctl sweep status's text: the sweep, its objective and best trial, and
// its trials sorted by the objective, best first and marked "*". Everything
// the service echoes of what users wrote is escaped for the terminal
// (client/terminal_text.h).
//
// Thread safety: pure functions.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tfslurm::tfctl {

// A sweep (GET /sweeps/{id}, schema/openapi.yaml's Sweep) as tfctl shows it.
std::string FormatSweepStatus(const nlohmann::json& sweep);
// A value of the service's JSON as a table cell: a string as it is, a
// number of at most 6 significant digits, null as "".
std::string SweepValueText(const nlohmann::json& v);

}  // namespace tfslurm::tfctl
