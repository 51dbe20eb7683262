// Every enum with names has one table of them (base/enum_names.h): each
// value is in it once, its name gives the value back, and the enums of
// schema/openapi.yaml are exactly those names, so the document cannot drift
// from the code. A new enumerator without a name fails to compile here:
// Positions below switches over every enum with -Wswitch as an error.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "service/core/ports/slurm.h"
#include "service/core/records.h"
#include "service/core/spec.h"
#include "service/core/task_slot.h"

#pragma GCC diagnostic error "-Wswitch"

namespace tfslurm {
namespace {

// How many values each enum has: a switch over every one, so that an
// enumerator added without a case does not compile.
int Count(ExperimentState v) {
  switch (v) {
    case ExperimentState::kQueued:
    case ExperimentState::kStarting:
    case ExperimentState::kRunning:
    case ExperimentState::kRestarting:
    case ExperimentState::kSucceeded:
    case ExperimentState::kFailed:
    case ExperimentState::kCancelled:
      return 7;
  }
  return 0;
}
int Count(AttemptState v) {
  switch (v) {
    case AttemptState::kSubmitting:
    case AttemptState::kPending:
    case AttemptState::kRunning:
    case AttemptState::kEnded:
      return 4;
  }
  return 0;
}
int Count(TaskState v) {
  switch (v) {
    case TaskState::kPending:
    case TaskState::kRegistered:
    case TaskState::kRunning:
    case TaskState::kSucceeded:
    case TaskState::kFailed:
    case TaskState::kReaped:
    case TaskState::kLost:
      return 7;
  }
  return 0;
}
int Count(EndReason v) {
  switch (v) {
    case EndReason::kSucceeded:
    case EndReason::kCancelled:
    case EndReason::kPreempted:
    case EndReason::kTimeout:
    case EndReason::kNodeFail:
    case EndReason::kRetryableExit:
    case EndReason::kPermanentExit:
    case EndReason::kStartupError:
    case EndReason::kStartFailed:
    case EndReason::kStalled:
    case EndReason::kUnknown:
    case EndReason::kStoppedEarly:
      return 12;
  }
  return 0;
}
int Count(EventCode v) {
  switch (v) {
    case EventCode::kSubmitting:
    case EventCode::kSubmitted:
    case EventCode::kRetry:
    case EventCode::kRecovered:
    case EventCode::kState:
    case EventCode::kJob:
    case EventCode::kReconnected:
    case EventCode::kAssigned:
    case EventCode::kCheckpoint:
    case EventCode::kHeartbeat:
    case EventCode::kScalars:
    case EventCode::kLost:
    case EventCode::kExited:
    case EventCode::kReaped:
    case EventCode::kReaping:
    case EventCode::kStalled:
    case EventCode::kExclude:
    case EventCode::kRestart:
    case EventCode::kRestartedAlone:
    case EventCode::kStoppedEarly:
      return 20;
  }
  return 0;
}
int Count(SweepState v) {
  switch (v) {
    case SweepState::kRunning:
    case SweepState::kCompleted:
    case SweepState::kCancelled:
      return 3;
  }
  return 0;
}
int Count(SweepTrialState v) {
  switch (v) {
    case SweepTrialState::kRunning:
    case SweepTrialState::kEnded:
    case SweepTrialState::kNotStarted:
      return 3;
  }
  return 0;
}
int Count(JobState v) {
  switch (v) {
    case JobState::kPending:
    case JobState::kRunning:
    case JobState::kSuspended:
    case JobState::kCompleted:
    case JobState::kCancelled:
    case JobState::kFailed:
    case JobState::kTimeout:
    case JobState::kNodeFail:
    case JobState::kPreempted:
    case JobState::kBootFail:
    case JobState::kDeadline:
    case JobState::kOutOfMemory:
    case JobState::kUnknown:
      return 13;
  }
  return 0;
}
int Count(Framework v) {
  switch (v) {
    case Framework::kTensorflow:
    case Framework::kPytorch:
    case Framework::kJax:
      return 3;
  }
  return 0;
}
int Count(SuccessPolicy v) {
  switch (v) {
    case SuccessPolicy::kAuto:
    case SuccessPolicy::kChief:
    case SuccessPolicy::kWorker0:
    case SuccessPolicy::kAllWorkers:
      return 4;
  }
  return 0;
}
int Count(TaskPhase v) {
  switch (v) {
    case TaskPhase::kUnregistered:
    case TaskPhase::kRegistered:
    case TaskPhase::kRestartingAlone:
    case TaskPhase::kStopping:
    case TaskPhase::kStoppingAlone:
    case TaskPhase::kExited:
    case TaskPhase::kExitedUnregistered:
      return 7;
  }
  return 0;
}
int Count(StatusCode v) {
  switch (v) {
    case StatusCode::kOk:
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kUnavailable:
    case StatusCode::kUnauthenticated:
    case StatusCode::kPermissionDenied:
    case StatusCode::kResourceExhausted:
    case StatusCode::kInternal:
    case StatusCode::kUnknown:
      return 11;
  }
  return 0;
}

// Each value once, in declaration order (so none is missing between the
// first and the last), as many as the enum has, each name once, and each
// name parsing back to its value.
template <typename E, size_t N>
void ExpectComplete(const EnumName<E> (&table)[N], const char* what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(static_cast<int>(N), Count(table[0].value)) << "values without a name";
  std::set<std::string> names;
  for (size_t i = 0; i < N; ++i) {
    EXPECT_EQ(static_cast<size_t>(table[i].value), i) << table[i].name << " out of order";
    EXPECT_TRUE(names.insert(table[i].name).second) << table[i].name << " twice";
    EXPECT_FALSE(std::string(table[i].name).empty());
    std::optional<E> back = ValueIn(table, table[i].name);
    ASSERT_TRUE(back.has_value()) << table[i].name;
    EXPECT_EQ(*back, table[i].value) << table[i].name;
    EXPECT_STREQ(NameIn(table, table[i].value), table[i].name);
  }
  EXPECT_FALSE(ValueIn(table, "no-such-name").has_value());
}

TEST(NamesTest, EveryValueOfEveryEnumHasOneNameThatParsesBack) {
  ExpectComplete(kExperimentStateNames, "ExperimentState");
  ExpectComplete(kAttemptStateNames, "AttemptState");
  ExpectComplete(kTaskStateNames, "TaskState");
  ExpectComplete(kEndReasonNames, "EndReason");
  ExpectComplete(kEventCodeNames, "EventCode");
  ExpectComplete(kSweepStateNames, "SweepState");
  ExpectComplete(kSweepTrialStateNames, "SweepTrialState");
  ExpectComplete(kJobStateNames, "JobState");
  ExpectComplete(kFrameworkNames, "Framework");
  ExpectComplete(kSuccessPolicyNames, "SuccessPolicy");
  ExpectComplete(kTaskPhaseNames, "TaskPhase");
  // base/status.cc keeps StatusCode's table to itself: walk its values.
  const int codes = Count(StatusCode::kOk);
  for (int i = 0; i < codes; ++i) {
    const StatusCode code = static_cast<StatusCode>(i);
    EXPECT_EQ(ParseStatusCode(StatusCodeName(code)), code) << StatusCodeName(code);
  }
}

TEST(NamesTest, TheFunctionsNameFromTheTables) {
  EXPECT_STREQ(EndReasonName(EndReason::kStoppedEarly), "stopped_early");
  EXPECT_EQ(ParseEventCode("restarted_alone"), EventCode::kRestartedAlone);
  EXPECT_STREQ(JobStateName(JobState::kOutOfMemory), "OUT_OF_MEMORY");
  EXPECT_EQ(ParseStatusCode("not_found"), StatusCode::kNotFound);
  EXPECT_EQ(ParseStatusCode("what"), StatusCode::kUnknown) << "the wire's unknown code";
}

// ----------------------------------------------- schema/openapi.yaml's enums

YAML::Node Schemas() {
  static const YAML::Node doc =
      YAML::LoadFile(std::string(TFSLURM_SOURCE_DIR) + "/schema/openapi.yaml");
  return doc["components"]["schemas"];
}

// The document's enum at `path` (a schema name, then property names).
std::vector<std::string> DocumentEnum(std::initializer_list<const char*> path) {
  // reset, not =: a yaml-cpp Node's = assigns into the node it refers to.
  YAML::Node node;
  node.reset(Schemas());
  bool first = true;
  for (const char* key : path) {
    YAML::Node next = first ? node[key] : node["properties"][key];
    first = false;
    if (!next) {
      ADD_FAILURE() << "no " << key << " in schema/openapi.yaml";
      return {};
    }
    node.reset(next);
  }
  std::vector<std::string> out;
  for (const auto& v : node["enum"]) out.push_back(v.as<std::string>());
  return out;
}

template <typename E, size_t N>
std::vector<std::string> Names(const EnumName<E> (&table)[N], bool with_empty = false) {
  std::vector<std::string> out;
  if (with_empty) out.push_back("");
  for (const EnumName<E>& e : table) out.push_back(e.name);
  return out;
}

std::vector<std::string> Sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(NamesTest, OpenApisEnumsAreTheCodesNames) {
  EXPECT_EQ(DocumentEnum({"ExperimentState"}), Names(kExperimentStateNames));
  EXPECT_EQ(DocumentEnum({"Attempt", "state"}), Names(kAttemptStateNames));
  EXPECT_EQ(Sorted(DocumentEnum({"Attempt", "end_reason"})),
            Sorted(Names(kEndReasonNames, /*with_empty=*/true)))
      << "\"\" while the attempt runs";
  EXPECT_EQ(DocumentEnum({"Task", "state"}), Names(kTaskStateNames));
  EXPECT_EQ(DocumentEnum({"Event", "what"}), Names(kEventCodeNames));
  EXPECT_EQ(Sorted(DocumentEnum({"SlurmState"})), Sorted(Names(kJobStateNames, true)))
      << "\"\" before Slurm reported a state";
  EXPECT_EQ(DocumentEnum({"ExperimentSpec", "framework"}), Names(kFrameworkNames));
  EXPECT_EQ(DocumentEnum({"ExperimentSpec", "success"}), Names(kSuccessPolicyNames));
  // "ok" is no error and "unknown" is answered as internal (api/errors.cc).
  std::vector<std::string> codes;
  for (int i = 0; i < Count(StatusCode::kOk); ++i) {
    const StatusCode code = static_cast<StatusCode>(i);
    if (code != StatusCode::kOk && code != StatusCode::kUnknown)
      codes.push_back(StatusCodeName(code));
  }
  EXPECT_EQ(Sorted(DocumentEnum({"Error", "error", "code"})), Sorted(codes));
  for (const char* sweep : {"Sweep", "SweepSummary"}) {
    SCOPED_TRACE(sweep);
    EXPECT_EQ(DocumentEnum({sweep, "state"}), Names(kSweepStateNames));
  }
  EXPECT_EQ(DocumentEnum({"SweepTrial", "state"}), Names(kSweepTrialStateNames));
  EXPECT_EQ(DocumentEnum({"SweepTrial", "experiment_state"}), Names(kExperimentStateNames));
  // restart.on names the end reasons a restart may follow.
  YAML::Node on = Schemas()["RestartPolicy"]["properties"]["on"]["items"]["enum"];
  ASSERT_TRUE(on);
  for (const auto& v : on)
    EXPECT_TRUE(ParseEndReason(v.as<std::string>())) << v.as<std::string>() << " in restart.on";
}

}  // namespace
}  // namespace tfslurm
