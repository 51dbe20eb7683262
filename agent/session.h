// The agent's life with the service: register, run the assigned program,
// heartbeat, report checkpoints, obey Shutdown, report the exit, and keep all
// of that going across broken streams.
//
//   AwaitingAssignment --Assignment--> Running --program ends--> Reporting --ack--> exit
//                 ^                                                          |
//                 +------NextAttempt------ Standby <--ack, stay_for_next_attempt
//                    (Assignment: Standby --> Running, the program alone, same attempt)
//
// - AwaitingAssignment: Register (reconnect=false) on every new stream until
//   an Assignment arrives. A permanent Refused ends the agent (exit 3); a
//   temporary one, or a broken stream, means registering again after a
//   backoff. A service that does not know the experiment (maybe another
//   tfslurmd than the job's) is retried the same way, for at most
//   unknown_experiment_timeout, in every phase.
// - Running: the program runs whatever happens to the stream. A broken stream
//   is reopened with backoff and Register(reconnect=true, child_pid); a
//   repeated Assignment is ignored. Heartbeat every heartbeat_interval_ms;
//   when asked to report, about once a second Progress for a new checkpoint
//   step and Scalars for new training scalars. Shutdown: SIGTERM
//   to the program's group, SIGKILL after the grace. A permanent Refused
//   (the attempt is no longer current: another attempt may be writing the
//   same MODEL_DIR) stops the program the same way and ends with exit 3.
//   The reporting task also follows the program's training scalars
//   (ScalarWatch, baseline taken before the program starts) about once a
//   second and sends them as Scalars; points that cannot be sent wait in a
//   bounded buffer until a stream is open again.
// - Reporting: Exited, then WritesDone; the service finishing the stream with
//   OK is the acknowledgment. A stream that breaks first is reopened and the
//   report sent again, until --exit-report-timeout. A stream that stays open
//   without the acknowledgment is given up after --exit-ack-timeout.
// - Standby (the Assignment's stay_for_next_attempt, restart.in_allocation):
//   after the acknowledgment the agent stays in the job, registered with
//   standby set, and waits. NextAttempt: it takes the new attempt number,
//   moves its output to the attempt's log directory, reserves a fresh port
//   and registers again (AwaitingAssignment). An Assignment: the service
//   restarts this program alone in the same attempt (a TF worker or
//   evaluator under parameter servers, restart.max_task_restarts), on the
//   same port, over the standby stream (Running). Release, a permanent
//   refusal, SIGTERM, or no stream for --exit-report-timeout: it exits.
//
// Exit status of the agent: 0 when the program was reaped by a Shutdown (ps
// tasks never end on their own; being reaped is their normal end, and the
// Slurm step must end COMPLETED), otherwise the program's own status (its
// exit code, or 128 + signal).
//
// Thread safety: not thread-safe; everything runs on the thread calling Run.
// Stream threads only post events (PostEvent): into `events_` under
// `events_mu_`, then a write to `event_fd_` (set before any stream exists).
// Every other member is the Run thread's alone.
#ifndef TFSLURM_AGENT_SESSION_H_
#define TFSLURM_AGENT_SESSION_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "agent.pb.h"
#include "agent/backoff.h"
#include "agent/checkpoint_watch.h"
#include "agent/child_process.h"
#include "agent/memory_cgroup.h"
#include "agent/port_reservation.h"
#include "agent/scalar_watch.h"
#include "agent/service_stream.h"
#include "agent/signal_catchers.h"
#include "agent/slurm_env.h"
#include "agent/tf_config_file.h"
#include "base/mutex.h"
#include "base/status.h"
#include "schema/agent_exit.h"

