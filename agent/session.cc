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
constexpr size_t kScalarsPerMessage = 1000;

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string DescribeStatus(const grpc::Status& status) {
  if (status.ok()) return "OK";
  return "code " + std::to_string(static_cast<int>(status.error_code())) + ": " +
         status.error_message();
}

// Logs the first few failures of a series, then one in twelve (once a minute
// at the 5 s backoff cap), so an outage of the service does not flood the
// task's output file.
bool WorthLogging(int failures) { return failures <= 3 || failures % 12 == 0; }

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

// The program's argv through the container launcher beside this agent's
// binary, which imports the image once per node and starts the program with
// the runtime (container_command.h).
std::vector<std::string> ThroughRuntime(const v1::ContainerLaunch& container,
                                        const std::string& workdir,
                                        const std::vector<std::string>& argv) {
  ContainerLaunch launch{container.runtime(), container.image(), {}, container.gpus()};
  for (const auto& m : container.mounts())
    launch.mounts.push_back({m.source(), m.target(), m.read_only()});
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  std::string dir = n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string();
  dir = dir.substr(0, dir.rfind('/') == std::string::npos ? 0 : dir.rfind('/'));
  return LauncherArgs(dir + "/tfslurm-container-launch", launch, workdir, argv);
}

}  // namespace

Session::Session(SessionOptions options, TaskIdentity identity, int signal_fd,
                 std::optional<PortReservation> port)
    : options_(std::move(options)),
      identity_(std::move(identity)),
      attempt_(options_.attempt),
      port_reservation_(std::move(port)),
      port_(port_reservation_ ? port_reservation_->port() : options_.port),
      signal_fd_(signal_fd),
      backoff_(options_.reconnect_initial, options_.reconnect_max, std::random_device{}()) {
  event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event_fd_ < 0) {
    // Without it the main loop cannot hear the stream: nothing sensible is left.
    spdlog::critical("eventfd: {}", std::strerror(errno));
    std::abort();
  }
}

Session::~Session() {
  stream_.reset();  // joins its threads before event_fd_ goes away
  if (event_fd_ >= 0) close(event_fd_);
}

int Session::Run() {
  Connect();
  while (!exit_status_) {
    RunDueTimers();
    if (exit_status_) break;
    pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {event_fd_, POLLIN, 0}};
    int n = poll(fds, 2, PollTimeoutMs());
    if (n < 0) {
      if (errno == EINTR) continue;
      spdlog::critical("poll: {}", std::strerror(errno));
      std::abort();
    }
    if (fds[0].revents & POLLIN) HandleSignals();
    if (!exit_status_ && (fds[1].revents & POLLIN)) HandleStreamEvents();
  }
  stream_.reset();
  return *exit_status_;
}

// ---------------------------------------------------------------- stream

v1::AgentMessage Session::NewMessage() const {
  v1::AgentMessage message;
  v1::TaskRef* task = message.mutable_task();
  task->set_experiment_id(options_.experiment_id);
  task->set_attempt(attempt_);
  task->set_secret(options_.secret);
  task->set_proc_id(identity_.proc_id);
  return message;
}

void Session::Send(v1::AgentMessage message) {
  if (stream_) stream_->Send(std::move(message));
}

