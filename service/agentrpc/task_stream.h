// One task's stream to the service as the gRPC transport sees it, whatever
// carries it: a Connect stream of its own, or a lane of its node's
// ConnectNode stream (agent.proto). Both carriers use these two halves, so
// a lane cannot come to mean anything a stream does not:
//   TaskStreamReader: what each message from the agent means (the first
//     must be Register; every Register proves its uid afresh, and reports
//     then speak as that uid; a report speaks for the stream's task only);
//   ForwardingChannel: the TaskChannel core sends to, which hands each
//     message to its carrier until the carrier lets go of it.
//
// Thread safety: a TaskStreamReader takes one message at a time (a
// stream's reads are sequential); Ended may run beside OnMessage (a Connect
// stream's OnCancel). ForwardingChannel is safe from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>

#include "agent.pb.h"
#include "base/mutex.h"
#include "service/agentrpc/uid_proof.h"
#include "service/core/agents.h"

namespace tfslurm::agentrpc {

class TaskStreamReader {
 public:
  TaskStreamReader(Agents& agents, UidProof& uid_proof, std::shared_ptr<TaskChannel> channel)
      : agents_(agents), uid_proof_(uid_proof), channel_(std::move(channel)) {}

  // An error: the stream must end with it (its first message was not a
  // Register). Refusals the agent should hear go to the channel. `held`:
  // as DispatchReport's.
  Status OnMessage(const agent::v1::AgentMessage& message, HeldWrites* held = nullptr);

  // The agent's side ended or the stream broke: core hears of it once the
  // stream has registered. May come more than once.
  void Ended();

  // Whether the stream's last Register said its sender (a node's relay)
  // fills TF clusters in by digest (Register.cluster_by_digest).
  bool cluster_by_digest() const { return cluster_by_digest_.load(); }

 private:
  Agents& agents_;
  UidProof& uid_proof_;
  const std::shared_ptr<TaskChannel> channel_;
  // Written by OnMessage, once; `registered_` last, so that Ended sees a
  // complete `ref_` when it sees it set.
  std::atomic<bool> registered_{false};
  TaskRef ref_;
  std::optional<uint32_t> uid_;  // proven by the last Register
  std::atomic<bool> cluster_by_digest_{false};
};

class ForwardingChannel final : public TaskChannel {
 public:
  // `end_after`: the message is a permanent refusal, after which the
  // carrier ends the stream; the channel lets go of the carrier then.
  using Deliver = std::function<void(const ServiceMsg& message, bool end_after)>;

  explicit ForwardingChannel(Deliver deliver) : deliver_(std::move(deliver)) {}

  void Send(const ServiceMsg& message) override ABSL_LOCKS_EXCLUDED(mu_);

  // Later sends are dropped. True if this call let go (it had not before):
  // the carrier ends the stream then. Once it returns no delivery runs, so
  // the carrier may go.
  bool Detach() ABSL_LOCKS_EXCLUDED(mu_);

  // False once detached, by Detach or after an `end_after` delivery.
  bool Attached() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Held across a delivery, so that the carrier is not deleted under it.
  // Taken before the carrier's own lock.
  mutable Mutex mu_;
  Deliver deliver_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tfslurm::agentrpc
