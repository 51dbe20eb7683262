// GET /experiments/{id}'s body (api/experiments_json.h): a page of an
// experiment's tasks, as the dashboard asks for one at 16,384 tasks.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "service/api/experiments_json.h"

namespace tfslurm::api {
namespace {

using nlohmann::json;

ExperimentView ViewOf(int tasks) {
  ExperimentView v;
  v.experiment.id = "big";
  v.experiment.state = ExperimentState::kFailed;
  for (int i = 0; i < tasks; ++i) {
    TaskView t;
    t.task = TaskIndex(i);
    t.proc_id = ProcId(i);
    t.role = "rank";
    t.index = i;
    t.state = i % 1000 == 7 ? TaskState::kFailed : TaskState::kReaped;
    v.tasks.push_back(t);
  }
  return v;
}

std::vector<int> Procs(const json& body) {
  std::vector<int> procs;
  for (const json& t : body["tasks"]) procs.push_back(t["proc_id"]);
  return procs;
}

TEST(ExperimentViewJson, EveryTaskByDefault) {
  json body = json::parse(ExperimentViewJson(ViewOf(5), 0));
  EXPECT_EQ(Procs(body), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(body["tasks_total"], 5);
}

TEST(ExperimentViewJson, APageOfTheTasksCountsThemAll) {
  const ExperimentView v = ViewOf(16384);
  json body = json::parse(ExperimentViewJson(v, 0, {std::nullopt, 100, 3}));
  EXPECT_EQ(Procs(body), (std::vector<int>{100, 101, 102}));
  EXPECT_EQ(body["tasks_total"], 16384);
  // task_counts counts every task, not the page's.
  EXPECT_EQ(body["task_counts"]["rank"]["total"], 16384) << body["task_counts"].dump();
  EXPECT_EQ(body["task_counts"]["rank"]["failed"], 17) << body["task_counts"].dump();
  // Past the end: no task, the total still said.
  body = json::parse(ExperimentViewJson(v, 0, {std::nullopt, 20000, 50}));
  EXPECT_TRUE(body["tasks"].empty());
  EXPECT_EQ(body["tasks_total"], 16384);
}

TEST(ExperimentViewJson, AStateKeepsOnlyItsTasksAndPagesOverThem) {
  const ExperimentView v = ViewOf(16384);
  json body = json::parse(ExperimentViewJson(v, 0, {TaskState::kFailed, 0, -1}));
  EXPECT_EQ(body["tasks_total"], 17);  // 7, 1007, ..., 16007
  ASSERT_EQ(body["tasks"].size(), 17u);
  EXPECT_EQ(body["tasks"][16]["proc_id"], 16007);
  body = json::parse(ExperimentViewJson(v, 0, {TaskState::kFailed, 15, 10}));
  EXPECT_EQ(Procs(body), (std::vector<int>{15007, 16007}));
}

TEST(ExperimentViewJson, AViewPagedByTheStoreIsWrittenAsItIs) {
  ExperimentView v = ViewOf(3);  // the page the store read
  v.tasks_total = 16384;
  v.task_counts = {{"rank", TaskState::kReaped, 16383}, {"rank", TaskState::kFailed, 1}};
  json body = json::parse(ExperimentViewJson(v, 0));
  EXPECT_EQ(Procs(body), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(body["tasks_total"], 16384);
  EXPECT_EQ(body["task_counts"]["rank"]["total"], 16384) << body["task_counts"].dump();
  EXPECT_EQ(body["task_counts"]["rank"]["failed"], 1);
}

}  // namespace
}  // namespace tfslurm::api
