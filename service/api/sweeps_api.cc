#include "service/api/sweeps_api.h"

#include <nlohmann/json.hpp>

#include "service/api/experiments_json.h"
#include "service/api/json_writer.h"

#include "service/api/errors.h"
#include "service/api/request_params.h"

namespace tfslurm::api {
namespace {

using sweeps::SweepTrialView;
using sweeps::SweepView;

using nlohmann::json;

// The path segment of a sweep id (sweeps/sweep_spec.cc's pattern).
constexpr const char* kSweepIdPattern = "([a-z0-9][a-z0-9._-]{0,57})";

json Optional(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }
json Optional(const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); }

// RFC 3339 with milliseconds, or null for "not yet", as every time of the API.
json Time(int64_t ms) {
  JsonWriter w;
  WriteTimestamp(w, ms);
  return json::parse(w.Take(), nullptr, false);
}

json SweepSummaryJson(const SweepRecord& s) {
  return {{"id", s.id},
          {"owner", s.owner},
          {"state", SweepStateName(s.state)},
          {"reason", s.reason},
          {"trials_total", s.trials},
          {"created_at", Time(s.created_at)},
          {"updated_at", Time(s.updated_at)}};
}

json TrialJson(const SweepTrialView& v) {
  const SweepTrialRecord& t = v.trial;
  json params = json::parse(t.params_json, nullptr, false);
  return {{"index", t.index},
          {"experiment_id", t.experiment_id},
          {"params", params.is_discarded() ? json::object() : params},
          {"state", SweepTrialStateName(t.state)},
          {"experiment_state", v.state ? json(ExperimentStateName(*v.state)) : json(nullptr)},
          {"reason", v.reason},
          {"end_reason", t.end_reason ? EndReasonName(*t.end_reason) : ""},
          {"objective", Optional(t.objective)},
          {"objective_step", Optional(t.objective_step)},
          {"last_step", Optional(t.last_step)},
          {"rungs_passed", t.rungs_passed},
          {"node_seconds", t.node_seconds},
          {"note", t.note},
          {"started_at", Time(t.started_at)},
          {"ended_at", Time(t.ended_at)}};
}

void Reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

// NotFound unless `p` owns the sweep or is an admin, with the message of an
// id that does not exist.
Status CheckSweepAccess(const Principal& p, const SweepRecord& s) {
  if (p.admin || s.owner == p.user) return Status::Ok();
  return NotFound("no sweep with id '" + s.id + "'");
}

}  // namespace

std::string SweepViewJson(const SweepView& view) {
  json j = SweepSummaryJson(view.sweep);
  json spec = json::parse(view.sweep.spec_json, nullptr, false);
  j["spec"] = spec.is_discarded() ? json(nullptr) : spec;
  j["objective"] = spec.is_discarded() ? json(nullptr) : spec["objective"];
  j["node_seconds"] = view.node_seconds;
  json trials = json::array();
  json counts = {{"running", 0}, {"ended", 0}, {"not_started", 0}, {"stopped_early", 0}};
  json best = nullptr;
  for (const SweepTrialView& v : view.trials) {
    trials.push_back(TrialJson(v));
    counts[SweepTrialStateName(v.trial.state)] =
        counts[SweepTrialStateName(v.trial.state)].get<int>() + 1;
    if (v.trial.end_reason == EndReason::kStoppedEarly)
      counts["stopped_early"] = counts["stopped_early"].get<int>() + 1;
    if (view.best_trial && v.trial.index == *view.best_trial) best = trials.back();
  }
  j["counts"] = counts;
  j["best_trial"] = best;
  j["trials"] = trials;
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

void RegisterSweepRoutes(httplib::Server& server, sweeps::Sweeps& sweeps, Authenticator& auth) {
  server.Post("/sweeps", Guard(auth, [&](const httplib::Request& req, httplib::Response& res,
                                         const Principal& who) {
                auto body = ParseJsonBody(req);
                if (!body.ok()) return ReplyError(res, body.status());
                auto view = sweeps.Submit(*body, who.user);
                if (!view.ok()) return ReplyError(res, view.status());
                res.set_header("Location", "/sweeps/" + view->sweep.id);
                res.status = 201;
                res.set_content(SweepViewJson(*view), "application/json");
              }));

  server.Get("/sweeps", Guard(auth, [&](const httplib::Request&, httplib::Response& res,
                                        const Principal& who) {
               auto listed = sweeps.List(who.admin ? "" : who.user);
               if (!listed.ok()) return ReplyError(res, listed.status());
               json list = json::array();
               for (const SweepRecord& s : *listed) list.push_back(SweepSummaryJson(s));
               Reply(res, 200, {{"sweeps", list}});
             }));

  server.Get(
      std::string("/sweeps/") + kSweepIdPattern,
      Guard(auth, [&](const httplib::Request& req, httplib::Response& res, const Principal& who) {
        auto view = sweeps.Get(req.matches[1]);
        if (!view.ok()) return ReplyError(res, view.status());
        if (Status s = CheckSweepAccess(who, view->sweep); !s.ok()) return ReplyError(res, s);
        res.status = 200;
        res.set_content(SweepViewJson(*view), "application/json");
      }));

  server.Post(
      std::string("/sweeps/") + kSweepIdPattern + "/cancel",
      Guard(auth, [&](const httplib::Request& req, httplib::Response& res, const Principal& who) {
        auto view = sweeps.Get(req.matches[1]);
        if (!view.ok()) return ReplyError(res, view.status());
        if (Status s = CheckSweepAccess(who, view->sweep); !s.ok()) return ReplyError(res, s);
        if (Status s = sweeps.Cancel(req.matches[1], "cancelled by " + who.user); !s.ok())
          return ReplyError(res, s);
        auto after = sweeps.Get(req.matches[1]);
        if (!after.ok()) return ReplyError(res, after.status());
        res.status = 200;
        res.set_content(SweepViewJson(*after), "application/json");
      }));

  // As POST /experiments/{id}/delete: removing a sweep and its trials'
  // experiments (with ?files=true their directories) cannot be undone.
  server.Post(
      std::string("/sweeps/") + kSweepIdPattern + "/delete",
      Guard(auth, [&](const httplib::Request& req, httplib::Response& res, const Principal& who) {
        auto view = sweeps.Get(req.matches[1]);
        if (!view.ok()) return ReplyError(res, view.status());
        if (Status s = CheckSweepAccess(who, view->sweep); !s.ok()) return ReplyError(res, s);
        auto deleted = sweeps.Delete(req.matches[1], IsTrue(req, "files"));
        if (!deleted.ok()) return ReplyError(res, deleted.status());
        json trials = json::array();
        int64_t entries = 0;
        for (const DeleteResult& d : deleted->experiments) {
          trials.push_back({{"id", d.id},
                            {"files_removed_from", d.files_removed_from},
                            {"entries_removed", d.entries_removed},
                            {"model_dir_kept", d.model_dir_kept}});
          entries += d.entries_removed;
        }
        Reply(res, 200,
              {{"id", deleted->id},
               {"deleted", true},
               {"experiments_deleted", trials},
               {"entries_removed", entries}});
      }));
}

}  // namespace tfslurm::api
