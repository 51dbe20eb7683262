// How a ConnectNode stream (agent.proto: NodeUp, NodeDown) is written, by
// the node's relay (agent/relay/node_link.cc) and by tfslurmd
// (service/agentrpc/node_stream.cc) alike: one write in flight, and the
// frames queued meanwhile go together in the next message, so that a stream
// of many lanes costs gRPC one message per write rather than one per frame.
// The benchmarks' load generators and floor write with it too, so that
// tfslurmd and its floor are measured through the same batching.
//
// Not thread-safe: the stream's reactor holds its lock around every call.
#ifndef TFSLURM_SCHEMA_FRAME_BATCHER_H_
#define TFSLURM_SCHEMA_FRAME_BATCHER_H_

#include <cstddef>
#include <deque>
#include <type_traits>
#include <utility>

namespace tfslurm::wire {

template <typename Message>
class FrameBatcher {
 public:
  using Frame = std::remove_reference_t<decltype(*std::declval<Message&>().add_frames())>;
  // About 1 MiB of frames per message, and at least one frame: gRPC's
  // default limit on a received message is 4 MiB.
  static constexpr size_t kMaxMessageBytes = 1 << 20;

  // Queues `frame`. The message to start writing now, or nullptr when a
  // write is in flight or the batcher holds (the frame goes in the next).
  Message* Queue(Frame frame) {
    queued_.push_back(std::move(frame));
    return writing_ || held_ ? nullptr : TakeBatch();
  }
  // The write in flight completed: the next message to start, or nullptr
  // when nothing is queued or the batcher holds (no write is in flight then).
  Message* WriteDone() {
    if (queued_.empty() || held_) {
      writing_ = false;
      return nullptr;
    }
    return TakeBatch();
  }
  // Until Release, no write starts: what is queued meanwhile waits. For a
  // writer that must not send what it queues before something else is done
  // (tfslurmd's node stream: no lane's acknowledgment before the store has
  // what it acknowledges).
  void Hold() { held_ = true; }
  // Ends a Hold: the message to start writing now, or nullptr when a write
  // is in flight or nothing is queued.
  Message* Release() {
    held_ = false;
    return writing_ || queued_.empty() ? nullptr : TakeBatch();
  }
  // The stream broke: what is queued goes nowhere.
  void Drop() { queued_.clear(); }
  bool writing() const { return writing_; }
  // The message being written; stays as it is until WriteDone.
  const Message& in_flight() const { return out_; }

 private:
  Message* TakeBatch() {
    writing_ = true;
    out_.Clear();
    size_t bytes = 0;
    while (!queued_.empty()) {
      const size_t size = queued_.front().ByteSizeLong();
      if (out_.frames_size() > 0 && bytes + size > kMaxMessageBytes) break;
      bytes += size;
      out_.add_frames()->Swap(&queued_.front());
      queued_.pop_front();
    }
    return &out_;
  }

  std::deque<Frame> queued_;
  Message out_;
  bool writing_ = false;
  bool held_ = false;
};

}  // namespace tfslurm::wire

#endif  // TFSLURM_SCHEMA_FRAME_BATCHER_H_
