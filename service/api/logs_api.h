// GET /experiments/{id}/logs: what an experiment's tasks wrote, as text.
//   ?task=ROLE:INDEX  one task of the attempt (ROLE chief|ps|worker|evaluator);
//                     without it, the batch script's own output (batch.out)
//   ?attempt=N        default: the current attempt
//   ?tail=N           only the last N lines
//   ?offset=BYTES     from this byte on, for a follower going on; not with tail
//   ?follow=true      keep sending new output (chunked) until the attempt's job
//                     has ended, for at most LogOptions::follow_window
// The X-Tfslurm-Log-Offset response header says at which byte the body starts.
//
// The caller must own the experiment or be an admin (auth.h), as for
// GET /experiments/{id}. Logs are served only from <output_root>/<id>/logs: the file's path is
// built from the validated id and integers (the attempt, and the proc id the task records give for
// ROLE:INDEX), never from request text, and it is opened without following any symlink below the
// output root (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), as a regular file with one link: the
// directory may belong to the experiment's owner while tfslurmd reads as root.
//
// Thread safety: register the routes once, before serving; httplib then runs
// the handlers on many threads at once. They share Experiments (thread-safe),
// read-only options and the count of followers (with its own lock); a
// response's state is its connection's own.
#pragma once

#include <httplib.h>

#include <chrono>
#include <string>

#include "service/api/auth.h"
#include "service/core/experiments.h"

namespace tfslurm::api {

struct LogOptions {
  std::string output_root;  // where the lifecycle writes <id>/logs/attempt-<N>/
  // A follow response ends after this even while the attempt runs on, and the
  // client asks again from its offset: a client that vanished without a word
  // holds a server thread for no longer than this.
  std::chrono::milliseconds follow_window = std::chrono::seconds(30);
  // Follow responses at once, and of one user at once; more get 429, so
  // followers can never take up the service's connections, nor one user
  // every follower's slot (--log-followers, --log-followers-per-user).
  int max_followers = 64;
  int max_followers_per_user = 8;
};

void RegisterLogRoutes(httplib::Server& server, Experiments& experiments, Authenticator& auth,
                       const LogOptions& options);

}  // namespace tfslurm::api