namespace tfslurm::agent {

inline constexpr int kExitRefused = kAgentExitRefused;

struct SessionOptions {
  StreamOptions stream;
  std::string experiment_id;
  int attempt = 0;
  std::string secret;
  std::string address;  // reported in Register
  int port = 0;         // the reserved port, reported in Register
  std::chrono::milliseconds exit_ack_timeout{std::chrono::seconds(30)};
  std::chrono::milliseconds exit_report_timeout{std::chrono::seconds(120)};
  // How long a service that does not know the experiment is retried before
  // its refusal counts as final (schema/agent.proto, Refused).
  std::chrono::milliseconds unknown_experiment_timeout{std::chrono::seconds(300)};
  std::chrono::milliseconds reconnect_initial{200};
  std::chrono::milliseconds reconnect_max{std::chrono::seconds(5)};
  // Called when the agent moves to the next attempt in its job: its log
  // lines name the attempt, and the task's output moves to `log_dir` (empty:
  // it stays where it is).
  std::function<void(int attempt, const std::string& log_dir)> on_next_attempt;
  // TLS (service_access.h): after a stream failed before it opened while no
  // program runs, the reason the service cannot be verified, if that is
  // why; the agent then exits kAgentExitUnverifiedService. Null: plaintext.
  std::function<std::optional<std::string>()> why_unverified;
  // Site mode: a fresh MUNGE credential for a payload (Register's
  // TaskRef.uid_credential). Null in personal mode.
  std::function<StatusOr<std::string>(const std::string& payload)> uid_credential;
  // The node's relay (agent/relay/relay_route.h): the socket each new stream
  // goes through, nullopt for straight to the service. Null: always straight.
  std::function<std::optional<std::string>()> relay_socket;
};

class Session {
 public:
  // `signal_fd` comes from OpenSignalFd; the session does not own it.
  // `port` is the program's (options.port is ignored): the session holds it,
  // and a fresh one for each attempt in place.
  Session(SessionOptions options, TaskIdentity identity, int signal_fd,
          std::optional<PortReservation> port = std::nullopt);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Runs until the agent is done; returns the agent's exit status.
  int Run();

 private:
  using Clock = std::chrono::steady_clock;
  enum class Phase { kAwaitingAssignment, kRunning, kReporting, kStandby };

  // Stream lifecycle.
  void Connect();
  void PostEvent(StreamEvent event) ABSL_LOCKS_EXCLUDED(events_mu_);  // any thread
  void HandleStreamEvents() ABSL_LOCKS_EXCLUDED(events_mu_);
  void OnStreamEnded(const grpc::Status& status);
  void ScheduleReconnect();
  tfslurm::agent::v1::AgentMessage NewMessage() const;
  void Send(tfslurm::agent::v1::AgentMessage message);

  // Messages from the service.
  void OnServiceMessage(const tfslurm::agent::v1::ServiceMessage& message);
  void OnShutdown(const tfslurm::agent::v1::Shutdown& shutdown);
  void OnRefused(const tfslurm::agent::v1::Refused& refused);
  // Restarts in place (Standby).
  void EnterStandby();
  void OnNextAttempt(const tfslurm::agent::v1::NextAttempt& next);
  // An Assignment while in standby: the service restarts this program alone
  // (a TF worker or evaluator under parameter servers) in the same attempt.
  void RestartProgramAlone(const tfslurm::agent::v1::Assignment& assignment);
  // Clears what belonged to the last program run, before the next one.
  void ForgetProgram();

  // The program.
  void StartProgram(const tfslurm::agent::v1::Assignment& assignment);
  void StopProgram(std::chrono::milliseconds grace);
  // Reads /proc/PID/exe of the program into program_exe_, while it runs.
  void ProbeProgramExe();
  void ReapProgram();
  void OnProgramEnded(const ExitStatus& status);
  // The program could not be started: `why` is logged and reported as the
  // exit's detail, a failure at start-up, with the shell's `exit_code`.
  void FailToStart(const std::string& why, int exit_code);
  void PollCheckpoint();
  void SendProgress(const CheckpointState& state);
  void PollScalars(bool final);
  void SendScalars();
  void SendScalarMessage(const std::vector<ScalarPoint>& points);
  void ResendRecentScalars();
  void SendExitReport();

  void HandleSignals();
  void RunDueTimers();
  int PollTimeoutMs() const;
  int FinalExitStatus() const;
  void Finish(int exit_status) { exit_status_ = exit_status; }

