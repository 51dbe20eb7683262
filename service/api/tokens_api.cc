#include "service/api/tokens_api.h"

#include <nlohmann/json.hpp>

#include "service/api/errors.h"

namespace tfslurm::api {

using json = nlohmann::json;

void RegisterTokenRoutes(httplib::Server& server, Tokens& tokens, Authenticator& auth) {
  server.Post("/tokens", Guard(auth, [&tokens](const httplib::Request& req, httplib::Response& res,
                                               const Principal& who) {
                std::string user = who.user;
                bool admin = false;
                if (!req.body.empty()) {
                  json body = json::parse(req.body, nullptr, false);
                  if (body.is_discarded() || !body.is_object())
                    return ReplyError(res, Status(StatusCode::kInvalidArgument,
                                                  "the body must be a JSON object "
                                                  "{\"user\": NAME, \"admin\": BOOL}, or empty"));
                  for (const auto& [key, value] : body.items()) {
                    if (key == "user" && value.is_string()) {
                      user = value.get<std::string>();
                    } else if (key == "admin" && value.is_boolean()) {
                      admin = value.get<bool>();
                    } else {
                      return ReplyError(
                          res, Status(StatusCode::kInvalidArgument,
                                      "unknown or mistyped field '" + key +
                                          "'; the fields are user (string) and admin (boolean)",
                                      {{key, "user must be a string, admin a boolean"}}));
                    }
                  }
                }
                if (!who.admin && user != who.user)
                  return ReplyError(res, Status(StatusCode::kPermissionDenied,
                                                "you are " + who.user +
                                                    ": only an admin may "
                                                    "create a token for another user ('" +
                                                    user + "')"));
                if (!who.admin && admin)
                  return ReplyError(res, Status(StatusCode::kPermissionDenied,
                                                "only an admin may create an admin token"));
                auto token = tokens.Create(user, admin);
                if (!token.ok()) return ReplyError(res, token.status());
                res.status = 201;
                res.set_content(json{{"token", *token}, {"user", user}, {"admin", admin}}.dump(),
                                "application/json");
              }));
}

}  // namespace tfslurm::api
