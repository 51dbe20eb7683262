// The agent protocol as JSON over plain HTTP. HTTP has no stream to push
// messages on, so each task gets a mailbox that core sends into; requests
// take from it.
//
// Threads: httplib serves requests on many threads at once, and core sends
// into a mailbox from any thread, under its lock; each Mailbox and the
// Mailboxes map have a lock of their own.
#include <google/protobuf/util/json_util.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <tuple>

#include "base/mutex.h"
#include "base/sha256.h"
#include "service/agentrpc/agent_endpoint.h"
#include "service/agentrpc/convert.h"
#include "service/agentrpc/dispatch.h"
#include "service/api/errors.h"

namespace tfslurm::agentrpc {
namespace {

using agent::v1::AgentMessage;
using agent::v1::ServiceMessage;

class Mailbox final : public TaskChannel {
 public:
  void Send(const ServiceMsg& message) override ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    messages_.push_back(message);
    cv_.notify_all();
  }

  // Waits up to `wait` for a message; nullopt on timeout.
  std::optional<ServiceMsg> Take(std::chrono::milliseconds wait) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    // condition_variable_any unlocks and relocks mu_ itself; the analysis
    // sees mu_ held throughout, as it is whenever the predicate runs.
    if (!cv_.wait_for(mu_, wait,
                      [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !messages_.empty(); })) {
      return std::nullopt;
    }
    ServiceMsg m = messages_.front();
    messages_.pop_front();
    return m;
  }

 private:
  Mutex mu_;
  // _any: it waits on a tfslurm::Mutex.
  std::condition_variable_any cv_;
  std::deque<ServiceMsg> messages_ ABSL_GUARDED_BY(mu_);
};

class Mailboxes {
 public:
  std::shared_ptr<Mailbox> Get(const agent::v1::TaskRef& ref, bool create)
      ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    // Keyed by the secret too: a wrong secret gets its own empty mailbox and
    // never sees another task's assignment.
    auto key =
        std::make_tuple(ref.experiment_id(), ref.attempt(), ref.proc_id(), Sha256Hex(ref.secret()));
    auto it = boxes_.find(key);
    if (it != boxes_.end()) return it->second;
    if (!create) return nullptr;
    // Bounded: a flood of bogus registrations must not grow this forever.
    if (boxes_.size() > 100000) boxes_.erase(boxes_.begin());
    return boxes_[key] = std::make_shared<Mailbox>();
  }

 private:
  Mutex mu_;
  std::map<std::tuple<std::string, int, int, std::string>, std::shared_ptr<Mailbox>> boxes_
      ABSL_GUARDED_BY(mu_);
};

void ReplyMessage(httplib::Response& res, int status, const ServiceMessage& m) {
  std::string json;
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(m, &json, opts);
  res.status = status;
  res.set_content(json, "application/json");
}

}  // namespace

void RegisterAgentHttpRoutes(httplib::Server& server, Agents& agents,
                             std::shared_ptr<UidProof> uid_proof) {
  auto boxes = std::make_shared<Mailboxes>();
  if (!uid_proof) uid_proof = NoUidProof();
  server.Post("/agent/v1/message", [&agents, boxes, uid_proof](const httplib::Request& req,
                                                               httplib::Response& res) {
    AgentMessage m;
    google::protobuf::util::JsonParseOptions opts;
    auto parsed = google::protobuf::util::JsonStringToMessage(req.body, &m, opts);
    if (!parsed.ok()) {
      return api::ReplyError(
          res, InvalidArgument("the body is not an AgentMessage in protobuf's JSON mapping: " +
                                   std::string(parsed.message()),
                               {{"", std::string(parsed.message())}}));
    }
    // Each JSON message stands alone: in site mode each proves its uid.
    auto uid = uid_proof->Prove(m.task());
    if (!uid.ok()) return api::ReplyError(res, uid.status());
    int wait_s = 30;
    if (req.has_param("wait_s"))
      wait_s = std::clamp(std::atoi(req.get_param_value("wait_s").c_str()), 0, 120);

    if (m.body_case() == AgentMessage::kRegister) {
      auto box = boxes->Get(m.task(), /*create=*/true);
      DispatchRegister(agents, m, *uid, box);
      auto reply = box->Take(std::chrono::seconds(wait_s));
      if (!reply) {
        res.status = 202;
        res.set_content("{}", "application/json");
        return;
      }
      return ReplyMessage(res, 200, ToProto(*reply));
    }

    Status s = DispatchReport(agents, m, *uid);
    if (!s.ok()) return api::ReplyError(res, s);
    // Deliver what core queued for this task (a Shutdown), without waiting.
    if (auto box = boxes->Get(m.task(), /*create=*/false)) {
      if (auto pending = box->Take(std::chrono::milliseconds(0)))
        return ReplyMessage(res, 200, ToProto(*pending));
    }
    res.status = 200;
    res.set_content("{}", "application/json");
  });
}

}  // namespace tfslurm::agentrpc
