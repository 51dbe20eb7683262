#include "service/api/http_api.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "base/build_info.h"
#include "service/api/auth.h"
#include "service/api/errors.h"
#include "service/api/experiments_json.h"
#include "service/api/list_cache.h"
#include "service/api/request_params.h"

namespace tfslurm::api {
namespace {

using nlohmann::json;

void ReplyJson(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

// For answers JsonWriter already wrote.
void ReplyJsonText(httplib::Response& res, int status, std::string body) {
  res.status = status;
  res.set_content(std::move(body), "application/json");
}

// Loads experiment `id` and checks that `p` may touch it.
Status Authorize(Experiments& experiments, const Principal& p, const std::string& id) {
  auto e = experiments.GetExperiment(id);
  if (!e.ok()) return e.status();
  return CheckAccess(p, *e);
}

// ?state=running,queued as states; an unknown name is refused naming it.
StatusOr<std::vector<ExperimentState>> ParseStates(const std::string& states) {
  std::vector<ExperimentState> out;
  size_t start = 0;
  while (start <= states.size()) {
    size_t comma = states.find(',', start);
    std::string s =
        states.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!s.empty()) {
      auto st = ParseExperimentState(s);
      if (!st)
        return InvalidArgument("unknown state '" + s + "'",
                               {{"state",
                                 "must be a comma-separated list of queued, starting, running, "
                                 "restarting, succeeded, failed, cancelled; got '" +
                                     s + "'"}});
      out.push_back(*st);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// GET /experiments/{id}'s ?task_state, ?tasks_offset and ?tasks_limit.
StatusOr<TaskPage> TaskPageOf(const httplib::Request& req) {
  TaskPage page;
  if (req.has_param("task_state")) {
    const std::string name = req.get_param_value("task_state");
    page.state = ParseTaskState(name);
    if (!page.state)
      return InvalidArgument("unknown task state '" + ShortForError(name) + "'",
                             {{"task_state",
                               "must be one of pending, registered, running, succeeded, failed, "
                               "reaped, lost; got '" +
                                   ShortForError(name) + "'"}});
  }
  auto offset = IntParam(req, "tasks_offset", 0, 0, 1 << 30);
  if (!offset.ok()) return offset.status();
  auto limit = IntParam(req, "tasks_limit", -1, 0, 1 << 30);
  if (!limit.ok()) return limit.status();
  page.offset = *offset;
  page.limit = *limit;
  return page;
}

// A resume's body: empty (resume as it was) or {"changes": {...}}, which
// changes the spec (core/spec_changes.h). Null: no changes.
StatusOr<json> ResumeChanges(const httplib::Request& req) {
  if (req.body.empty()) return json(nullptr);
  auto body = ParseJsonBody(req);
  if (!body.ok()) return body.status();
  if (!body->is_object())
    return InvalidArgument("the body must be a JSON object",
                           {{"",
                             "must be an object such as {\"changes\": {\"resources\": "
                             "{\"time_limit\": \"02:00:00\"}}}"}});
  for (const auto& [key, value] : body->items())
    if (key != "changes")
      return InvalidArgument("unknown field '" + key + "'",
                             {{key, "is not a field of a resume; the one field is changes"}});
  return body->contains("changes") ? (*body)["changes"] : json(nullptr);
}

// GET /healthz and GET /version.
void RegisterServiceRoutes(httplib::Server& server, Authenticator& auth,
                           const ApiOptions& options) {
  server.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    ReplyJson(res, 200, {{"status", "ok"}});
  });

  // Behind a token, unlike /healthz: which Slurm a site runs is nobody's
  // business without one.
  server.Get(
      "/version",
      Guard(auth, [options](const httplib::Request&, httplib::Response& res, const Principal&) {
        json slurmctld =
            options.slurmctld_release.empty() ? json(nullptr) : json(options.slurmctld_release);
        ReplyJson(
            res, 200,
            {{"tfslurm", {{"version", base::TfslurmVersion()}, {"commit", base::TfslurmCommit()}}},
             {"slurm", {{"libslurm", options.libslurm_release}, {"slurmctld", slurmctld}}}});
      }));
}

// POST /experiments and GET /experiments.
void RegisterCollectionRoutes(httplib::Server& server, Experiments& experiments, Clock& clock,
                              Authenticator& auth,
                              std::shared_ptr<ExperimentListCache> list_cache) {
  server.Post("/experiments", Guard(auth, [&](const httplib::Request& req, httplib::Response& res,
                                              const Principal& who) {
                auto body = ParseJsonBody(req);
                if (!body.ok()) return ReplyError(res, body.status());
                bool dry_run = IsTrue(req, "dry_run");
                auto result = experiments.Submit(*body, who.user, dry_run);
                if (!result.ok()) return ReplyError(res, result.status());
                if (dry_run) {
                  return ReplyJson(res, 200,
                                   {{"id", result->experiment.id},
                                    {"spec", json::parse(result->experiment.spec_json)},
                                    {"mem_per_task_mb", result->memory.mem_per_task_mb},
                                    {"mem_per_cpu_mb", result->memory.mem_per_cpu_mb},
                                    {"mem_explanation", result->memory.explanation},
                                    {"job_name", result->attempt.job_name},
                                    {"sbatch", result->attempt.sbatch_script}});
                }
                auto view = experiments.Get(result->experiment.id);
                if (!view.ok()) return ReplyError(res, view.status());
                res.set_header("Location", "/experiments/" + result->experiment.id);
                ReplyJsonText(res, 201, ExperimentViewJson(*view, clock.NowMs()));
              }));

  server.Get("/experiments",
             Guard(auth, [list_cache](const httplib::Request& req, httplib::Response& res,
                                      const Principal& who) {
               ListQuery q;
               // Users see their own experiments; admins all, or one owner's with ?owner=.
               q.owner = who.admin ? req.get_param_value("owner") : who.user;
               if (req.has_param("state")) {
                 auto states = ParseStates(req.get_param_value("state"));
                 if (!states.ok()) return ReplyError(res, states.status());
                 q.states = std::move(states).value();
               }
               auto limit = IntParam(req, "limit", 50, 1, 1000);
               if (!limit.ok()) return ReplyError(res, limit.status());
               auto offset = IntParam(req, "offset", 0, 0, 1 << 30);
               if (!offset.ok()) return ReplyError(res, offset.status());
               q.limit = static_cast<int>(*limit);
               q.offset = static_cast<int>(*offset);
               auto body = list_cache->Body(q);
               if (!body.ok()) return ReplyError(res, body.status());
               ReplyJsonText(res, 200, std::move(body).value());
             }));
}

// GET /experiments/{id} and GET /experiments/{id}/sbatch.
void RegisterReadRoutes(httplib::Server& server, Experiments& experiments, Clock& clock,
                        Authenticator& auth) {
  server.Get(
      std::string("/experiments/") + kIdPattern,
      Guard(auth, [&](const httplib::Request& req, httplib::Response& res, const Principal& who) {
        auto page = TaskPageOf(req);
        if (!page.ok()) return ReplyError(res, page.status());
        auto view = experiments.GetPage(req.matches[1], *page);
        if (!view.ok()) return ReplyError(res, view.status());
        if (Status s = CheckAccess(who, view->experiment); !s.ok()) return ReplyError(res, s);
        ReplyJsonText(res, 200, ExperimentViewJson(*view, clock.NowMs()));
      }));

  server.Get(
      std::string("/experiments/") + kIdPattern + "/sbatch",
      Guard(auth, [&](const httplib::Request& req, httplib::Response& res, const Principal& who) {
        if (Status s = Authorize(experiments, who, req.matches[1]); !s.ok())
          return ReplyError(res, s);
        auto attempts = experiments.ListAttempts(req.matches[1]);
        if (!attempts.ok()) return ReplyError(res, attempts.status());
        if (attempts->empty())
          return ReplyError(res, NotFound("no experiment '" + req.matches[1].str() + "'"));
        auto n = IntParam(req, "attempt", attempts->back().number, 1, attempts->back().number);
        if (!n.ok()) return ReplyError(res, n.status());
        res.set_content((*attempts)[*n - 1].sbatch_script, "text/x-shellscript; charset=utf-8");
      }));
}

// DELETE /experiments/{id} (cancel), POST .../resume and POST .../delete.
void RegisterActionRoutes(httplib::Server& server, Experiments& experiments, Clock& clock,
                          Authenticator& auth) {
  server.Delete(
      std::string("/experiments/") + kIdPattern,
      Guard(auth, [&](const httplib::Request& req, httplib::Response& res, const Principal& who) {
        if (Status s = Authorize(experiments, who, req.matches[1]); !s.ok())
          return ReplyError(res, s);
        Status s = experiments.Cancel(req.matches[1], "cancelled by " + who.user);
        if (!s.ok()) return ReplyError(res, s);
        auto view = experiments.Get(req.matches[1]);
        if (!view.ok()) return ReplyError(res, view.status());
        ReplyJsonText(res, 200, ExperimentViewJson(*view, clock.NowMs()));
      }));

  server.Post(
      std::string("/experiments/") + kIdPattern + "/resume",
      Guard(auth, [&](const httplib::Request& req, httplib::Response& res, const Principal& who) {
        if (Status s = Authorize(experiments, who, req.matches[1]); !s.ok())
          return ReplyError(res, s);
        auto changes = ResumeChanges(req);
        if (!changes.ok()) return ReplyError(res, changes.status());
        auto attempt = experiments.Resume(req.matches[1], *changes);
        if (!attempt.ok()) return ReplyError(res, attempt.status());
        auto view = experiments.Get(req.matches[1]);
        if (!view.ok()) return ReplyError(res, view.status());
        ReplyJsonText(res, 202, ExperimentViewJson(*view, clock.NowMs()));
      }));

  // Not DELETE /experiments/{id}, which cancels: removing the record of an
  // ended experiment (and, with ?files=true, its directory) cannot be undone.
  server.Post(
      std::string("/experiments/") + kIdPattern + "/delete",
      Guard(auth, [&](const httplib::Request& req, httplib::Response& res, const Principal& who) {
        if (Status s = Authorize(experiments, who, req.matches[1]); !s.ok())
          return ReplyError(res, s);
        auto deleted = experiments.Delete(req.matches[1], IsTrue(req, "files"));
        if (!deleted.ok()) return ReplyError(res, deleted.status());
        ReplyJson(res, 200,
                  {{"id", deleted->id},
                   {"deleted", true},
                   {"files_removed_from", deleted->files_removed_from},
                   {"entries_removed", deleted->entries_removed},
                   {"model_dir_kept", deleted->model_dir_kept}});
      }));
}

// Errors httplib raises itself (unknown route, body too large) get the same
// JSON shape; responses a handler already wrote are left alone.
httplib::Server::HandlerResponse ReplyHttplibError(const httplib::Request& req,
                                                   httplib::Response& res) {
  if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
  Status s;
  switch (res.status) {
    case 404:
      s = NotFound("no route for " + req.method + " " + req.path);
      break;
    case 413:
      s = Status(StatusCode::kResourceExhausted, "the request body is larger than the limit");
      break;
    case 400:
      // httplib refuses a malformed request before routing: a request
      // line or a header field it cannot parse, framing it does not take.
      s = InvalidArgument("malformed HTTP request for " + req.method + " " + req.path);
      break;
    default:
      s = InvalidArgument("the request could not be handled (HTTP " + std::to_string(res.status) +
                          ")");
  }
  int status = res.status;
  ReplyError(res, s);
  res.status = status;
  return httplib::Server::HandlerResponse::Handled;
}

void ReplyException(const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
  std::string what = "unknown exception";
  try {
    std::rethrow_exception(ep);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  // A bug: logged with its route, not only told to the caller.
  spdlog::error("{} {}: internal error: {}", req.method, PercentEncodedForLog(req.path), what);
  ReplyError(res, Internal("internal error: " + what));
}

}  // namespace

void RegisterExperimentRoutes(httplib::Server& server, Experiments& experiments, Clock& clock,
                              Authenticator& auth, std::shared_ptr<ExperimentListCache> list_cache,
                              const ApiOptions& options) {
  server.set_payload_max_length(options.max_body_bytes);
  RegisterServiceRoutes(server, auth, options);
  RegisterCollectionRoutes(server, experiments, clock, auth, std::move(list_cache));
  RegisterReadRoutes(server, experiments, clock, auth);
  RegisterActionRoutes(server, experiments, clock, auth);
  server.set_error_handler(httplib::Server::HandlerWithResponse(ReplyHttplibError));
  server.set_exception_handler(ReplyException);
}

}  // namespace tfslurm::api
