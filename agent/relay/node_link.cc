// Threads: gRPC runs the reactions of the lanes (server reactors, one per
// agent stream) and of the link (a client reactor) on its threads, beside
// each other. Lock order: a link's `mu_` before a lane's; the link calls its
// lanes with its lock held (so a lane cannot go, Forget, in the middle), and
// a lane calls its link without its own. As elsewhere in the relay, gRPC's
// Start* and Finish run no reaction of ours inline, so they are called
// under these locks (node_relay.cc's Pipe does the same).
//
// For TSan (base/happens_before.h): each reactor is made before its
// reactions (BEFORE(this) / AFTER(this)), each reaction ends before its
// reactor's OnDone (ReactionScope), and the message a read or write owns is
// handed over at the call that starts it.
#include "agent/relay/node_link.h"

#include <spdlog/spdlog.h>

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "agent/relay/cluster_cache.h"
#include "agent/relay/node_relay.h"
#include "base/happens_before.h"
#include "schema/frame_batcher.h"

namespace tfslurm::agent {

using v1::AgentFrame;
using v1::AgentMessage;
using v1::NodeDown;
using v1::NodeUp;
using v1::ServiceMessage;

namespace {

// The largest agent message a lane carries: tfslurmd refuses a NodeUp over
// its 4 MiB, which would end every lane of the node; what a Connect stream
// of its own would refuse (the message alone over 4 MiB) ends this lane
// only. The frame's own bytes are a few.
constexpr size_t kLargestMessage = (4 << 20) - 64;

grpc::Status EndStatus(const v1::LaneEnd& end) {
  return grpc::Status(static_cast<grpc::StatusCode>(end.code()), end.message());
}

}  // namespace

// An agent's stream on the relay's socket, carried as lane `number_`.
class Lane final : public grpc::ServerBidiReactor<AgentMessage, ServiceMessage> {
 public:
  Lane(grpc::CallbackServerContext* context, std::shared_ptr<NodeLink> link, Activity* activity)
      : context_(context), link_(std::move(link)), activity_(activity) {}

  // From the link, its lock held (so that the lane cannot end first):
  // numbered, it starts reading the agent's messages. Only a lane begun is
  // handed to gRPC.
  void Begin(uint64_t number) ABSL_LOCKS_EXCLUDED(mu_) {
    activity_->Opened();
    number_ = number;
    TFSLURM_HAPPENS_BEFORE(this);
    MutexLock lock(mu_);
    ReadNextLocked();
  }

  // From the link, its lock held. The frame of the last message went to
  // the service: the agent's next one.
  void Written() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    reached_service_ = true;
    ReadNextLocked();
  }

  // A message from the service for this agent.
  void Deliver(ServiceMessage message) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    reached_service_ = true;
    if (finished_) return;
    to_agent_.push_back(std::move(message));
    if (!writing_) WriteNextLocked();
  }

  // The lane is over: the agent's stream ends with `status` once what came
  // before is written. `reached_service` false: whatever was written, no
  // service took it (one without ConnectNode).
  void End(grpc::Status status, bool reached_service = true) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    if (end_) return;
    end_ = std::move(status);
    if (!reached_service) reached_service_ = false;
    if (!writing_) WriteNextLocked();
  }

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_) {
    ReactionScope reaction(this, &done_);
    MutexLock lock(mu_);
    writing_ = false;
    if (!to_agent_.empty()) to_agent_.pop_front();
    if (!ok) to_agent_.clear();  // the agent is gone; its read fails too
    WriteNextLocked();
  }
  // The agent went away (or the relay shuts down): nobody hears a status.
  void OnCancel() override {
    ReactionScope reaction(this, &done_);
    End(grpc::Status(grpc::StatusCode::CANCELLED, "the agent's stream was cancelled"));
  }
  void OnDone() override;

 private:
  // No read after the end: the stream is finished, or will be.
  void ReadNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (end_) return;
    in_.Clear();
    TFSLURM_HAPPENS_BEFORE(&in_);
    StartRead(&in_);
  }

  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!to_agent_.empty()) {
      writing_ = true;
      TFSLURM_HAPPENS_BEFORE(this);
      StartWrite(&to_agent_.front());
    } else if (end_ && !finished_) {
      finished_ = true;
      if (!reached_service_) context_->AddTrailingMetadata(kUpstreamNotOpened, "1");
      grpc::Status status = *end_;  // read before OnDone may run
      TFSLURM_HAPPENS_BEFORE(&done_);
      Finish(std::move(status));
    }
  }

  grpc::CallbackServerContext* const context_;
  const std::shared_ptr<NodeLink> link_;
  Activity* const activity_;
  uint64_t number_ = 0;
  AgentMessage in_;  // owned by the read in flight

  Mutex mu_;
  std::deque<ServiceMessage> to_agent_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool reached_service_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> end_ ABSL_GUARDED_BY(mu_);

  char done_ = 0;  // for TSan only: what OnDone comes after
};