void Session::Connect() {
  reconnect_at_.reset();
  const bool standby = phase_ == Phase::kStandby;
  const bool reconnect = assignment_.has_value() && !standby;
  stream_ = std::make_unique<ServiceStream>(options_.stream, ++last_stream_id_,
                                            [this](StreamEvent e) { PostEvent(std::move(e)); });
  stream_opened_at_ = Clock::now();

  v1::AgentMessage message = NewMessage();
  v1::Register* reg = message.mutable_register_();
  reg->set_slurm_job_id(identity_.slurm_job_id);
  reg->set_node_id(identity_.node_id);
  reg->set_local_id(identity_.local_id);
  reg->set_node_name(identity_.node_name);
  reg->set_address(options_.address);
  reg->set_port(port_);
  reg->set_reconnect(reconnect);
  reg->set_standby(standby);
  if (child_ && !standby) reg->set_child_pid(child_->pid());
  Send(std::move(message));
  if (WorthLogging(failed_connections_ + 1)) {
    spdlog::info("{} with the service at {}", reconnect ? "re-registering" : "registering",
                 options_.stream.target);
  }

  if (phase_ == Phase::kRunning) {
    // The service may have restarted: tell it the latest checkpoint again.
    if (checkpoints_ && checkpoints_->latest()) SendProgress(*checkpoints_->latest());
    SendScalars();  // what waited for a stream
    heartbeat_at_ = Clock::now() + heartbeat_interval_;
  } else if (phase_ == Phase::kReporting) {
    SendScalars();
    SendExitReport();
  }
}

void Session::PostEvent(StreamEvent event) {
  {
    MutexLock lock(events_mu_);
    events_.push_back(std::move(event));
  }
  const uint64_t one = 1;
  ssize_t ignored = write(event_fd_, &one, sizeof(one));
  (void)ignored;
}

void Session::HandleStreamEvents() {
  uint64_t count;
  ssize_t ignored = read(event_fd_, &count, sizeof(count));
  (void)ignored;
  std::deque<StreamEvent> events;
  {
    MutexLock lock(events_mu_);
    events.swap(events_);
  }
  for (StreamEvent& event : events) {
    if (exit_status_) return;
    // Events of a stream already replaced are stale.
    if (!stream_ || event.stream_id != stream_->id()) continue;
    if (event.message) {
      OnServiceMessage(*event.message);
    } else if (event.ended) {
      OnStreamEnded(*event.ended);
    } else if (event.opened && phase_ == Phase::kStandby) {
      // Waiting on a stream the service took: the deadline is for waiting
      // without one.
      standby_deadline_.reset();
    }
  }
}

void Session::OnStreamEnded(const grpc::Status& status) {
  const uint64_t id = stream_->id();
  const bool lived_long = Clock::now() - stream_opened_at_ >= options_.reconnect_max;
  stream_.reset();  // its reader thread has posted its last event

  if (phase_ == Phase::kReporting && exit_reported_on_ == id) {
    exit_reported_on_.reset();
    ack_deadline_.reset();
    if (status.ok()) {
      spdlog::info("the service acknowledged the exit report");
      if (assignment_ && assignment_->stay_for_next_attempt() && !refused_permanently_) {
        EnterStandby();
        return;
      }
      Finish(FinalExitStatus());
      return;
    }
    spdlog::warn(
        "the stream ended before the service acknowledged the exit report ({}); "
        "sending it again after reconnecting",
        DescribeStatus(status));
  }
  if (!reconnect_allowed_) return;

  if (lived_long) {
    backoff_.Reset();
    failed_connections_ = 0;
    unknown_experiment_since_.reset();
    standby_deadline_.reset();
  }
  if (phase_ == Phase::kStandby && !standby_deadline_)
    standby_deadline_ = Clock::now() + options_.exit_report_timeout;
  ++failed_connections_;
  if (WorthLogging(failed_connections_)) {
    spdlog::warn("stream to the service at {} ended ({}){}", options_.stream.target,
                 DescribeStatus(status),
                 phase_ == Phase::kRunning ? "; the program keeps running" : "");
  }
  ScheduleReconnect();
}

void Session::ScheduleReconnect() {
  milliseconds delay = backoff_.Next();
  reconnect_at_ = Clock::now() + delay;
  if (WorthLogging(failed_connections_)) {
    spdlog::info("reconnecting in {} ms (attempt {})", delay.count(), failed_connections_);
  }
}

// ---------------------------------------------------------------- messages

