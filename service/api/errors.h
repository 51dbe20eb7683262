// The one place where a Status becomes an HTTP answer. Every error the API
// returns is JSON: {"error": {"code", "message", "fields": [{field, reason}],
// "retryable"}}.
//
// Thread safety: pure functions; ReplyError writes only the response it is
// given.
#pragma once

#include <httplib.h>

#include "base/status.h"

namespace tfslurm::api {

int HttpStatusFor(StatusCode code);
void ReplyError(httplib::Response& res, const Status& status);
// The JSON body ReplyError answers with, for an answer written without
// httplib (the gate's refusals: request_gate.h).
std::string ErrorBody(const Status& status);

}  // namespace tfslurm::api
