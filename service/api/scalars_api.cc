#include "service/api/scalars_api.h"

#include "base/shell_quote.h"
#include "service/api/errors.h"
#include "service/api/json_writer.h"
#include "service/api/request_params.h"
#include "service/core/scalars.h"

namespace tfslurm::api {
namespace {

constexpr size_t kMaxTagFilters = 100;

void WriteLatest(JsonWriter& w, const ScalarSeries& s) {
  w.Key("last");
  if (s.points.empty()) {
    w.Null();
    return;
  }
  const ScalarSeries::Point& p = s.points.back();
  w.BeginObject().Field("step", p.step).Key("value");
  if (p.value) {
    w.Double(*p.value);
  } else {
    w.Null();
  }
  w.Key("wall_time").Double(p.wall_time).Field("attempt", p.attempt).EndObject();
}

template <typename Get>
void WriteColumn(JsonWriter& w, std::string_view name, const ScalarSeries& s, Get get) {
  w.Key(name).BeginArray();
  for (const ScalarSeries::Point& p : s.points) get(w, p);
  w.EndArray();
}

std::string MetricsJson(const ExperimentRecord& e, const std::vector<ScalarSeries>& series,
                        const ScalarLimits& limits) {
  JsonWriter w;
  w.BeginObject().Field("experiment_id", e.id);
  w.Key("limits")
      .BeginObject()
      .Field("points_per_tag", limits.points_per_tag)
      .Field("tags", limits.tags)
      .EndObject();
  w.Key("tags").BeginArray();
  for (const ScalarSeries& s : series) {
    w.BeginObject()
        .Field("tag", s.tag)
        .Field("points", static_cast<int64_t>(s.points.size()))
        .Field("reported", s.reported);
    WriteLatest(w, s);
    w.EndObject();
  }
  w.EndArray();
  w.Key("series").BeginArray();
  for (const ScalarSeries& s : series) {
    w.BeginObject().Field("tag", s.tag);
    WriteColumn(w, "step", s, [](JsonWriter& w, const auto& p) { w.Int(p.step); });
    WriteColumn(w, "value", s, [](JsonWriter& w, const auto& p) {
      if (p.value) {
        w.Double(*p.value);
      } else {
        w.Null();
      }
    });
    WriteColumn(w, "wall_time", s, [](JsonWriter& w, const auto& p) { w.Double(p.wall_time); });
    WriteColumn(w, "attempt", s, [](JsonWriter& w, const auto& p) { w.Int(p.attempt); });
    w.EndObject();
  }
  w.EndArray();
  w.Key("steps_per_second");
  if (std::optional<StepRate> rate = StepsPerSecond(series)) {
    w.BeginObject().Field("tag", rate->tag);
    w.Key("wall_time").BeginArray();
    for (double t : rate->wall_time) w.Double(t);
    w.EndArray().Key("value").BeginArray();
    for (double v : rate->value) w.Double(v);
    w.EndArray().Key("attempt").BeginArray();
    for (int a : rate->attempt) w.Int(a);
    w.EndArray().EndObject();
  } else {
    w.Null();
  }
  w.Key("tensorboard");
  if (e.model_dir.empty()) {
    w.Null();
  } else {
    w.BeginObject()
        .Field("logdir", e.model_dir)
        .Field("command", "tensorboard --logdir " + ShellQuote(e.model_dir))
        .EndObject();
  }
  w.EndObject();
  return w.Take();
}

}  // namespace

void RegisterScalarRoutes(httplib::Server& server, Experiments& experiments, Authenticator& auth,
                          const ScalarLimits& limits) {
  server.Get(std::string("/experiments/") + kIdPattern + "/metrics",
             Guard(auth, [&experiments, limits](const httplib::Request& req, httplib::Response& res,
                                                const Principal& who) {
               auto experiment = experiments.GetExperiment(req.matches[1]);
               if (!experiment.ok()) return ReplyError(res, experiment.status());
               if (Status s = CheckAccess(who, *experiment); !s.ok()) return ReplyError(res, s);
               std::vector<std::string> tags;
               for (size_t i = 0; i < req.get_param_value_count("tag"); ++i)
                 tags.push_back(req.get_param_value("tag", i));
               if (tags.size() > kMaxTagFilters)
                 return ReplyError(
                     res,
                     InvalidArgument("too many tags asked for",
                                     {{"tag", std::to_string(tags.size()) + " given; at most " +
                                                  std::to_string(kMaxTagFilters)}}));
               auto series = experiments.ReadScalars(experiment->id, tags);
               if (!series.ok()) return ReplyError(res, series.status());
               res.status = 200;
               res.set_content(MetricsJson(*experiment, *series, limits), "application/json");
             }));
}

}  // namespace tfslurm::api
