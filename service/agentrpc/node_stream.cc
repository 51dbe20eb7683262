// Threads: gRPC runs the reactions on its threads, a read's beside a
// write's; core sends to a lane from any thread, under its lock. `mu_`
// guards the write side; the lanes are the read side's, touched by one read
// reaction at a time (and by OnDone, after every reaction).
//
// As grpc_server.cc's ConnectReactor, the reactor tells TSan of the
// orderings gRPC documents (base/happens_before.h).
#include "service/agentrpc/node_stream.h"

#include <deque>
#include <memory>
#include <unordered_map>

#include "base/happens_before.h"
#include "base/mutex.h"
#include "schema/frame_batcher.h"
#include "service/agentrpc/connection_clusters.h"
#include "service/agentrpc/convert.h"
#include "service/agentrpc/task_stream.h"

namespace tfslurm::agentrpc {
namespace {

using agent::v1::AgentFrame;
using agent::v1::NodeDown;
using agent::v1::NodeUp;
using agent::v1::ServiceFrame;

// The lanes a node stream may hold at once: far more than any node runs
// tasks, and a bound on what one stream can make tfslurmd keep (a lane the
// service ended stays until the relay's `closed`, which a stranger need
// never send).
constexpr size_t kMaxLanes = 4096;

class NodeStream final : public grpc::ServerBidiReactor<NodeUp, NodeDown> {
 public:
  NodeStream(Agents* agents, UidProof* uid_proof) : agents_(agents), uid_proof_(uid_proof) {
    TFSLURM_HAPPENS_BEFORE(this);
    if (agents_) {
      StartReading();
    } else {
      FinishWhenWritten(grpc::Status(grpc::StatusCode::UNAVAILABLE, "tfslurmd is starting; retry"));
    }
  }

  void OnReadDone(bool ok) override {
    ReactionScope reaction(&in_, &done_);
    if (!ok) {
      // The relay closed its side (its node's agents are gone) or the
      // stream broke: every lane ends with it.
      for (auto& [number, lane] : lanes_) lane.reader->Ended();
      FinishWhenWritten(grpc::Status::OK);
      return;
    }
    // The NodeUp's frames are handled in a row, and nothing goes out
    // before their exit reports are in the store, in one transaction: a
    // lane's end acknowledges its exit report (agent.proto, LaneEnd).
    HoldWrites();
    HeldWrites held;
    for (const AgentFrame& frame : in_.frames()) OnFrame(frame, &held);
    agents_->WriteHeld(held);
    ReleaseWrites();
    StartReading();
  }

  void OnWriteDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_) {
    ReactionScope reaction(&write_op_, &done_);
    MutexLock lock(mu_);
    if (!ok) writer_.Drop();  // the stream broke; its read fails too
    WriteNextLocked(writer_.WriteDone());
  }

  // Cancelled: the outstanding read fails, and OnReadDone ends the lanes.
  void OnCancel() override { ReactionScope reaction(this, &done_); }

  void OnDone() override {
    TFSLURM_HAPPENS_AFTER(&done_);  // every other reaction has ended
    for (auto& [number, lane] : lanes_) lane.channel->Detach();
    delete this;
  }

 private:
  struct Lane {
    std::shared_ptr<ForwardingChannel> channel;
    std::unique_ptr<TaskStreamReader> reader;
  };

  void OnFrame(const AgentFrame& frame, HeldWrites* held) {
    const uint64_t number = frame.lane();
    auto it = lanes_.find(number);
    if (it == lanes_.end()) {
      // A lane that closes before it said anything is nothing to us. (One
      // the service ended stays until its `closed`, its last frame.)
      if (!frame.has_message()) return;
      if (lanes_.size() >= kMaxLanes) {
        RefuseLane(number);
        return;
      }
      it = OpenLane(number);
    }
    Lane& lane = it->second;
    if (frame.body_case() == AgentFrame::kClosed) {
      // The agent's side ended: core hears it, and the lane's end is the
      // acknowledgment of what came before (an exit report's).
      lane.reader->Ended();
      EndLane(number, lane, grpc::Status::OK);
      lanes_.erase(it);
      return;
    }
    // The service ended the lane; the relay has not heard yet.
    if (!lane.channel->Attached()) return;
    if (Status s = lane.reader->OnMessage(frame.message(), held); !s.ok())
      EndLane(number, lane, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, s.message()));
  }

