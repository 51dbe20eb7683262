#include "agent/agent.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>

#include "agent/address.h"
#include "agent/child_env.h"
#include "agent/port_reservation.h"
#include "agent/relay/relay_route.h"
#include "agent/service_access.h"
#include "agent/session.h"
#include "agent/signals.h"

namespace tfslurm::agent {
namespace {

// spdlog patterns treat '%' as a flag.
std::string EscapePattern(const std::string& text) {
  std::string out;
  for (char c : text) {
    out.push_back(c);
    if (c == '%') out.push_back('%');
  }
  return out;
}

std::chrono::milliseconds Seconds(double s) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(s * 1000)));
}

// A typo here would otherwise only show as endless reconnect attempts.
bool LooksLikeHostPort(const std::string& target) {
  const size_t colon = target.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == target.size()) return false;
  const std::string port = target.substr(colon + 1);
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) return false;
  const int number = std::stoi(port);
  return number > 0 && number <= 65535;
}

// Points stdout and stderr at DIR/task-<proc>.out, appending, as srun's
// --output would; the program inherits both.
bool RedirectOutput(const std::string& dir, const std::string& proc) {
  const std::string path = dir + "/task-" + proc + ".out";
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
  if (fd < 0) {
    spdlog::error("--log-dir: cannot open {}: {}", path, std::strerror(errno));
    return false;
  }
  bool ok = dup2(fd, STDOUT_FILENO) >= 0 && dup2(fd, STDERR_FILENO) >= 0;
  if (!ok) spdlog::error("--log-dir: cannot redirect output to {}: {}", path, std::strerror(errno));
  close(fd);
  return ok;
}

}  // namespace

void SetUpLogging(const std::string& experiment_id, int attempt, const std::string& proc_id) {
  auto logger = spdlog::get("tfslurm-agent");
  if (!logger) logger = spdlog::stderr_logger_mt("tfslurm-agent");
  logger->set_pattern(EscapePattern("[tfslurm-agent exp=" + experiment_id + " attempt=" +
                                    std::to_string(attempt) + " proc=" + proc_id + "] ") +
                      "%Y-%m-%dT%H:%M:%S.%e %l: %v");
  logger->flush_on(spdlog::level::trace);  // the output file is read live, and we may be killed
  spdlog::set_default_logger(logger);
}

namespace {

// The timeouts must be positive; false (after logging why) when one is not.
bool TimeoutsUsable(const AgentOptions& options) {
  for (double value : {options.exit_ack_timeout_s, options.exit_report_timeout_s,
                       options.unknown_experiment_timeout_s}) {
    if (!(value > 0)) {
      spdlog::error(
          "--exit-ack-timeout, --exit-report-timeout and --unknown-experiment-timeout must be "
          "positive");
      return false;
    }
  }
  return true;
}

// The value of `v`, or nullopt after logging its error.
template <typename T>
std::optional<T> OrLog(StatusOr<T> v) {
  if (v.ok()) return std::move(v).value();
  spdlog::error("{}", v.status().message());
  return std::nullopt;
}

// The attempt secret: from the file TFSLURM_SECRET_FILE names (tfslurmd's
// jobs), else from TFSLURM_SECRET; never from the command line, which every
// user of the node sees in `ps`.
StatusOr<std::string> ReadAttemptSecret(const EnvLookup& env) {
  const std::optional<std::string> path = env(kSecretFileVariable);
  if (!path || path->empty()) {
    std::optional<std::string> secret = env(kSecretVariable);
    if (secret && !secret->empty()) return *secret;
    return InvalidArgument(std::string(kSecretFileVariable) + " and " + kSecretVariable +
                           " are not set: the job passes the attempt secret to the agent in a "
                           "file its environment names (never on the command line)");
  }
  int fd = open(path->c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return InvalidArgument(std::string("cannot read the attempt secret from ") +
                           kSecretFileVariable + " '" + *path + "': " + strerror(errno));
  std::string secret(4096, '\0');
  struct stat st;
  ssize_t n =
      fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, secret.data(), secret.size()) : -1;
  close(fd);
  if (n <= 0 || n == static_cast<ssize_t>(secret.size()))
    return InvalidArgument(std::string(kSecretFileVariable) + " '" + *path +
                           "' is not a regular file holding an attempt secret");
  secret.resize(static_cast<size_t>(n));
  return secret;
}

SessionOptions SessionOptionsFor(const AgentOptions& options, const std::string& secret,
                                 const std::string& address, int port, int proc_id) {
  SessionOptions session_options;
  session_options.stream.target = options.service;
  session_options.stream.keepalive_time = Seconds(options.keepalive_s);
  session_options.experiment_id = options.experiment_id;
  session_options.attempt = options.attempt;
  session_options.secret = secret;
  session_options.address = address;
  session_options.port = port;
  session_options.exit_ack_timeout = Seconds(options.exit_ack_timeout_s);
  session_options.exit_report_timeout = Seconds(options.exit_report_timeout_s);
  session_options.unknown_experiment_timeout = Seconds(options.unknown_experiment_timeout_s);
  session_options.on_next_attempt = [experiment = options.experiment_id,
                                     proc = std::to_string(proc_id)](int attempt,
                                                                     const std::string& log_dir) {
    if (!log_dir.empty()) RedirectOutput(log_dir, proc);
    SetUpLogging(experiment, attempt, proc);
  };
  return session_options;
}

// The node's relay when the job asks for one; any reason not to use it is
// logged and the agent goes straight to the service.
void ConfigureRelay(const AgentOptions& options, const EnvLookup& env,
                    SessionOptions& session_options) {
  auto place = RelayPlaceFor(env, getuid(), options.service);
  if (!place.ok()) {
    spdlog::warn("{}", place.status().message());
    return;
  }
  if (!*place) return;
  auto command = SelfRelayCommand(
      options.argc,
      {"--socket", (*place)->socket_path, "--service", options.service, "--keepalive",
       std::to_string(options.keepalive_s), "--log-level", options.log_level, "--remove-at-exit",
       (*place)->lock_path, "--remove-at-exit", (*place)->log_path});
  if (!command.ok()) {
    spdlog::warn("not using the node's relay: {}", command.status().message());
    return;
  }
  auto route = std::make_shared<RelayRoute>(std::move(**place), std::move(*command));
  session_options.relay_socket = [route] { return route->SocketForNextStream(); };
}

}  // namespace

