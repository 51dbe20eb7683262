// JSON shapes of the REST API (schema/openapi.yaml describes them).
#pragma once

#include <nlohmann/json.hpp>

#include "service/core/experiments.h"

namespace tfslurm::api {

// Unix ms -> "2026-11-21T23:22:02.123Z"; 0 -> null.
nlohmann::json Timestamp(int64_t ms);
// The summary used in lists: no spec, tasks or events.
nlohmann::json ExperimentSummaryJson(const ExperimentRecord& e, const AttemptRecord* current);
// Everything GET /experiments/{id} shows. `now_ms` gives heartbeat ages.
nlohmann::json ExperimentViewJson(const ExperimentView& view, int64_t now_ms);
nlohmann::json TaskCountsJson(const std::vector<TaskRecord>& tasks);

}  // namespace tfslurm::api
