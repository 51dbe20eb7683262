#include "service/agentrpc/task_stream.h"

#include "service/agentrpc/convert.h"
#include "service/agentrpc/dispatch.h"

namespace tfslurm::agentrpc {

Status TaskStreamReader::OnMessage(const agent::v1::AgentMessage& message, HeldWrites* held) {
  if (!registered_ && message.body_case() != agent::v1::AgentMessage::kRegister)
    return InvalidArgument("the first message must be register");
  if (message.body_case() == agent::v1::AgentMessage::kRegister) {
    auto uid = uid_proof_.Prove(message.task());
    if (!uid.ok()) {
      channel_->Send(RefusalFor(uid.status()));
      return Status::Ok();
    }
    uid_ = *uid;
    // Before the dispatch: the barrier it may complete sends this stream's
    // Assignment too.
    cluster_by_digest_ = message.register_().cluster_by_digest();
    if (!registered_) {
      ref_ = FromProto(message.task());
      registered_ = true;  // after ref_: Ended reads ref_ once this is set
    }
    DispatchRegister(agents_, message, uid_, channel_);
    return Status::Ok();
  }
  Status s = ProcId(message.task().proc_id()) == ref_.proc_id &&
                     message.task().experiment_id() == ref_.experiment_id
                 ? DispatchReport(agents_, message, uid_, held)
                 : InvalidArgument("a stream speaks for one task only");
  if (!s.ok()) channel_->Send(RefusalFor(s));
  return Status::Ok();
}

void TaskStreamReader::Ended() {
  if (registered_) agents_.OnDisconnect(ref_, channel_.get());
}

void ForwardingChannel::Send(const ServiceMsg& message) {
  MutexLock lock(mu_);
  if (!deliver_) return;
  const auto* refused = std::get_if<RefusedMsg>(&message);
  const bool end_after = refused && refused->permanent;
  deliver_(message, end_after);
  if (end_after) deliver_ = nullptr;
}

bool ForwardingChannel::Detach() {
  MutexLock lock(mu_);
  if (!deliver_) return false;
  deliver_ = nullptr;
  return true;
}

bool ForwardingChannel::Attached() const {
  MutexLock lock(mu_);
  return deliver_ != nullptr;
}

}  // namespace tfslurm::agentrpc