void Session::OnServiceMessage(const v1::ServiceMessage& message) {
  switch (message.body_case()) {
    case v1::ServiceMessage::kAssignment:
      if (phase_ == Phase::kStandby) {
        RestartProgramAlone(message.assignment());
        return;
      }
      if (phase_ != Phase::kAwaitingAssignment) {
        spdlog::debug("ignoring a repeated Assignment");
        return;
      }
      backoff_.Reset();
      failed_connections_ = 0;
      unknown_experiment_since_.reset();
      StartProgram(message.assignment());
      return;
    case v1::ServiceMessage::kShutdown:
      unknown_experiment_since_.reset();
      OnShutdown(message.shutdown());
      return;
    case v1::ServiceMessage::kRefused:
      OnRefused(message.refused());
      return;
    case v1::ServiceMessage::kNextAttempt:
      if (phase_ != Phase::kStandby) {
        spdlog::warn("ignoring NextAttempt {}: this agent is not waiting for one",
                     message.next_attempt().attempt());
        return;
      }
      OnNextAttempt(message.next_attempt());
      return;
    case v1::ServiceMessage::kRelease:
      if (phase_ == Phase::kRunning) {
        spdlog::warn("ignoring Release while the program runs ({})", message.release().reason());
        return;
      }
      spdlog::info("released by the service: {}; exiting", message.release().reason());
      Finish(FinalExitStatus());
      return;
    case v1::ServiceMessage::kSpare:
      if (phase_ != Phase::kAwaitingAssignment) {
        spdlog::warn("ignoring Spare: this agent has a task already ({})",
                     message.spare().reason());
        return;
      }
      spdlog::info("this node is a spare ({}): no program; waiting in the job",
                   message.spare().reason());
      backoff_.Reset();
      failed_connections_ = 0;
      unknown_experiment_since_.reset();
      stream_.reset();  // the standby stream replaces it
      EnterStandby();
      return;
    case v1::ServiceMessage::BODY_NOT_SET:
      break;
  }
  spdlog::warn("ignoring a message from the service without a known body (newer service?)");
}

void Session::OnShutdown(const v1::Shutdown& shutdown) {
  if (phase_ == Phase::kAwaitingAssignment) {
    spdlog::info("the service asked to shut down before any assignment (reason: {}); exiting",
                 shutdown.reason());
    Finish(0);
    return;
  }
  // The program may have ended on its own just before this message was read,
  // its SIGCHLD not handled yet: that end is its own (an exit 127 must not
  // read "reaped"), so it is collected first and reported as it is.
  if (phase_ == Phase::kRunning && !shutdown_requested_) ReapProgram();
  if (phase_ == Phase::kRunning && child_ && child_->launch_error()) {
    spdlog::info("ignoring Shutdown (reason: {}): the program could not start and is exiting",
                 shutdown.reason());
    return;
  }
  if (phase_ != Phase::kRunning || shutdown_requested_) {
    spdlog::info("ignoring Shutdown (reason: {}): the program is already {}", shutdown.reason(),
                 phase_ == Phase::kRunning ? "being stopped" : "gone");
    return;
  }
  shutdown_requested_ = true;
  const milliseconds grace(shutdown.grace_ms() > 0 ? shutdown.grace_ms()
                                                   : assignment_->shutdown_grace_ms());
  spdlog::info(
      "the service asked to shut down the program (reason: {}): SIGTERM now, "
      "SIGKILL after {} ms",
      shutdown.reason(), grace.count());
  StopProgram(grace);
}