  const SessionOptions options_;
  const TaskIdentity identity_;
  // The attempt this agent serves and its program's port: the job's first,
  // then each attempt in place's.
  int attempt_;
  std::optional<PortReservation> port_reservation_;
  int port_;
  const int signal_fd_;
  int event_fd_ = -1;

  Phase phase_ = Phase::kAwaitingAssignment;
  std::optional<int> exit_status_;

  // The stream, and what the stream threads post to the main loop.
  std::unique_ptr<ServiceStream> stream_;
  uint64_t last_stream_id_ = 0;
  Clock::time_point stream_opened_at_;
  bool stream_opened_ = false;  // the current stream's first message went out
  int failed_connections_ = 0;  // since the last stream that worked, for the log
  bool reconnect_allowed_ = true;
  Backoff backoff_;
  Mutex events_mu_;
  std::deque<StreamEvent> events_ ABSL_GUARDED_BY(events_mu_);

  // The program.
  std::optional<tfslurm::agent::v1::Assignment> assignment_;
  std::optional<ChildProcess> child_;
  std::optional<ExitStatus> program_status_;
  // Why the program ended, when the agent knows more than its exit status
  // (it could not be started); sent as Exited.detail.
  std::string exit_detail_;
  // The program as started (ResolveProgram) and the file its process ran
  // last (/proc/PID/exe, read every kExeProbeInterval for its first
  // seconds: a shim or `env python3` execs the interpreter a moment after
  // the start): both named with an import error (DescribeProgramThatRan).
  std::string program_started_;
  std::string program_exe_;
  // Where a TF_CONFIG too long for the environment goes (tf_config_file.h).
  TfConfigFile tf_config_file_{TemporaryDirectory()};
  int exe_probes_left_ = 0;
  // The failure repeats at every start (Exited.at_startup): exec failed, or
  // the program's last error line says so (RepeatsAtStartup).
  bool exit_at_startup_ = false;
  // An Assignment has come in this agent's life: its registrations no longer
  // carry its start (Register.started_after_launch_ms), counted once.
  bool assigned_once_ = false;
  // The size of the task's output file when the program started (nullopt
  // when stderr is not a regular file): its own lines come after it.
  std::optional<int64_t> output_start_;
  // The program's memory cgroup (the agent's) and its OOM kills when the
  // program started: a kill counted since, of a program dead of SIGKILL,
  // is the cause reported.
  std::optional<MemoryCgroup> memory_cgroup_;
  std::optional<int64_t> oom_kills_at_start_;
  std::optional<CheckpointWatch> checkpoints_;
  std::optional<ScalarWatch> scalar_watch_;
  ScalarBuffer scalar_buffer_;
  // The points sent last (at most one message's worth), sent again on the
  // next stream after one broke: a service killed with them unread in its
  // socket never stored them, and the store keeps a point once (by tag,
  // attempt and step), so a second copy costs nothing.
  std::deque<ScalarPoint> recently_sent_;
  std::chrono::milliseconds heartbeat_interval_{5000};
  bool shutdown_requested_ = false;  // the program is being reaped
  bool refused_permanently_ = false;
  std::optional<uint64_t> exit_reported_on_;  // stream that carries Exited

  // Timers; unset when not armed.
  std::optional<Clock::time_point> reconnect_at_;
  // Since when the service has said it does not know the experiment; reset
  // by anything that shows it does (an Assignment, a Shutdown, a stream that
  // lived without a refusal).
  std::optional<Clock::time_point> unknown_experiment_since_;
  std::optional<Clock::time_point> heartbeat_at_;
  std::optional<Clock::time_point> progress_poll_at_;  // checkpoints and scalars
  TimeLimitWarning time_limit_warning_;                // SIGUSR1 only for a program that catches it
  std::optional<Clock::time_point> kill_at_;
  std::optional<Clock::time_point> exe_probe_at_;  // ProbeProgramExe
  std::optional<Clock::time_point> ack_deadline_;
  std::optional<Clock::time_point> report_deadline_;
  // Standby since a stream ended, and no stream the service took (its
  // Register written) since: given up at the deadline.
  std::optional<Clock::time_point> standby_deadline_;
};

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_SESSION_H_
