#include "agent/uid_credential.h"

#include <munge.h>

#include <cstdlib>
#include <memory>

namespace tfslurm::agent {

StatusOr<std::string> MakeUidCredential(const std::string& payload, const std::string& socket) {
  std::unique_ptr<std::remove_pointer_t<munge_ctx_t>, decltype(&munge_ctx_destroy)> ctx(
      munge_ctx_create(), munge_ctx_destroy);
  if (!ctx) return Error("cannot make a MUNGE context");
  if (!socket.empty() &&
      munge_ctx_set(ctx.get(), MUNGE_OPT_SOCKET, socket.c_str()) != EMUNGE_SUCCESS)
    return Error("cannot use munged's socket " + socket + ": " + munge_ctx_strerror(ctx.get()));
  char* cred = nullptr;
  munge_err_t e = munge_encode(&cred, ctx.get(), payload.data(), static_cast<int>(payload.size()));
  if (e != EMUNGE_SUCCESS) {
    std::string why =
        munge_ctx_strerror(ctx.get()) ? munge_ctx_strerror(ctx.get()) : munge_strerror(e);
    return Unavailable("munged did not make a credential (" + why + "); is munged running on " +
                       "this node" + (socket.empty() ? "" : " at " + socket) + "?");
  }
  std::string out(cred);
  free(cred);
  return out;
}

}  // namespace tfslurm::agent
