// The agent protocol's two transports, one logic: a gRPC bidirectional
// stream per task (AgentService.Connect; or a lane of its node's
// ConnectNode stream, when a node's relay carries them: node_stream.h),
// and the same messages as JSON
// (protobuf's JSON mapping) over plain HTTP under /agent/v1/, so a task can
// register with curl. Both hand every message to core's Agents (core/agents.h).
//
// Thread safety: start the gRPC server and register the routes once, before
// serving; both then serve agents on many threads at once, calling Agents,
// which is thread-safe. AgentGrpcServer::Shutdown is for its owner's thread.
#pragma once

#include <httplib.h>

#include <memory>
#include <string>

#include "base/status.h"
#include "service/agentrpc/uid_proof.h"
#include "service/core/agents.h"

namespace tfslurm::agentrpc {

class AgentGrpcServer {
 public:
  virtual ~AgentGrpcServer() = default;
  virtual int port() const = 0;
  // Hands every message from now on to `agents`, which must outlive
  // the server; before, a registration is refused as retryable (agents of
  // running jobs reconnect as soon as the port listens). Once.
  virtual void Serve(Agents& agents) = 0;
  virtual void Shutdown() = 0;
};

// TLS on the agent port: the key and certificate chain as files that
// change together (tls/staged_identity.h); gRPC re-reads them every second.
struct AgentTls {
  std::string key_path;
  std::string cert_path;
};

// Listens on `address` ("host:port", port 0 picks one), so that core can be
// made knowing the port before it is served (Serve). `tls` null: plaintext.
// `uid_proof` null: the secret alone (personal mode).
StatusOr<std::unique_ptr<AgentGrpcServer>> StartAgentGrpcServer(
    const std::string& address, const AgentTls* tls = nullptr,
    std::shared_ptr<UidProof> uid_proof = nullptr);

// POST /agent/v1/message: body AgentMessage (JSON); answers ServiceMessage
// (JSON). A register waits up to ?wait_s= seconds (default 30, at most 120)
// for the assignment and answers 202 {} if the barrier is not complete yet;
// registering again is how a curl client keeps waiting. Heartbeats answer a
// pending Shutdown, if any. A client sends them every heartbeat_interval_ms
// of its Assignment while its program runs, as the agent does: a task
// silent past the reconnect window is gone (docs/restarts.md, "Network
// faults"). In site mode (`uid_proof`) every message proves its uid.
void RegisterAgentHttpRoutes(httplib::Server& server, Agents& agents,
                             std::shared_ptr<UidProof> uid_proof = nullptr);

}  // namespace tfslurm::agentrpc
