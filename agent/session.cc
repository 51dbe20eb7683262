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
#include "agent/exit_cause.h"
#include "base/unsafe_text.h"
#include "schema/agent_exit.h"

namespace tfslurm::agent {

using std::chrono::milliseconds;

namespace {

std::string DescribeStatus(const grpc::Status& status) {
  if (status.ok()) return "OK";
  return "code " + std::to_string(static_cast<int>(status.error_code())) + ": " +
         status.error_message();
}

// Logs the first few failures of a series, then one in twelve (once a minute
// at the 5 s backoff cap), so an outage of the service does not flood the
// task's output file.
bool WorthLogging(int failures) { return failures <= 3 || failures % 12 == 0; }

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
  StreamOptions stream_options = options_.stream;
  if (options_.relay_socket) stream_options.relay_socket = options_.relay_socket();
  stream_ = std::make_unique<ServiceStream>(stream_options, ++last_stream_id_,
                                            [this](StreamEvent e) { PostEvent(std::move(e)); });
  stream_opened_at_ = Clock::now();
  stream_opened_ = false;

  v1::AgentMessage message = NewMessage();
  if (options_.uid_credential) {
    // Fresh for every Register: munged refuses to decode one twice.
    const v1::TaskRef& t = message.task();
    auto credential =
        options_.uid_credential("tfslurm-agent/1 " + t.experiment_id() + " " +
                                std::to_string(t.attempt()) + " " + std::to_string(t.proc_id()));
    if (credential.ok())
      message.mutable_task()->set_uid_credential(*credential);
    else
      spdlog::error("cannot prove this agent's uid to the service: {}",
                    credential.status().message());
  }
  v1::Register* reg = message.mutable_register_();
  reg->set_slurm_job_id(identity_.slurm_job_id);
  reg->set_node_id(identity_.node_id);
  reg->set_local_id(identity_.local_id);
  reg->set_node_name(EscapeInvalidUtf8(identity_.node_name));
  reg->set_address(EscapeInvalidUtf8(options_.address));
  reg->set_port(port_);
  reg->set_reconnect(reconnect);
  reg->set_standby(standby);
  if (child_ && !standby) reg->set_child_pid(child_->pid());
  if (!assigned_once_ && identity_.started_after_launch_ms)
    reg->set_started_after_launch_ms(*identity_.started_after_launch_ms);
  Send(std::move(message));
  if (WorthLogging(failed_connections_ + 1)) {
    spdlog::info("{} with the service at {}{}", reconnect ? "re-registering" : "registering",
                 options_.stream.target,
                 stream_options.relay_socket ? " through the node's relay" : "");
  }

  if (phase_ == Phase::kRunning) {
    // The service may have restarted: tell it the latest checkpoint again.
    if (checkpoints_ && checkpoints_->latest()) SendProgress(*checkpoints_->latest());
    ResendRecentScalars();
    SendScalars();  // what waited for a stream
    heartbeat_at_ = Clock::now() + heartbeat_interval_;
  } else if (phase_ == Phase::kReporting) {
    ResendRecentScalars();
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
      if (event.service_not_reached) stream_opened_ = false;
      OnStreamEnded(*event.ended);
    } else if (event.opened) {
      stream_opened_ = true;
      // Waiting on a stream the service took: the deadline is for waiting
      // without one.
      if (phase_ == Phase::kStandby) standby_deadline_.reset();
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
  if (!stream_opened_ && phase_ == Phase::kAwaitingAssignment && options_.why_unverified) {
    // gRPC says only that the connection failed; a handshake of our own
    // says whether the service is down (retry) or cannot be verified.
    if (std::optional<std::string> why = options_.why_unverified()) {
      spdlog::error("{}{}: {}; not registering", kUnverifiedServiceLine, options_.stream.target,
                    *why);
      Finish(kAgentExitUnverifiedService);
      return;
    }
  }

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
  for (auto* timer : {&heartbeat_at_, &progress_poll_at_, &kill_at_, &exe_probe_at_, &ack_deadline_,
                      &report_deadline_, &standby_deadline_, &unknown_experiment_since_})
    timer->reset();
}

}  // namespace tfslurm::agent