  std::unordered_map<uint64_t, Lane>::iterator OpenLane(uint64_t number) {
    Lane lane;
    lane.channel = std::make_shared<ForwardingChannel>(
        [this, number](const ServiceMsg& message, bool end_after) {
          Enqueue(number, message, end_after);
        });
    lane.reader = std::make_unique<TaskStreamReader>(*agents_, *uid_proof_, lane.channel);
    return lanes_.emplace(number, std::move(lane)).first;
  }

  // A lane over kMaxLanes ends at once, and nothing of it is kept.
  void RefuseLane(uint64_t number) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    if (finished_) return;
    QueueEndLocked(number, grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                        "this node stream has " + std::to_string(kMaxLanes) +
                                            " lanes open, the most it may"));
  }

  // The lane's end goes after what was queued for it; core's later sends
  // to it are dropped. Nothing if it had ended already.
  void EndLane(uint64_t number, Lane& lane, const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu_) {
    if (!lane.channel->Detach()) return;
    MutexLock lock(mu_);
    if (finished_) return;
    QueueEndLocked(number, status);
  }

  // From core's threads, through a lane's channel (its lock held).
  void Enqueue(uint64_t number, const ServiceMsg& message, bool end_after)
      ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    if (finished_) return;
    ServiceFrame frame;
    frame.set_lane(number);
    *frame.mutable_message() = ToProto(message, EncodingForLocked(message));
    QueueLocked(std::move(frame));
    if (end_after) QueueEndLocked(number, grpc::Status::OK);
  }

  // A cluster's bytes go in the first frame of this stream that names it;
  // under mu_, so that the frames' order on the wire is the order of these
  // decisions.
  TfConfigEncoding EncodingForLocked(const ServiceMsg& message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const auto* assignment = std::get_if<AssignmentMsg>(&message);
    if (assignment && assignment->cluster && !assignment->cluster->digest.empty() &&
        !clusters_sent_.FirstSend(assignment->cluster->digest))
      return TfConfigEncoding::kClusterDigestOnly;
    return TfConfigEncoding::kCompressedCluster;
  }

  void QueueEndLocked(uint64_t number, const grpc::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ServiceFrame frame;
    frame.set_lane(number);
    frame.mutable_end()->set_code(status.error_code());
    frame.mutable_end()->set_message(status.error_message());
    QueueLocked(std::move(frame));
  }

  // A write starts at once unless one is in flight (the frame goes in the
  // next).
  void QueueLocked(ServiceFrame frame) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (NodeDown* next = writer_.Queue(std::move(frame))) WriteNextLocked(next);
  }

  void HoldWrites() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    writer_.Hold();
  }

  void ReleaseWrites() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    if (finished_) return;
    if (NodeDown* next = writer_.Release()) WriteNextLocked(next);
  }

  void StartReading() {
    TFSLURM_HAPPENS_BEFORE(&in_);
    StartRead(&in_);
  }

  // Starts writing `next` (the writer's batch of every frame queued), or,
  // with nothing to write, finishes if that is pending.
  void WriteNextLocked(NodeDown* next) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (next) {
      TFSLURM_HAPPENS_BEFORE(&write_op_);
      StartWrite(next);
    } else if (pending_finish_ && !finished_) {
      finished_ = true;
      TFSLURM_HAPPENS_BEFORE(&done_);
      Finish(*pending_finish_);
    }
  }

  void FinishWhenWritten(grpc::Status status) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    if (finished_) return;
    pending_finish_ = std::move(status);
    if (!writer_.writing()) WriteNextLocked(nullptr);
  }

  Agents* const agents_;
  UidProof* const uid_proof_;

  // The read side (read reactions, one at a time).
  NodeUp in_;
  std::unordered_map<uint64_t, Lane> lanes_;

  // The write side: core's threads (Enqueue) and gRPC's.
  Mutex mu_;
  ConnectionClusters::Connection clusters_sent_;  // its own lock; used under mu_
  wire::FrameBatcher<NodeDown> writer_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> pending_finish_ ABSL_GUARDED_BY(mu_);

  // For TSan only: what a write's completion and OnDone come after.
  char write_op_ = 0;
  char done_ = 0;
};

}  // namespace

grpc::ServerBidiReactor<NodeUp, NodeDown>* NewNodeStream(Agents* agents, UidProof* uid_proof) {
  return new NodeStream(agents, uid_proof);
}

}  // namespace tfslurm::agentrpc