void Session::OnRefused(const v1::Refused& refused) {
  if (refused.unknown_experiment()) {
    const auto now = Clock::now();
    if (!unknown_experiment_since_) unknown_experiment_since_ = now;
    const auto waited = std::chrono::duration_cast<milliseconds>(now - *unknown_experiment_since_);
    if (waited < options_.unknown_experiment_timeout) {
      if (WorthLogging(failed_connections_ + 1)) {
        spdlog::warn(
            "the service at {} does not know experiment '{}' ({}): it may be another tfslurmd "
            "than the one that started this job; retrying with backoff for up to {} s{}",
            options_.stream.target, options_.experiment_id, refused.reason(),
            options_.unknown_experiment_timeout.count() / 1000,
            phase_ == Phase::kRunning ? "; the program keeps running" : "");
      }
      stream_->Cancel();  // its end schedules the reconnect
      return;
    }
    spdlog::error("the service at {} still does not know experiment '{}' after {} s",
                  options_.stream.target, options_.experiment_id, waited.count() / 1000);
  } else if (!refused.permanent()) {
    spdlog::warn("the service refused this task for now: {}; retrying", refused.reason());
    stream_->Cancel();  // its end schedules the reconnect
    return;
  }
  spdlog::error("the service refused this task: {}", refused.reason());
  refused_permanently_ = true;
  reconnect_allowed_ = false;
  stream_->Cancel();
  switch (phase_) {
    case Phase::kAwaitingAssignment:
      Finish(kExitRefused);
      return;
    case Phase::kRunning:
      // The service no longer accepts this attempt; a newer one may already
      // be writing the same MODEL_DIR, so the program must not go on.
      spdlog::error("stopping the program: the service no longer accepts this task");
      if (!shutdown_requested_ && !kill_at_) {
        StopProgram(milliseconds(assignment_->shutdown_grace_ms()));
      }
      return;
    case Phase::kReporting:
      spdlog::error("exiting without an acknowledged exit report");
      Finish(FinalExitStatus());
      return;
    case Phase::kStandby:
      Finish(FinalExitStatus());
      return;
  }
}

// ---------------------------------------------------------------- restarts in place

void Session::EnterStandby() {
  phase_ = Phase::kStandby;
  // The exit is reported: its deadline is over. Waiting has its own
  // (standby_deadline_, armed only while no stream is open).
  report_deadline_.reset();
  spdlog::info(
      "waiting in the job for the service's word: the next attempt here (a restart in place), "
      "or release");
  backoff_.Reset();
  failed_connections_ = 0;
  Connect();
}

void Session::OnNextAttempt(const v1::NextAttempt& next) {
  if (next.attempt() <= attempt_) {
    spdlog::warn("ignoring NextAttempt {}: this agent serves attempt {} already", next.attempt(),
                 attempt_);
    return;
  }
  // A fresh port: the last program's connections may linger on the old one,
  // and its peers may still dial it.
  StatusOr<PortReservation> fresh = PortReservation::Reserve();
  if (!fresh.ok()) {
    spdlog::error("cannot reserve a port for attempt {}: {}; exiting", next.attempt(),
                  fresh.status().message());
    Finish(FinalExitStatus());
    return;
  }
  const int from = attempt_;
  attempt_ = next.attempt();
  port_reservation_ = std::move(fresh).value();
  port_ = port_reservation_->port();
  if (options_.on_next_attempt) options_.on_next_attempt(attempt_, next.log_dir());
  spdlog::info("attempt {} runs in this job after attempt {} ({}); program port {}", attempt_, from,
               next.reason(), port_);
  ForgetProgram();
  phase_ = Phase::kAwaitingAssignment;
  stream_.reset();  // the standby stream: the next registers for the new attempt
  Connect();
}

void Session::RestartProgramAlone(const v1::Assignment& assignment) {
  // The rest of the attempt runs on (a TF worker's chief keeps training and
  // takes it back at the same address), so the attempt, the port and the
  // stream stay: the standby stream is the task's stream again.
  spdlog::info(
      "the service restarts this task's program alone in attempt {}, on the same port {}: the "
      "rest of the attempt runs on",
      attempt_, port_);
  ForgetProgram();
  backoff_.Reset();
  failed_connections_ = 0;
  StartProgram(assignment);
}

