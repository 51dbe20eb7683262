// Session's side of the program (session.h): starting it with its
// Assignment, stopping and reaping it, following its checkpoints and training
// scalars, reporting its exit; and the signals and timers of the agent's one
// thread.
#include "agent/session.h"

#include <fmt/ranges.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <random>

#include "agent/child_env.h"
#include "agent/container_command.h"
#include "agent/exit_cause.h"
#include "agent/signal_catchers.h"
#include "base/build_info.h"
#include "base/unsafe_text.h"

namespace tfslurm::agent {

using std::chrono::milliseconds;

namespace {

constexpr milliseconds kDefaultHeartbeat{5000};
// How often the reporting task looks for new checkpoints and training
// scalars: a stat per followed file when nothing changed. The service's stall
// timeout runs from the last step it heard of, so this bounds how late a
// step is seen (it was the heartbeat period, 5 s by default: bench/RESULTS.md,
// "Hang detection").
constexpr milliseconds kProgressPollInterval{1000};
// How often, and how many times from its start, the program's executable is
// read (/proc/PID/exe): its first 3 s, when a shim or an `env` line execs
// the interpreter and when a failed import ends it.
constexpr milliseconds kExeProbeInterval{25};
constexpr int kExeProbes = 120;
constexpr size_t kScalarsPerMessage = 1000;

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// MODEL_DIR as the program sees it: relative to its working directory.
std::string ModelDirOf(const v1::Assignment& assignment, const std::string& workdir) {
  std::string model_dir = assignment.model_dir();
  if (model_dir.empty() && assignment.env().contains("MODEL_DIR")) {
    model_dir = assignment.env().at("MODEL_DIR");
  }
  if (!model_dir.empty() && model_dir.front() != '/' && !workdir.empty()) {
    model_dir = workdir + "/" + model_dir;
  }
  return model_dir;
}

// Follows the training scalars under MODEL_DIR and in TFSLURM_SCALARS_FILE
// (relative to the working directory, like MODEL_DIR). Called before the
// program starts: what is there already belongs to earlier attempts.
std::optional<ScalarWatch> StartScalarWatch(const v1::Assignment& assignment,
                                            const std::string& model_dir,
                                            const std::string& workdir) {
  std::string file;
  if (auto it = assignment.env().find("TFSLURM_SCALARS_FILE"); it != assignment.env().end()) {
    file = it->second;
  }
  if (!file.empty() && file.front() != '/' && !workdir.empty()) file = workdir + "/" + file;
  if (model_dir.empty() && file.empty()) return std::nullopt;
  ScalarWatchOptions options;
  options.model_dir = model_dir;
  options.scalars_file = file;
  ScalarWatch watch(std::move(options));
  watch.Baseline();
  spdlog::info("following training scalars in {}{}{}",
               model_dir.empty() ? "" : "TensorBoard event files under " + model_dir,
               !model_dir.empty() && !file.empty() ? " and " : "", file);
  return watch;
}

// The program's argv through the container launcher (beside this agent's
// binary, or installed: base::InstallLibexecDir), which imports the image once per node and starts
// the program with the runtime (container_command.h); `agent_dir`, the TF_CONFIG file's directory
// when there is one, is mounted for the program to read.
std::vector<std::string> ThroughRuntime(const v1::ContainerLaunch& container,
                                        const std::string& workdir,
                                        const std::vector<std::string>& argv,
                                        const std::string& agent_dir) {
  ContainerLaunch launch{container.runtime(), container.image(), {}, container.gpus()};
  for (const auto& m : container.mounts())
    launch.mounts.push_back({m.source(), m.target(), m.read_only()});
  const std::string launcher = "tfslurm-container-launch";
  return LauncherArgs(
      base::BesideSelfOr(launcher, std::string(base::InstallLibexecDir()) + "/" + launcher),
      WithAgentDirectory(launch, agent_dir), workdir, argv);
}

// What the program of `assignment` runs: its command, working directory
// and environment (child_env.h); what the environment leaves out is logged.
ChildSpec ChildSpecFor(const v1::Assignment& assignment, const std::string& experiment_id,
                       int attempt, int port) {
  ChildEnvInputs env_inputs;
  env_inputs.inherited = CurrentEnvironment();
  env_inputs.assignment = &assignment;
  env_inputs.experiment_id = experiment_id;
  env_inputs.attempt = attempt;
  env_inputs.port = port;
  ChildEnv env = BuildChildEnv(env_inputs);
  if (env.tf_config_unreadable)
    spdlog::error(
        "the assignment's cluster (cluster_zlib) is missing or does not inflate; the "
        "program starts without TF_CONFIG");
  for (const std::string& name : env.rejected) {
    spdlog::warn(
        "not setting environment variable '{}' from the assignment: a name must be "
        "non-empty without '=', and names and values cannot hold NUL bytes",
        name);
  }
  ChildSpec spec;
  spec.argv.assign(assignment.command().begin(), assignment.command().end());
  spec.workdir = assignment.workdir();
  spec.env = std::move(env.entries);
  return spec;
}

}  // namespace

// ---------------------------------------------------------------- program

void Session::StartProgram(const v1::Assignment& assignment) {
  assignment_ = assignment;
  assigned_once_ = true;
  phase_ = Phase::kRunning;
  heartbeat_interval_ = assignment.heartbeat_interval_ms() > 0
                            ? milliseconds(assignment.heartbeat_interval_ms())
                            : kDefaultHeartbeat;

  ChildSpec spec = ChildSpecFor(assignment, options_.experiment_id, attempt_, port_);
  spdlog::info("assigned role={} index={}; starting {} in {}", assignment.role(),
               assignment.index(), spec.argv,
               spec.workdir.empty() ? std::string("the current directory") : spec.workdir);

  const std::string model_dir = ModelDirOf(assignment, spec.workdir);
  recently_sent_.clear();  // the last program's
  if (assignment.report_checkpoints())
    scalar_watch_ = StartScalarWatch(assignment, model_dir, spec.workdir);

  if (spec.argv.empty()) return FailToStart("the assignment has no command to run", 127);
  StatusOr<bool> in_file = tf_config_file_.Apply(spec.env);
  if (!in_file.ok()) return FailToStart(in_file.status().message(), 126);
  if (*in_file)
    spdlog::info(
        "TF_CONFIG is longer than Linux passes in one environment variable: the program reads it "
        "from {}/tf_config.json through the sitecustomize module first on its PYTHONPATH",
        tf_config_file_.dir());
  // Through the runtime after the file is written: its directory is mounted.
  if (LaunchesThroughRuntime(assignment.container().runtime()))
    spec.argv = ThroughRuntime(assignment.container(), spec.workdir, spec.argv,
                               *in_file ? tf_config_file_.dir() : "");
  output_start_ = OutputSize(STDERR_FILENO);
  program_started_ = ResolveProgram(spec);
  program_exe_.clear();
  memory_cgroup_ = CurrentMemoryCgroup();
  oom_kills_at_start_ = memory_cgroup_ ? OomKills(*memory_cgroup_) : std::nullopt;
  StatusOr<ChildProcess> child = ChildProcess::Start(spec);
  if (!child.ok()) return FailToStart(child.status().message(), 126);
  child_.emplace(std::move(child).value());
  if (child_->launch_error()) {
    // The child exits 126/127 on its own; SIGCHLD reports it like any exit.
    spdlog::error("{}", *child_->launch_error());
    exit_detail_ = child_->launch_cause().value_or("");
    exit_at_startup_ = true;
  } else {
    spdlog::info("program started: pid {} (its own process group)", child_->pid());
    exe_probes_left_ = kExeProbes;
    ProbeProgramExe();
  }

  if (assignment.report_checkpoints()) {
    if (model_dir.empty()) {
      spdlog::warn("asked to report checkpoints but the assignment names no model_dir");
    } else {
      checkpoints_.emplace(
          model_dir, assignment.framework() == "pytorch" ? CheckpointLayout::kTorchFiles
                     : assignment.framework() == "jax"   ? CheckpointLayout::kJaxStepDirectories
                                                         : CheckpointLayout::kTensorflowStateFile);
      spdlog::info("watching {} for checkpoints", checkpoints_->state_file());
      PollCheckpoint();  // a resumed attempt starts from one
    }
  }
  heartbeat_at_ = Clock::now() + heartbeat_interval_;
  if (scalar_watch_ || checkpoints_) progress_poll_at_ = Clock::now() + kProgressPollInterval;
}

void Session::FailToStart(const std::string& why, int exit_code) {
  spdlog::error("{} (exit code {})", why, exit_code);
  exit_detail_ = why;
  exit_at_startup_ = true;
  OnProgramEnded(ExitStatus{.exit_code = exit_code});
}

void Session::ProbeProgramExe() {
  exe_probe_at_.reset();
  if (!child_ || child_->reaped() || exe_probes_left_-- <= 0) return;
  char target[4096];
  const std::string link = "/proc/" + std::to_string(child_->pid()) + "/exe";
  const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
  if (n > 0) program_exe_.assign(target, static_cast<size_t>(n));
  exe_probe_at_ = Clock::now() + kExeProbeInterval;
}

void Session::StopProgram(milliseconds grace) {
  if (Status s = child_->Signal(SIGTERM); !s.ok()) spdlog::warn("{}", s.message());
  kill_at_ = Clock::now() + std::max(grace, milliseconds(0));
}

void Session::ReapProgram() {
  if (!child_ || child_->reaped()) return;
  std::optional<ExitStatus> status = child_->TryWait();
  if (!status) return;
  child_->KillLeftovers();
  OnProgramEnded(*status);
}

void Session::OnProgramEnded(const ExitStatus& status) {
  phase_ = Phase::kReporting;
  program_status_ = status;
  kill_at_.reset();
  heartbeat_at_.reset();
  exe_probe_at_.reset();
  spdlog::info("the program {}{}", status.Describe(),
               shutdown_requested_ ? " (shut down by the service)" : "");
  // Killed by the kernel for memory: the program had no chance to say so.
  // (137: a shell that ran it reports the SIGKILL as its exit code.)
  if (exit_detail_.empty() && status.ShellStatus() == 128 + SIGKILL && oom_kills_at_start_) {
    std::optional<int64_t> now = OomKills(*memory_cgroup_);
    if (now && *now > *oom_kills_at_start_) {
      exit_detail_ = OomKillCause(MemoryLimit(*memory_cgroup_));
      spdlog::error("the program was {}", exit_detail_);
    }
  }
  // A failure of its own: the line of its output that says why, if any
  // (the last 64 KiB it wrote are enough for a traceback's end).
  if (exit_detail_.empty() && !shutdown_requested_ && status.ShellStatus() != 0 && output_start_) {
    if (auto tail = ReadOutputSince(STDERR_FILENO, *output_start_, 64 * 1024)) {
      exit_detail_ = LastErrorLine(*tail);
      exit_at_startup_ = !status.signal && RepeatsAtStartup(exit_detail_);
      exit_detail_ =
          WithPythonThatRan(exit_detail_, DescribeProgramThatRan(program_started_, program_exe_));
    }
  }
  // Where to look next: the core file (its place is the kernel's
  // core_pattern; in the working directory by default).
  if (status.core_dumped)
    exit_detail_ = exit_detail_.empty() ? "core dumped" : exit_detail_ + "; core dumped";
  if (refused_permanently_) {
    Finish(kExitRefused);
    return;
  }
  PollCheckpoint();  // a checkpoint written just before exiting
  progress_poll_at_.reset();
  PollScalars(/*final=*/true);  // and the last scalars, sent before Exited
  report_deadline_ = Clock::now() + options_.exit_report_timeout;
  if (stream_) SendExitReport();  // otherwise after reconnecting
}

void Session::PollCheckpoint() {
  if (!checkpoints_) return;
  if (std::optional<CheckpointState> state = checkpoints_->Poll()) {
    spdlog::info("new checkpoint: step {} ({})", state->step, state->path);
    SendProgress(*state);
  }
}

void Session::SendProgress(const CheckpointState& state) {
  v1::AgentMessage message = NewMessage();
  message.mutable_progress()->set_checkpoint_step(state.step);
  // A string field of agent.proto must be UTF-8, or the service cannot
  // parse the message at all (as for every string below).
  message.mutable_progress()->set_checkpoint_path(EscapeInvalidUtf8(state.path));
  Send(std::move(message));
}

void Session::PollScalars(bool final) {
  if (!scalar_watch_) return;
  scalar_buffer_.Add(scalar_watch_->Poll(final));
  SendScalars();
}

// Without a stream the points stay in the buffer; Connect sends them.
void Session::SendScalars() {
  while (stream_ && !scalar_buffer_.empty()) {
    std::vector<ScalarPoint> points = scalar_buffer_.Take(kScalarsPerMessage);
    SendScalarMessage(points);
    recently_sent_.insert(recently_sent_.end(), points.begin(), points.end());
    while (recently_sent_.size() > kScalarsPerMessage) recently_sent_.pop_front();
  }
}

// On a stream that follows a broken one: what the last one may have
// carried to a service that never read it.
void Session::ResendRecentScalars() {
  if (stream_ && !recently_sent_.empty())
    SendScalarMessage({recently_sent_.begin(), recently_sent_.end()});
}

void Session::SendScalarMessage(const std::vector<ScalarPoint>& points) {
  v1::AgentMessage message = NewMessage();
  for (const ScalarPoint& point : points) {
    v1::Scalar* scalar = message.mutable_scalars()->add_scalars();
    scalar->set_tag(EscapeInvalidUtf8(point.tag));
    scalar->set_step(point.step);
    scalar->set_wall_time(point.wall_time);
    scalar->set_value(point.value);
  }
  Send(std::move(message));
}

void Session::SendExitReport() {
  v1::AgentMessage message = NewMessage();
  v1::Exited* exited = message.mutable_exited();
  if (program_status_->signal != 0) {
    exited->set_signal(program_status_->signal);
  } else {
    exited->set_exit_code(program_status_->exit_code);
  }
  exited->set_reaped(shutdown_requested_);
  // What the program wrote last may be in any encoding; protobuf refuses a
  // string that is not UTF-8, and the report would be lost with it.
  if (!exit_detail_.empty()) exited->set_detail(EscapeInvalidUtf8(exit_detail_));
  exited->set_at_startup(exit_at_startup_ && !shutdown_requested_);
  Send(std::move(message));
  stream_->CloseWrites();
  exit_reported_on_ = stream_->id();
  ack_deadline_ = Clock::now() + options_.exit_ack_timeout;
}

// ---------------------------------------------------------------- signals, timers

void Session::HandleSignals() {
  signalfd_siginfo info;
  while (read(signal_fd_, &info, sizeof(info)) == sizeof(info)) {
    const int sig = static_cast<int>(info.ssi_signo);
    if (sig == SIGCHLD) {
      ReapProgram();
    } else if (child_ && !child_->reaped()) {
      if (sig == SIGUSR1 && !time_limit_warning_.PassOnNow(child_->pid())) continue;
      spdlog::info("forwarding {} to the program", SignalName(sig));
      if (Status s = child_->Signal(sig); !s.ok()) spdlog::warn("{}", s.message());
    } else if (phase_ == Phase::kAwaitingAssignment && (sig == SIGTERM || sig == SIGINT)) {
      spdlog::warn("received {} before the program started; exiting", SignalName(sig));
      Finish(128 + sig);
    } else if (phase_ == Phase::kStandby && (sig == SIGTERM || sig == SIGINT)) {
      spdlog::info("received {} while waiting for the next attempt; exiting", SignalName(sig));
      Finish(FinalExitStatus());
    } else {
      spdlog::info("received {}; no program running, ignored", SignalName(sig));
    }
    if (exit_status_) return;
  }
}

void Session::RunDueTimers() {
  auto due = [](const std::optional<Clock::time_point>& t) {
    return t.has_value() && Clock::now() >= *t;
  };
  if (due(kill_at_)) {
    kill_at_.reset();
    spdlog::warn("the program is still running after the grace period; sending SIGKILL");
    if (Status s = child_->Signal(SIGKILL); !s.ok()) spdlog::warn("{}", s.message());
  }
  if (due(exe_probe_at_)) ProbeProgramExe();
  if (due(heartbeat_at_)) {
    heartbeat_at_ = Clock::now() + heartbeat_interval_;
    v1::AgentMessage message = NewMessage();
    message.mutable_heartbeat();
    Send(std::move(message));
    if (child_ && !child_->reaped() && time_limit_warning_.HeldOneIsDue(child_->pid())) {
      if (Status s = child_->Signal(SIGUSR1); !s.ok()) spdlog::warn("{}", s.message());
    }
  }
  if (due(progress_poll_at_)) {
    progress_poll_at_ = Clock::now() + kProgressPollInterval;
    PollCheckpoint();
    PollScalars(/*final=*/false);
  }
  if (due(ack_deadline_)) {
    spdlog::warn("the service did not acknowledge the exit report within {} ms; exiting",
                 options_.exit_ack_timeout.count());
    Finish(FinalExitStatus());
    return;
  }
  if (due(report_deadline_)) {
    spdlog::error(
        "could not report the program's exit to the service at {} within {} ms; "
        "exiting with the program's status",
        options_.stream.target, options_.exit_report_timeout.count());
    Finish(FinalExitStatus());
    return;
  }
  if (due(standby_deadline_)) {
    spdlog::error(
        "no stream to the service at {} for {} ms while waiting for the next attempt; "
        "exiting",
        options_.stream.target, options_.exit_report_timeout.count());
    Finish(FinalExitStatus());
    return;
  }
  if (due(reconnect_at_) && !stream_) Connect();
}

int Session::PollTimeoutMs() const {
  std::optional<Clock::time_point> next;
  for (const auto& t : {reconnect_at_, heartbeat_at_, progress_poll_at_, kill_at_, exe_probe_at_,
                        ack_deadline_, report_deadline_, standby_deadline_}) {
    if (t && (!next || *t < *next)) next = t;
  }
  if (!next) return -1;
  auto wait = std::chrono::ceil<milliseconds>(*next - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(wait, 0, 60'000));
}

int Session::FinalExitStatus() const {
  if (shutdown_requested_) return 0;
  return program_status_ ? program_status_->ShellStatus() : 0;
}

}  // namespace tfslurm::agent
