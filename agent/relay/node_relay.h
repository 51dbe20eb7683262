// The node's relay: one process per node and job step through which the
// node's agents reach tfslurmd over one connection (HTTP/2 streams on one
// TCP and TLS connection) instead of one connection each. At 16,384 ranks
// on 8-GPU nodes tfslurmd then holds 2,048 connections, not 16,384: fewer
// descriptors, TLS sessions and kernel buffers (bench/RESULTS.md, issue 49).
//
// Each agent stream (AgentService.Connect on the relay's Unix socket)
// becomes a lane of the relay's one stream to the service
// (AgentService.ConnectNode, node_link.h): tfslurmd then holds one stream
// per node, not one per task. To a tfslurmd without ConnectNode, each agent
// stream becomes a stream of its own on the shared channel instead, a Pipe
// (node_relay.cc): its messages go through one at a time in each direction
// (gRPC's flow control then reaches from the service to the agent),
// unchanged but for the TF cluster: the relay asks for it by digest
// (Register.cluster_by_digest), so tfslurmd sends its bytes once per
// connection, and fills them into the Assignments that name it alone
// (cluster_cache.h). Either way the agent's identity, its attempt secret
// and its MUNGE uid proof travel inside its messages, so the service checks
// them as it does without the relay; the relay adds no credential of its
// own. When the service ends a stream (or a lane), the agent's stream ends
// with the same status; when it never reached the service (the service
// down, or its certificate refused), the status carries kUpstreamNotOpened
// in its trailing metadata, so the agent knows it never reached the
// service.
//
// Lifetime: it serves until it has had no stream for `idle_exit` (after
// having had one; `first_stream_timeout` before the first), so a node's
// relay ends shortly after the node's last agent; Slurm's step end ends it
// too (it is a child of the agent that started it, so Slurm's process
// tracking finds it even without cgroups). Who starts it and where its
// socket is: relay_route.h.
//
// Thread safety: StartNodeRelay's result may be used from any thread.
#ifndef TFSLURM_AGENT_RELAY_NODE_RELAY_H_
#define TFSLURM_AGENT_RELAY_NODE_RELAY_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace tfslurm::agent {

// Trailing metadata key (and its one value, "1") of a relayed stream whose
// stream to the service never opened.
inline constexpr char kUpstreamNotOpened[] = "tfslurm-relay-upstream-not-opened";

struct NodeRelayOptions {
  std::string socket_path;  // where agents connect (a Unix socket)
  std::string service;      // tfslurmd's agent endpoint, HOST:PORT
  // TLS to the service, as the agent's (service_access.h); nullopt: plaintext.
  std::optional<std::string> tls_ca_pem;
  std::chrono::milliseconds keepalive_time{std::chrono::seconds(60)};
  std::chrono::milliseconds keepalive_timeout{std::chrono::seconds(20)};
  std::chrono::milliseconds idle_exit{std::chrono::seconds(10)};
  std::chrono::milliseconds first_stream_timeout{std::chrono::seconds(60)};
  // How long an Assignment that names its cluster by digest waits for the
  // bytes tfslurmd sent on another stream (cluster_cache.h).
  std::chrono::milliseconds cluster_wait{std::chrono::seconds(10)};
  // The node's agent streams as lanes of one stream (node_link.h); false:
  // each on a stream of its own, as to a tfslurmd without ConnectNode (for
  // tests of that path).
  bool node_streams = true;
};

class NodeRelay {
 public:
  virtual ~NodeRelay() = default;
  // Blocks until the relay has been idle as the options say, then stops
  // serving (streams still open are cancelled).
  virtual void ServeUntilIdle() = 0;
  // Stops at once: open streams end as CANCELLED.
  virtual void Shutdown() = 0;
  // How many agent streams are open now.
  virtual int open_streams() const = 0;
  // How many node streams (ConnectNode) it has opened to the service.
  virtual int node_streams_opened() const = 0;
};

// Listens on options.socket_path (which must not exist). An error: the
// socket cannot be made.
StatusOr<std::unique_ptr<NodeRelay>> StartNodeRelay(const NodeRelayOptions& options);

// The relay as its own process (`tfslurm-agent relay`, started by
// relay_route.h): checks that `lock_fd` holds the relay's lock, replaces a
// stale socket, serves until idle and returns its exit status. At a clean
// end it removes its socket and `leftovers` (its lock and log files: a
// node would otherwise keep two files per job step); after a failure the
// log stays, for whoever looks into it.
int RunNodeRelayProcess(const NodeRelayOptions& options, int lock_fd,
                        const std::vector<std::string>& leftovers);

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_RELAY_NODE_RELAY_H_
