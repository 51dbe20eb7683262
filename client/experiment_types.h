// The REST API's experiment shapes as the client sees them (the service's
// side is service/api/experiments_json.cc). Parsing is lenient about absent
// and null fields, so a newer service with more fields still works; `raw`
// keeps the service's JSON as received for `-o json|yaml`.
//
// Thread safety: plain values; the parsers are pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tfslurm::client {

struct Task {
  int proc_id = 0;
  std::string role;
  int index = 0;
  std::string node;
  std::string address;
  std::string state;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::optional<double> heartbeat_age_s;  // only while running
  int local_rank = 0;                     // its index on its node (SLURM_LOCALID)
  int component = 0;   // its component of a heterogeneous job (per-role resources); 0 otherwise
  std::string detail;  // why it ended, in its agent's words; may be empty
  int restarts = 0;    // times its program was restarted alone in this attempt
};

struct Attempt {
  int number = 0;
  std::optional<int64_t> slurm_job_id;
  std::string job_name;
  std::string state;  // submitting | pending | running | ended
  std::string slurm_state;
  std::string end_reason;
  std::string reason;
  std::string nodes;
  std::optional<int64_t> start_step;
  std::string submitted_at;
  std::string started_at;
  std::string ended_at;
  // Restarted inside the job of the attempt before it (restart.in_allocation).
  bool in_place = false;
  int spec_revision = 1;  // the spec revision it ran
};

struct Event {
  int64_t id = 0;
  std::string at;
  int attempt = 0;
  std::string what;
  std::string why;
};

struct TaskCounts {
  int total = 0;
  int registered = 0;
  int running = 0;
  int done = 0;
  int failed = 0;
};

// GET /experiments/{id} fills everything; list items have no attempts,
// tasks or events.
struct Experiment {
  std::string id;
  std::string owner;
  std::string state;
  std::string reason;
  int attempt = 0;
  int restarts = 0;
  int spec_revision = 1;  // a resume with changes makes the next
  std::string model_dir;
  int64_t mem_per_task_mb = 0;
  std::string mem_explanation;
  std::optional<int64_t> checkpoint_step;
  std::string checkpoint_path;
  std::string created_at;
  std::optional<int64_t> slurm_job_id;
  std::string nodes;
  std::string slurm_state;
  std::map<std::string, TaskCounts> task_counts;  // by role
  std::vector<Attempt> attempts;
  std::vector<Task> tasks;
  std::vector<Event> events;
  nlohmann::json raw;

  bool Finished() const {
    return state == "succeeded" || state == "failed" || state == "cancelled";
  }
};

struct ExperimentList {
  std::vector<Experiment> experiments;
  int64_t total = 0;
  nlohmann::json raw;
};

// POST /experiments?dry_run=true: what would be submitted.
struct DryRun {
  std::string id;
  int64_t mem_per_task_mb = 0;
  int64_t mem_per_cpu_mb = 0;
  std::string mem_explanation;
  std::string job_name;
  std::string sbatch;
  nlohmann::json raw;
};

// GET /experiments/{id}/metrics: the experiment's training scalars. The
// series are left in `raw` (tfctl shows the latest values; -o json all).
struct TrainingMetrics {
  struct Tag {
    std::string tag;
    int64_t points = 0;    // kept
    int64_t reported = 0;  // ever reported
    std::optional<int64_t> step;
    std::optional<double> value;  // nullopt also when NaN/inf was reported
    std::optional<int> attempt;
  };
  std::vector<Tag> tags;
  // The latest steps per second, and the tag it comes from; nullopt when
  // there are too few points.
  std::optional<double> steps_per_second;
  std::string steps_per_second_tag;
  std::string tensorboard_command;  // empty without a MODEL_DIR
  nlohmann::json raw;
};

// Throw nlohmann::json::exception only when a present field has an
// impossible type (the response is then not the service's).
Experiment ExperimentFromJson(const nlohmann::json& j);
ExperimentList ExperimentListFromJson(const nlohmann::json& j);
DryRun DryRunFromJson(const nlohmann::json& j);
TrainingMetrics TrainingMetricsFromJson(const nlohmann::json& j);

}  // namespace tfslurm::client
