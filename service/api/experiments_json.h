// JSON shapes of the REST API about experiments (schema/openapi.yaml
// describes them), written as text by JsonWriter.
//
// Thread safety: pure functions of their arguments.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "service/api/json_writer.h"
#include "service/core/experiments.h"

namespace tfslurm::api {

// Unix ms -> "2026-11-21T23:22:02.123Z"; 0 -> null.
void WriteTimestamp(JsonWriter& w, int64_t ms);
// An item of GET /experiments: no spec, tasks or events; task_counts for an
// open experiment. A function of the summary alone (no clock), so an item
// can be kept for as long as its summary stays.
std::string ExperimentSummaryJson(const ExperimentSummary& summary);
// GET /experiments: {"experiments": [items], "total", "limit", "offset"},
// from ExperimentSummaryJson's items.
std::string ExperimentListJson(const std::vector<std::shared_ptr<const std::string>>& items,
                               int64_t total, int limit, int offset);
// Which of the current attempt's tasks GET /experiments/{id} lists
// (?task_state, ?tasks_offset, ?tasks_limit): by default every one. An
// experiment of 16,384 tasks is 4 MB of them; the dashboard asks for a page.
using TaskPage = TaskQuery;
// Everything GET /experiments/{id} shows: `tasks` is the page of them that
// `page` asks for, in SLURM_PROCID order, `tasks_total` how many the
// filter left, and task_counts counts every task. A view whose tasks are a
// page already (Experiments::GetPage: tasks_total >= 0) is written as it
// is. `now_ms` gives heartbeat ages.
std::string ExperimentViewJson(const ExperimentView& view, int64_t now_ms,
                               const TaskPage& page = {});

}  // namespace tfslurm::api
