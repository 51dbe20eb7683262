// The node's relay's stream to the service (AgentService.ConnectNode): the
// agents' streams of the node as lanes of one stream (agent.proto), so that
// tfslurmd holds one stream per node instead of one per task. Each agent
// stream served on the relay's socket becomes a lane: its messages go up as
// frames, one at a time (the agent's next message is read once its last
// one's frame is written, so gRPC's flow control still reaches the agent),
// batched with the other lanes' frames ready at the same moment; what the
// service sends a lane goes to its agent, the TF cluster filled in from the
// bytes the same stream carried before; the lane's end is the agent
// stream's end, with its status. A lane that never reached the service ends
// with kUpstreamNotOpened in its trailing metadata, as a piped stream does.
//
// One stream at a time: made at the first agent stream, and again at the
// next agent stream once it ended (the service restarted, the network
// broke: its lanes end with its status, and their agents register again).
// A tfslurmd without ConnectNode answers UNIMPLEMENTED: its lanes end as
// UNAVAILABLE, and from then on NewLane declines, so that the relay pipes
// each agent stream on a Connect stream of its own (node_relay.cc).
//
// Thread safety: NodeLinks is safe from any thread.
#ifndef TFSLURM_AGENT_RELAY_NODE_LINK_H_
#define TFSLURM_AGENT_RELAY_NODE_LINK_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <memory>

#include "agent.grpc.pb.h"
#include "agent/relay/activity.h"
#include "base/mutex.h"

namespace tfslurm::agent {

class NodeLink;

class NodeLinks {
 public:
  // `stub` and `activity` outlive this. `enabled` false: NewLane always
  // declines.
  NodeLinks(v1::AgentService::Stub* stub, Activity* activity, bool enabled);
  ~NodeLinks();

  // Opens the node stream now, while the node's agents start, so that the
  // first of them need not wait for it, nor be sent back by a tfslurmd
  // without ConnectNode.
  void Open() ABSL_LOCKS_EXCLUDED(mu_);

  // The reactor serving a new agent stream as a lane of the current node
  // stream; nullptr when the service does not take node streams.
  grpc::ServerBidiReactor<v1::AgentMessage, v1::ServiceMessage>* NewLane(
      grpc::CallbackServerContext* context) ABSL_LOCKS_EXCLUDED(mu_);

  // Cancels the node stream and waits (at most `at_most`) until it is gone.
  // After the agent streams have ended (the relay's server shut down).
  void Shutdown(std::chrono::milliseconds at_most) ABSL_LOCKS_EXCLUDED(mu_);

  // How many node streams were opened (for tests and the relay's log).
  int opened() const { return opened_.load(); }

  // From a NodeLink: the service has no ConnectNode; agent streams go
  // through pipes from now on.
  void PipesOnly();
  // From a NodeLink: it ended, with `status`.
  void Ended(const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The node stream, opened anew if the last one ended.
  std::shared_ptr<NodeLink> CurrentLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  v1::AgentService::Stub* const stub_;
  Activity* const activity_;
  std::atomic<bool> pipes_only_{false};  // disabled, or the service has no ConnectNode
  std::atomic<int> opened_{0};
  Mutex mu_;
  std::condition_variable_any cv_;
  std::shared_ptr<NodeLink> current_ ABSL_GUARDED_BY(mu_);
  int live_ ABSL_GUARDED_BY(mu_) = 0;  // links not yet ended
};

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_RELAY_NODE_LINK_H_