class NodeLink final : public grpc::ClientBidiReactor<NodeUp, NodeDown> {
 public:
  explicit NodeLink(NodeLinks* links) : links_(links) {}

  // Opens the stream; `self` keeps this until OnDone.
  void Start(v1::AgentService::Stub* stub, std::shared_ptr<NodeLink> self) {
    self_ = std::move(self);
    stub->async()->ConnectNode(&context_, this);
    // Writes start from the lanes' reactions, outside this reactor's: the
    // hold keeps the call alive for them until it is over.
    AddHold();
    TFSLURM_HAPPENS_BEFORE(this);
    TFSLURM_HAPPENS_BEFORE(&in_);
    StartRead(&in_);
    StartCall();
  }

  // Numbers `lane` and begins it; false once the stream has ended.
  bool Add(Lane* lane) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    if (ended_) return false;
    const uint64_t number = next_lane_++;
    lanes_.emplace(number, lane);
    lane->Begin(number);
    return true;
  }

  bool ended() const ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    return ended_;
  }

  // From a lane: its agent's message, to the service.
  void Send(uint64_t number, AgentMessage message) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    if (ended_) return;
    AgentFrame frame;
    frame.set_lane(number);
    *frame.mutable_message() = std::move(message);
    QueueLocked(std::move(frame));
  }

  // From a lane: its agent's side ended. The service forgets the lane (and
  // answers with its end if it had not ended it).
  void Close(uint64_t number) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    if (ended_) return;
    AgentFrame frame;
    frame.set_lane(number);
    frame.set_closed(true);
    QueueLocked(std::move(frame));
  }

  // From a lane's OnDone: it is never called again.
  void Forget(uint64_t number) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    lanes_.erase(number);
  }

  void Cancel() { context_.TryCancel(); }

  void OnWriteDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_) {
    ReactionScope reaction(&write_op_, &done_);
    if (!ok) {
      ReleaseHold();  // the stream broke; OnDone gives its status
      return;
    }
    MutexLock lock(mu_);
    for (const AgentFrame& frame : writer_.in_flight().frames()) {
      if (!frame.has_message()) continue;
      if (auto it = lanes_.find(frame.lane()); it != lanes_.end()) it->second->Written();
    }
    StartWriteLocked(writer_.WriteDone());
  }

  void OnReadDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_) {
    ReactionScope reaction(&in_, &done_);
    if (!ok) {
      ReleaseHold();  // the service ended the stream: OnDone gives its status
      return;
    }
    {
      MutexLock lock(mu_);
      for (v1::ServiceFrame& frame : *in_.mutable_frames()) DeliverLocked(frame);
    }
    in_.Clear();
    TFSLURM_HAPPENS_BEFORE(&in_);
    StartRead(&in_);
  }

  void OnWritesDoneDone(bool) override {}

  void OnDone(const grpc::Status& status) override ABSL_LOCKS_EXCLUDED(mu_) {
    TFSLURM_HAPPENS_AFTER(this);
    TFSLURM_HAPPENS_AFTER(&done_);
    const bool unimplemented = status.error_code() == grpc::StatusCode::UNIMPLEMENTED;
    // Before the lanes end: their agents' next streams must find it.
    if (unimplemented) links_->PipesOnly();
    {
      MutexLock lock(mu_);
      ended_ = true;
      // Its lanes end with its status; an older tfslurmd's refusal of
      // ConnectNode as one their agents retry, through a pipe next time.
      const grpc::Status lane_status =
          unimplemented ? grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                       "tfslurmd does not take a node's streams on one (it "
                                       "predates ConnectNode); register again: the relay "
                                       "carries each stream on its own from now on")
                        : status;
      for (auto& [number, lane] : lanes_) lane->End(lane_status, !unimplemented);
      lanes_.clear();
    }
    // Gone (when nothing else holds it) before the relay hears it ended,
    // so that the relay's Shutdown returns after it.
    NodeLinks* const links = links_;
    std::shared_ptr<NodeLink> self = std::move(self_);
    self.reset();  // may delete this
    links->Ended(status);
  }

 private:
  void DeliverLocked(v1::ServiceFrame& frame) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = lanes_.find(frame.lane());
    if (it == lanes_.end()) return;  // its agent is gone
    Lane* lane = it->second;
    if (frame.has_end()) {
      lane->End(EndStatus(frame.end()));
      lanes_.erase(it);
      return;
    }
    if (!frame.has_message()) return;
    ServiceMessage& message = *frame.mutable_message();
    if (message.has_assignment() && !FillClusterLocked(*message.mutable_assignment())) {
      lane->End(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                             "tfslurmd named the cluster " + message.assignment().cluster_digest() +
                                 " that it had not sent the node's relay; register again"));
      lanes_.erase(it);
      return;
    }
    lane->Deliver(std::move(message));
  }

  // Keeps a cluster's bytes, or fills in those of a cluster named alone.
  // As many, kept and forgotten in the same order, as tfslurmd remembers
  // per node stream (ConnectionClusters::Connection::FirstSend), so that a
  // digest it sends alone is always here.
  // False: named alone but never sent (the service broke the protocol).
  bool FillClusterLocked(v1::Assignment& assignment) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::string& digest = assignment.cluster_digest();
    if (digest.empty()) return true;
    auto kept = std::find_if(clusters_.begin(), clusters_.end(),
                             [&](const auto& entry) { return entry.first == digest; });
    if (!assignment.cluster_zlib().empty()) {
      if (kept == clusters_.end()) {
        clusters_.emplace_back(digest, assignment.cluster_zlib());
        if (clusters_.size() > ClusterCache::kKept) clusters_.pop_front();
      }
      return true;
    }
    if (kept == clusters_.end()) return false;
    assignment.set_cluster_zlib(kept->second);
    return true;
  }

  // A write starts at once unless one is in flight (the frame goes in the
  // next).
  void QueueLocked(AgentFrame frame) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    StartWriteLocked(writer_.Queue(std::move(frame)));
  }

  // `next`: the writer's batch of every frame queued, or nothing to write.
  void StartWriteLocked(NodeUp* next) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!next || hold_released_) return;
    TFSLURM_HAPPENS_BEFORE(&write_op_);
    StartWrite(next);
  }

  // No write starts after this; outside mu_, as RemoveHold may run OnDone.
  void ReleaseHold() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      MutexLock lock(mu_);
      if (hold_released_) return;
      hold_released_ = true;
    }
    RemoveHold();
  }

  NodeLinks* const links_;
  std::shared_ptr<NodeLink> self_;
  grpc::ClientContext context_;
  NodeDown in_;  // owned by the read in flight

  mutable Mutex mu_;
  std::unordered_map<uint64_t, Lane*> lanes_ ABSL_GUARDED_BY(mu_);
  uint64_t next_lane_ ABSL_GUARDED_BY(mu_) = 1;
  wire::FrameBatcher<NodeUp> writer_ ABSL_GUARDED_BY(mu_);
  bool hold_released_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::pair<std::string, std::string>> clusters_ ABSL_GUARDED_BY(mu_);

  // For TSan only: what a write's completion and OnDone come after.
  char write_op_ = 0;
  char done_ = 0;
};

