// Whether an agent's stream goes through its node's relay (node_relay.h),
// and starting that relay when none runs.
//
// The job asks for it: tfslurmd's jobs set TFSLURM_AGENT_RELAY=node when
// the site runs tfslurmd with --agent-relay node (docs/design.md). Then the
// node's agents of one job step meet at files in a directory only their
// user can enter, ${TMPDIR:-/tmp}/tfslurm-relay-UID (mode 0700, owned by
// the user, not a link: checked, never trusted; another user's directory
// there means no relay, never a relay of theirs), named by the job, the
// step, the node and a hash of the cluster's name and the service's address
// (SERVICE below: job ids repeat across clusters):
//   JOB.STEP.NODE.SERVICE.lock  the relay holds an exclusive flock on it
//                       while it lives (whoever takes it starts one), and
//                       its pid is written in it;
//   JOB.STEP.NODE.SERVICE.sock  where it listens, made once it serves;
//   JOB.STEP.NODE.SERVICE.log   its log.
// Agents of other nodes never share a relay, even where nodes share /tmp (the
// local test cluster's hosts): the node's name is in the names.
//
// Each stream asks anew (SocketForNextStream), so a relay that ended (idle,
// killed) is replaced by the next agent that finds the lock free. Whenever
// no relay can be had within a few seconds the stream goes straight to the
// service: the relay saves connections, it is never what a task waits on.
//
// Thread safety: a RelayRoute belongs to one thread (the session's).
#ifndef TFSLURM_AGENT_RELAY_RELAY_ROUTE_H_
#define TFSLURM_AGENT_RELAY_RELAY_ROUTE_H_

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "agent/slurm_env.h"
#include "base/status.h"

namespace tfslurm::agent {

inline constexpr char kAgentRelayVariable[] = "TFSLURM_AGENT_RELAY";

struct RelayPlace {
  std::string socket_path;
  std::string lock_path;
  std::string log_path;
};

// nullopt: the job asks for no relay (TFSLURM_AGENT_RELAY unset or "off").
// An error: a value other than "node" and "off", or the directory is not
// safe to use (it says why); the agent then goes straight to the service.
// `service`: the agent's --service, HOST:PORT.
StatusOr<std::optional<RelayPlace>> RelayPlaceFor(const EnvLookup& env, unsigned uid,
                                                  const std::string& service);

class RelayRoute {
 public:
  // `relay_command`: the program and arguments that run a relay; the
  // route appends --lock-fd N (a descriptor holding the lock) to them.
  RelayRoute(RelayPlace place, std::vector<std::string> relay_command,
             std::chrono::milliseconds wait_for_socket = std::chrono::seconds(3));

  // The socket of the node's relay, started first if none runs; nullopt
  // when none could be had within wait_for_socket (the reason is logged).
  std::optional<std::string> SocketForNextStream();

  const RelayPlace& place() const { return place_; }

 private:
  // Holds the lock: starts a relay with it. False if it could not.
  bool StartRelay(int lock_fd);
  bool WaitForSocket();
  // Collects the relay this agent started once it has ended.
  void ReapRelay();

  const RelayPlace place_;
  const std::vector<std::string> relay_command_;
  const std::chrono::milliseconds wait_for_socket_;
  int failures_logged_ = 0;
  pid_t relay_pid_ = -1;  // the relay this agent started, until reaped
};

// The command that runs this same agent binary as a relay: the process's
// own command line (/proc/self/cmdline) up to the agent's path, which may
// be a dynamic loader running the agent (the container bundle,
// deploy/containers/agent-bundle.sh), then "relay" and `relay_arguments`.
// `argc`: main's, to tell the loader's words from the agent's.
StatusOr<std::vector<std::string>> SelfRelayCommand(
    int argc, const std::vector<std::string>& relay_arguments);

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_RELAY_RELAY_ROUTE_H_
