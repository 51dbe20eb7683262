#include "service/agentrpc/uid_proof.h"

#include "base/sha256.h"

namespace tfslurm::agentrpc {
namespace {

class NoProof final : public UidProof {
 public:
  StatusOr<std::optional<uint32_t>> Prove(const agent::v1::TaskRef&) override {
    return std::optional<uint32_t>();
  }
};

class MungeProof final : public UidProof {
 public:
  MungeProof(api::MungeDecoder decoder, std::function<int64_t()> now_s, int64_t max_age_s)
      : decoder_(std::move(decoder)), now_s_(std::move(now_s)), max_age_s_(max_age_s) {}

  StatusOr<std::optional<uint32_t>> Prove(const agent::v1::TaskRef& task) override {
    auto refuse = [&](const std::string& why) {
      return Status(StatusCode::kUnauthenticated, "site mode: the agent's MUNGE credential for '" +
                                                      task.experiment_id() + "' task " +
                                                      std::to_string(task.proc_id()) + " " + why);
    };
    if (task.uid_credential().empty())
      return refuse(
          "is missing (the job's agents prove their uid with munged: is munged "
          "running on the node, and TFSLURM_PROVE_UID=munge in the job's "
          "environment?)");
    auto cred = decoder_(task.uid_credential());
    if (!cred.ok()) return refuse("was not accepted by munged: " + cred.status().message());
    if (cred->payload != UidCredentialPayload(task))
      return refuse("is for another task or service (its payload must be '" +
                    UidCredentialPayload(task) + "')");
    const int64_t now = now_s_();
    if (cred->encoded_at_s + max_age_s_ < now)
      return refuse("is " + std::to_string(now - cred->encoded_at_s) + " s old (at most " +
                    std::to_string(max_age_s_) + ")");
    if (!replays_.Admit(Sha256Hex(task.uid_credential()), cred->encoded_at_s + max_age_s_, now))
      return refuse("was replayed");
    return std::optional<uint32_t>(static_cast<uint32_t>(cred->uid));
  }

 private:
  api::MungeDecoder decoder_;
  std::function<int64_t()> now_s_;
  const int64_t max_age_s_;
  api::ReplayCache replays_;
};

}  // namespace

std::string UidCredentialPayload(const agent::v1::TaskRef& task) {
  return "tfslurm-agent/1 " + task.experiment_id() + " " + std::to_string(task.attempt()) + " " +
         std::to_string(task.proc_id());
}

std::unique_ptr<UidProof> NoUidProof() { return std::make_unique<NoProof>(); }

std::unique_ptr<UidProof> MungeUidProof(api::MungeDecoder decoder, std::function<int64_t()> now_s,
                                        int64_t max_age_s) {
  return std::make_unique<MungeProof>(std::move(decoder), std::move(now_s), max_age_s);
}

}  // namespace tfslurm::agentrpc