int RunAgent(const AgentOptions& options, const EnvLookup& env) {
  const std::optional<std::string> proc = env("SLURM_PROCID");
  SetUpLogging(options.experiment_id, options.attempt, proc.value_or("?"));
  spdlog::set_level(spdlog::level::from_str(options.log_level));
  if (!options.log_dir.empty()) {
    if (!proc || proc->empty() || proc->find_first_not_of("0123456789") != std::string::npos) {
      spdlog::error("--log-dir needs SLURM_PROCID, a task number; got '{}'", proc.value_or(""));
      return kExitUsage;
    }
    if (!RedirectOutput(options.log_dir, *proc)) return kExitUsage;
  }
  if (!LooksLikeHostPort(options.service)) {
    spdlog::error("--service '{}' is not HOST:PORT (e.g. tfslurmd.example.org:7070)",
                  options.service);
    return kExitUsage;
  }
  std::optional<TaskIdentity> identity =
      OrLog(ReadTaskIdentity(env, std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count()));
  if (!identity) return kExitUsage;
  if (options.experiment_id.empty() || options.attempt < 1) {
    spdlog::error("--experiment must be non-empty and --attempt at least 1 (got '{}' and {})",
                  options.experiment_id, options.attempt);
    return kExitUsage;
  }
  const std::optional<std::string> secret = OrLog(ReadAttemptSecret(env));
  if (!secret) return kExitUsage;
  if (!TimeoutsUsable(options)) return kExitUsage;
  std::optional<AddressSpec> spec = OrLog(ParseAddressSpec(options.address));
  if (!spec) return kExitUsage;
  std::optional<std::string> address = OrLog(ResolveAddress(*spec));
  if (!address) return kExitUsage;
  std::optional<PortReservation> port = OrLog(PortReservation::Reserve());
  if (!port) return kExitUsage;
  std::optional<int> signal_fd = OrLog(OpenSignalFd());
  if (!signal_fd) return kExitUsage;

  spdlog::info("Slurm job {} task {} (node {} '{}', local task {}); program address {}:{}",
               identity->slurm_job_id, identity->proc_id, identity->node_id, identity->node_name,
               identity->local_id, *address, port->port());
  SessionOptions session_options =
      SessionOptionsFor(options, *secret, *address, port->port(), identity->proc_id);
  if (Status s = ConfigureServiceAccess(env, session_options); !s.ok()) {
    spdlog::error("{}", s.message());
    return kExitUsage;
  }
  ConfigureRelay(options, env, session_options);
  // The session holds the port for the program's lifetime, and a fresh one
  // for each attempt in place.
  Session session(std::move(session_options), std::move(*identity), *signal_fd, std::move(*port));
  return session.Run();
}

}  // namespace tfslurm::agent