void Lane::OnReadDone(bool ok) {
  ReactionScope reaction(&in_, &done_);
  TFSLURM_HAPPENS_AFTER(this);
  if (ok && in_.ByteSizeLong() > kLargestMessage) {
    End(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                     "the agent's message of " + std::to_string(in_.ByteSizeLong()) +
                         " bytes is over the 4 MiB tfslurmd takes"));
    link_->Close(number_);
  } else if (ok) {
    link_->Send(number_, std::move(in_));
  } else {
    // The agent half-closed (after its exit report: the lane's end is the
    // acknowledgment) or went away.
    link_->Close(number_);
  }
}

void Lane::OnDone() {
  TFSLURM_HAPPENS_AFTER(this);
  TFSLURM_HAPPENS_AFTER(&done_);
  link_->Forget(number_);
  // Closed last: the relay's Shutdown waits for every stream's.
  Activity* const activity = activity_;
  delete this;
  activity->Closed();
}

NodeLinks::NodeLinks(v1::AgentService::Stub* stub, Activity* activity, bool enabled)
    : stub_(stub), activity_(activity), pipes_only_(!enabled) {}

void NodeLinks::Open() {
  if (pipes_only_) return;
  MutexLock lock(mu_);
  CurrentLocked();
}

std::shared_ptr<NodeLink> NodeLinks::CurrentLocked() {
  if (!current_ || current_->ended()) {
    current_ = std::make_shared<NodeLink>(this);
    ++live_;
    spdlog::info("relay: opening node stream {} to the service (its agents' streams are its lanes)",
                 ++opened_);
    current_->Start(stub_, current_);
  }
  return current_;
}

