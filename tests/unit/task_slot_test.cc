// TaskSlot's phases: every transition from every phase, taken or refused,
// and the queries each phase answers.
#include "service/core/task_slot.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "service/core/attempt_run.h"

namespace tfslurm {
namespace {

constexpr TaskPhase kAllPhases[] = {
    TaskPhase::kUnregistered,       TaskPhase::kRegistered,    TaskPhase::kRestartingAlone,
    TaskPhase::kStopping,           TaskPhase::kStoppingAlone, TaskPhase::kExited,
    TaskPhase::kExitedUnregistered,
};

// A slot brought to `phase` by legal transitions only, each checked.
TaskSlot SlotIn(TaskPhase phase) {
  TaskSlot s;
  auto step = [&s](bool taken) { EXPECT_TRUE(taken) << TaskPhaseName(s.phase()); };
  switch (phase) {
    case TaskPhase::kUnregistered:
      break;
    case TaskPhase::kRegistered:
      step(s.Register());
      break;
    case TaskPhase::kRestartingAlone:
      step(s.Register());
      step(s.BeginLoneRestart());
      break;
    case TaskPhase::kStopping:
      step(s.Register());
      step(s.SendShutdown());
      break;
    case TaskPhase::kStoppingAlone:
      step(s.Register());
      step(s.BeginLoneRestart());
      step(s.SendShutdown());
      break;
    case TaskPhase::kExited:
      step(s.Register());
      step(s.MarkExited(false));
      break;
    case TaskPhase::kExitedUnregistered:
      step(s.MarkExited(false));
      break;
  }
  EXPECT_EQ(s.phase(), phase);
  return s;
}

struct Transition {
  std::string name;
  std::function<bool(TaskSlot&)> apply;
  // From each phase that allows it, the phase it leads to; every other
  // phase refuses it.
  std::map<TaskPhase, TaskPhase> allowed;
};

std::vector<Transition> Transitions() {
  using P = TaskPhase;
  return {
      {"Register",
       [](TaskSlot& s) { return s.Register(); },
       {{P::kUnregistered, P::kRegistered}, {P::kExitedUnregistered, P::kExited}}},
      {"SendShutdown",
       [](TaskSlot& s) { return s.SendShutdown(); },
       {{P::kRegistered, P::kStopping}, {P::kRestartingAlone, P::kStoppingAlone}}},
      {"BeginLoneRestart",
       [](TaskSlot& s) { return s.BeginLoneRestart(); },
       {{P::kRegistered, P::kRestartingAlone}}},
      {"EndLoneRestart",
       [](TaskSlot& s) { return s.EndLoneRestart(); },
       {{P::kRestartingAlone, P::kRegistered}, {P::kStoppingAlone, P::kStopping}}},
      {"MarkExited",
       [](TaskSlot& s) { return s.MarkExited(false); },
       {{P::kRegistered, P::kExited},
        {P::kStopping, P::kExited},
        {P::kUnregistered, P::kExitedUnregistered}}},
      {"Restore(registered)",
       [](TaskSlot& s) { return s.Restore(P::kRegistered); },
       {{P::kUnregistered, P::kRegistered}}},
      {"Restore(restarting_alone)",
       [](TaskSlot& s) { return s.Restore(P::kRestartingAlone); },
       {{P::kUnregistered, P::kRestartingAlone}}},
  };
}

TEST(TaskSlot, EveryTransitionFromEveryPhaseIsTakenOrRefused) {
  for (const Transition& t : Transitions()) {
    for (TaskPhase from : kAllPhases) {
      SCOPED_TRACE(t.name + " from " + std::string(TaskPhaseName(from)));
      TaskSlot s = SlotIn(from);
      const bool taken = t.apply(s);
      auto to = t.allowed.find(from);
      if (to != t.allowed.end()) {
        EXPECT_TRUE(taken);
        EXPECT_EQ(TaskPhaseName(s.phase()), TaskPhaseName(to->second));
      } else {
        EXPECT_FALSE(taken);
        EXPECT_EQ(TaskPhaseName(s.phase()), TaskPhaseName(from));  // refused: unchanged
      }
    }
  }
}

TEST(TaskSlot, RestoreTakesOnlyThePhasesAStoredTaskImplies) {
  for (TaskPhase to : kAllPhases) {
    SCOPED_TRACE(TaskPhaseName(to));
    TaskSlot s;
    const bool ok = to == TaskPhase::kRegistered || to == TaskPhase::kRestartingAlone;
    EXPECT_EQ(s.Restore(to), ok);
    EXPECT_EQ(s.phase(), ok ? to : TaskPhase::kUnregistered);
  }
}

TEST(TaskSlot, EachPhaseAnswersItsQueries) {
  struct Row {
    TaskPhase phase;
    bool registered, exited, shutdown_sent, restarting_alone;
  };
  const Row rows[] = {
      {TaskPhase::kUnregistered, false, false, false, false},
      {TaskPhase::kRegistered, true, false, false, false},
      {TaskPhase::kRestartingAlone, true, false, false, true},
      {TaskPhase::kStopping, true, false, true, false},
      {TaskPhase::kStoppingAlone, true, false, true, true},
      {TaskPhase::kExited, true, true, false, false},
      {TaskPhase::kExitedUnregistered, false, true, false, false},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(TaskPhaseName(r.phase));
    TaskSlot s = SlotIn(r.phase);
    EXPECT_EQ(s.registered(), r.registered);
    EXPECT_EQ(s.exited(), r.exited);
    EXPECT_EQ(s.shutdown_sent(), r.shutdown_sent);
    EXPECT_EQ(s.restarting_alone(), r.restarting_alone);
  }
}

TEST(TaskSlot, FailedAtStartupIsTheExitsAndOnlyOnceExited) {
  TaskSlot s;
  ASSERT_TRUE(s.Register());
  EXPECT_FALSE(s.failed_at_startup());
  ASSERT_TRUE(s.MarkExited(true));
  EXPECT_TRUE(s.failed_at_startup());
  EXPECT_FALSE(s.MarkExited(false));  // a second exit changes nothing
  EXPECT_TRUE(s.failed_at_startup());
}

TEST(TaskSlot, ALoneRestartEndsInAnExitOnlyThroughEndLoneRestart) {
  TaskSlot s = SlotIn(TaskPhase::kStoppingAlone);
  EXPECT_FALSE(s.MarkExited(false));
  ASSERT_TRUE(s.EndLoneRestart());
  EXPECT_EQ(s.phase(), TaskPhase::kStopping);
  ASSERT_TRUE(s.MarkExited(false));
  EXPECT_EQ(s.phase(), TaskPhase::kExited);
}

ExperimentSpec TwoWorkers() {
  ExperimentSpec s;
  s.id = "exp";
  s.cluster = {0, 0, 2, 0};
  s.resources.nodes = 1;
  s.resources.tasks_per_node = 2;
  return s;
}

// AttemptRun asks for transitions only from the phases that allow them.
TEST(TaskSlot, AttemptRunReapsRestartingAloneTasksAndNotExitedOnes) {
  AttemptRun run(TwoWorkers(), 1);
  run.Register(TaskIndex(0), "n1", "h:1", 0, 0);
  run.Register(TaskIndex(1), "n1", "h:2", 0, 1);
  run.MarkAssigned();
  ASSERT_TRUE(run.mutable_task(TaskIndex(0)).BeginLoneRestart());
  run.OnExit(TaskIndex(1), 0, std::nullopt, false);
  ASSERT_EQ(run.TasksToReap(), std::vector<TaskIndex>{TaskIndex(0)});
  run.MarkShutdownSent(TaskIndex(0));
  EXPECT_EQ(run.task(TaskIndex(0)).phase(), TaskPhase::kStoppingAlone);
  run.MarkShutdownSent(TaskIndex(1));  // exited: refused
  EXPECT_EQ(run.task(TaskIndex(1)).phase(), TaskPhase::kExited);
  EXPECT_EQ(run.UnconfirmedShutdowns(), std::vector<TaskIndex>{TaskIndex(0)});
  // Its exit is not recorded while it restarts alone.
  run.OnExit(TaskIndex(0), 1, std::nullopt, false);
  EXPECT_FALSE(run.task(TaskIndex(0)).exited());
  EXPECT_FALSE(run.task(TaskIndex(0)).exit_code.has_value());
}

TEST(TaskSlot, AnExitBeforeRegisteringStillLeavesTheTaskMissing) {
  AttemptRun run(TwoWorkers(), 1);
  run.OnExit(TaskIndex(1), 1, std::nullopt, false);
  EXPECT_EQ(run.task(TaskIndex(1)).phase(), TaskPhase::kExitedUnregistered);
  EXPECT_FALSE(run.Register(TaskIndex(0), "n1", "h:1", 0, 0));
  EXPECT_EQ(run.MissingRegistrations(), std::vector<TaskIndex>{TaskIndex(1)});
  EXPECT_TRUE(run.Register(TaskIndex(1), "n1", "h:2", 0, 1));
  EXPECT_EQ(run.task(TaskIndex(1)).phase(), TaskPhase::kExited);
}

}  // namespace
}  // namespace tfslurm