void Session::ForgetProgram() {
  assignment_.reset();
  child_.reset();
  program_status_.reset();
  exit_detail_.clear();
  exit_at_startup_ = false;
  output_start_.reset();
  memory_cgroup_.reset();
  oom_kills_at_start_.reset();
  checkpoints_.reset();
  scalar_watch_.reset();
  shutdown_requested_ = false;
  exit_reported_on_.reset();
  for (auto* timer : {&heartbeat_at_, &progress_poll_at_, &kill_at_, &ack_deadline_,
                      &report_deadline_, &standby_deadline_, &unknown_experiment_since_})
    timer->reset();
}

// ---------------------------------------------------------------- program

void Session::StartProgram(const v1::Assignment& assignment) {
  assignment_ = assignment;
  phase_ = Phase::kRunning;
  heartbeat_interval_ = assignment.heartbeat_interval_ms() > 0
                            ? milliseconds(assignment.heartbeat_interval_ms())
                            : kDefaultHeartbeat;

  ChildEnvInputs env_inputs;
  env_inputs.inherited = CurrentEnvironment();
  env_inputs.assignment = &assignment;
  env_inputs.experiment_id = options_.experiment_id;
  env_inputs.attempt = attempt_;
  env_inputs.port = port_;
  ChildEnv env = BuildChildEnv(env_inputs);
  if (env.tf_config_unreadable)
    spdlog::error(
        "the assignment's cluster_zlib does not inflate; the program starts without "
        "TF_CONFIG");
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
  if (!spec.argv.empty() && LaunchesThroughRuntime(assignment.container().runtime()))
    spec.argv = ThroughRuntime(assignment.container(), spec.workdir, spec.argv);
  spdlog::info("assigned role={} index={}; starting {} in {}", assignment.role(),
               assignment.index(), spec.argv,
               spec.workdir.empty() ? std::string("the current directory") : spec.workdir);

  const std::string model_dir = ModelDirOf(assignment, spec.workdir);
  if (assignment.report_checkpoints()) {
    scalar_watch_ = StartScalarWatch(assignment, model_dir, spec.workdir);
  }

  if (spec.argv.empty()) {
    spdlog::error("the assignment has no command to run (exit code 127)");
    exit_detail_ = "the assignment has no command to run";
    exit_at_startup_ = true;
    OnProgramEnded(ExitStatus{.exit_code = 127});
    return;
  }
  output_start_ = OutputSize(STDERR_FILENO);
  memory_cgroup_ = CurrentMemoryCgroup();
  oom_kills_at_start_ = memory_cgroup_ ? OomKills(*memory_cgroup_) : std::nullopt;
  StatusOr<ChildProcess> child = ChildProcess::Start(spec);
  if (!child.ok()) {
    spdlog::error("{} (exit code 126)", child.status().message());
    exit_detail_ = child.status().message();
    exit_at_startup_ = true;
    OnProgramEnded(ExitStatus{.exit_code = 126});
    return;
  }
  child_.emplace(std::move(child).value());
  if (child_->launch_error()) {
    // The child exits 126/127 on its own; SIGCHLD reports it like any exit.
    spdlog::error("{}", *child_->launch_error());
    exit_detail_ = child_->launch_cause().value_or("");
    exit_at_startup_ = true;
  } else {
    spdlog::info("program started: pid {} (its own process group)", child_->pid());
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
  message.mutable_progress()->set_checkpoint_path(state.path);
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
    v1::AgentMessage message = NewMessage();
    for (ScalarPoint& point : scalar_buffer_.Take(kScalarsPerMessage)) {
      v1::Scalar* scalar = message.mutable_scalars()->add_scalars();
      scalar->set_tag(std::move(point.tag));
      scalar->set_step(point.step);
      scalar->set_wall_time(point.wall_time);
      scalar->set_value(point.value);
    }
    Send(std::move(message));
  }
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
  if (!exit_detail_.empty()) exited->set_detail(exit_detail_);
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
  for (const auto& t : {reconnect_at_, heartbeat_at_, progress_poll_at_, kill_at_, ack_deadline_,
                        report_deadline_, standby_deadline_}) {
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