NodeLinks::~NodeLinks() { Shutdown(std::chrono::seconds(5)); }

grpc::ServerBidiReactor<AgentMessage, ServiceMessage>* NodeLinks::NewLane(
    grpc::CallbackServerContext* context) {
  // A link that ends between the two steps below is replaced by the next
  // round's; one that ends for want of ConnectNode, by a Pipe.
  while (!pipes_only_) {
    std::shared_ptr<NodeLink> link;
    {
      MutexLock lock(mu_);
      link = CurrentLocked();
    }
    auto lane = std::make_unique<Lane>(context, link, activity_);
    if (link->Add(lane.get())) return lane.release();
  }
  return nullptr;
}

void NodeLinks::PipesOnly() {
  if (!pipes_only_.exchange(true))
    spdlog::warn(
        "relay: tfslurmd has no ConnectNode (it is older than this agent); each agent stream "
        "goes to it on a stream of its own");
}

void NodeLinks::Ended(const grpc::Status& status) {
  if (!status.ok() && status.error_code() != grpc::StatusCode::UNIMPLEMENTED)
    spdlog::info("relay: its node stream to the service ended: {} ({})", status.error_message(),
                 static_cast<int>(status.error_code()));
  MutexLock lock(mu_);
  --live_;
  cv_.notify_all();
}

void NodeLinks::Shutdown(std::chrono::milliseconds at_most) {
  std::shared_ptr<NodeLink> link;
  {
    MutexLock lock(mu_);
    link = std::move(current_);
  }
  if (link) link->Cancel();
  link.reset();
  MutexLock lock(mu_);
  if (!cv_.wait_for(mu_, at_most,
                    [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return live_ == 0; }))
    spdlog::warn("relay: its stream to the service still open {} ms after the shutdown",
                 at_most.count());
}

}  // namespace tfslurm::agent
