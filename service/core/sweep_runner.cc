#include "service/core/sweep_runner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "base/number_text.h"
#include "service/core/components.h"
#include "service/core/early_stopping.h"
#include "service/core/sweep_objective.h"
#include "service/core/sweep_space.h"

namespace tfslurm {
namespace {

using nlohmann::json;

// The nodes a job of `spec_json` holds: every component's.
int NodesOf(const std::string& spec_json) {
  auto spec = ParseSpec(json::parse(spec_json, nullptr, false));
  if (!spec.ok()) return 1;
  int nodes = 0;
  for (const JobComponent& c : JobComponents(*spec)) nodes += c.resources.nodes;
  return nodes > 0 ? nodes : 1;
}

// Node-seconds of an experiment's attempts up to `now_ms`: each attempt
// from its start (a job running) to its end, times the job's nodes.
double NodeSeconds(const ExperimentRecord& e, const std::vector<AttemptRecord>& attempts,
                   int64_t now_ms) {
  double ms = 0;
  for (const AttemptRecord& a : attempts) {
    if (a.in_place || a.started_at == 0) continue;  // in place: the job of the one before
    const int64_t end = a.ended_at > 0 ? a.ended_at : now_ms;
    if (end > a.started_at) ms += static_cast<double>(end - a.started_at);
  }
  return ms / 1000.0 * NodesOf(e.spec_json);
}

// Whether trial `index` of `sweep_id` has its row.
bool Recorded(Store& store, const std::string& sweep_id, int index) {
  auto trials = store.ListSweepTrials(sweep_id);
  if (!trials.ok()) return false;
  for (const SweepTrialRecord& t : *trials)
    if (t.index == index) return true;
  return false;
}

// The experiment of trial `t`: only one its sweep started. A trial is tied
// to its experiment by id, and an id is free again once its experiment is
// deleted, so the owner is checked too: someone else's experiment of that id
// (made after a deletion, or while the trial waited to start) is not the
// trial's, and nothing of it is shown or acted on (NotFound, as if gone).
StatusOr<ExperimentRecord> TrialExperiment(Store& store, const SweepRecord& sweep,
                                           const SweepTrialRecord& t) {
  if (t.state == SweepTrialState::kNotStarted)
    return NotFound("trial " + std::to_string(t.index) + " never started");
  auto e = store.GetExperiment(t.experiment_id);
  if (!e.ok()) return e.status();
  if (e->owner != sweep.owner) return NotFound("no experiment '" + t.experiment_id + "'");
  return e;
}

StatusOr<SweepSpec> SpecOf(const SweepRecord& sweep) {
  json stored = json::parse(sweep.spec_json, nullptr, false);
  // A grid stored before search.order existed ran in its listed order; its
  // trials keep the points they were created with.
  if (stored.is_object() && stored.contains("search") && stored["search"].is_object() &&
      stored["search"].value("type", "") == "grid" && !stored["search"].contains("order"))
    stored["search"]["order"] = "listed";
  return ParseSweepSpec(stored);
}

// The best trial: among those that succeeded, else among those not stopped
// early; by objective.
std::optional<int> BestTrial(const std::vector<SweepTrialView>& trials,
                             const SweepObjective& objective) {
  auto pick = [&](bool succeeded_only) -> std::optional<int> {
    std::optional<int> best;
    std::optional<double> value;
    for (const SweepTrialView& v : trials) {
      const SweepTrialRecord& t = v.trial;
      if (!t.objective || t.end_reason == EndReason::kStoppedEarly) continue;
      // Its experiment's state, or the trial's own record of its end when
      // the experiment was deleted since.
      const bool succeeded =
          v.state ? *v.state == ExperimentState::kSucceeded : t.end_reason == EndReason::kSucceeded;
      if (succeeded_only && !succeeded) continue;
      if (!value || objective.Better(*t.objective, *value)) {
        value = t.objective;
        best = t.index;
      }
    }
    return best;
  };
  if (auto best = pick(true)) return best;
  if (auto best = pick(false)) return best;
  // Every trial stopped early (a rule cutting at every rung): the best
  // value seen is still the sweep's best.
  std::optional<int> best;
  std::optional<double> value;
  for (const SweepTrialView& v : trials)
    if (v.trial.objective && (!value || objective.Better(*v.trial.objective, *value))) {
      value = v.trial.objective;
      best = v.trial.index;
    }
  return best;
}

}  // namespace

Curve SweepRunner::CurveOfTrial(const SweepRecord& sweep, const SweepTrialRecord& t,
                                const std::string& tag) {
  // An ended trial's curve no longer changes: read once, not at every step
  // of its sweep for as long as the sweep runs.
  const std::pair<std::string, int> key{sweep.id, t.index};
  if (t.state == SweepTrialState::kEnded)
    if (auto it = ended_curves_.find(key); it != ended_curves_.end()) return it->second;
  Curve curve;
  auto series = core_.ports().store.ReadScalars(t.experiment_id, {tag});
  if (series.ok() && !series->empty()) curve = CurveOf(series->front());
  if (t.state == SweepTrialState::kEnded && series.ok()) ended_curves_[key] = curve;
  return curve;
}

void SweepRunner::ForgetEndedSweeps(const std::vector<SweepRecord>& open) {
  std::set<std::string> ids;
  for (const SweepRecord& s : open) ids.insert(s.id);
  std::erase_if(ended_curves_, [&](const auto& entry) { return !ids.contains(entry.first.first); });
}

bool SweepRunner::JobGone(const ExperimentRecord& e, std::vector<AttemptRecord>& attempts,
                          std::optional<std::vector<JobInfo>>& jobs, Changes& c) {
  if (!IsTerminal(e.state)) return false;
  if (attempts.empty() || attempts.back().state == AttemptState::kEnded) return true;
  {
    MutexLock lock(core_.mu());
    if (core_.open().find(e.id) != core_.open().end()) return false;  // SlurmWatch ends it
  }
  // Read again: core may have ended it (and stopped watching) since the
  // caller read it, and its record of the end is the one to keep.
  auto again = core_.ports().store.ListAttempts(e.id);
  if (!again.ok() || again->empty()) return false;
  attempts = std::move(again).value();
  if (attempts.back().state == AttemptState::kEnded) return true;
  AttemptRecord& last = attempts.back();
  if (last.slurm_job_id > 0) {
    if (!jobs) {
      auto loaded = core_.ports().slurm.LoadJobs();
      if (!loaded.ok()) return false;  // the next step asks again
      jobs = GroupHetJobs(std::move(loaded).value());
    }
    for (const JobInfo& j : *jobs)
      if (j.job_id == last.slurm_job_id && j.name == last.job_name &&
          (!IsFinished(j.state) || j.completing))
        return false;
  }
  last.state = AttemptState::kEnded;
  last.ended_at = core_.ports().clock.NowMs();
  c.attempts.push_back(last);
  return true;
}

StatusOr<SweepView> SweepRunner::Submit(const json& input, const std::string& owner) {
  auto parsed = ParseSweepSpec(input, core_.config().limits);
  if (!parsed.ok()) return parsed.status();
  SweepSpec spec = std::move(parsed).value();
  if (spec.id.empty()) {
    spec.id = core_.ports().random.NewExperimentId().substr(0, kMaxSweepIdLength);
    while (!spec.id.empty() && !IsValidSweepId(spec.id)) spec.id.pop_back();
  }
  if (core_.ports().store.GetSweep(spec.id).ok())
    return Status(StatusCode::kAlreadyExists, "sweep '" + spec.id + "' exists; choose another id",
                  {{"id", "'" + spec.id + "' is taken"}});
  // One owner's sweeps cannot take the poll thread from everyone else's.
  if (auto open = core_.ports().store.ListSweeps({owner, /*open_only=*/true}); !open.ok()) {
    return open.status();
  } else if (static_cast<int>(open->size()) >= core_.config().max_open_sweeps_per_owner) {
    return Status(StatusCode::kResourceExhausted,
                  owner + " has " + std::to_string(open->size()) + " sweeps running, at most " +
                      std::to_string(core_.config().max_open_sweeps_per_owner) +
                      " at once; cancel one (tfctl sweep cancel ID) or wait for one to end");
  }
  auto trials = ExpandTrials(spec, core_.config().limits);
  if (!trials.ok()) return trials.status();
  // Each trial as the submission of an experiment would check it (its
  // owner's account, workdir, partition, memory, the id being free), so that
  // a sweep refused here leaves nothing behind, and one taken here does not
  // fail trial by trial later.
  for (const TrialPlan& t : *trials) {
    auto dry = submission_.Submit(t.spec, owner, /*dry_run=*/true);
    if (dry.ok()) continue;
    const Status& s = dry.status();
    if (s.fields().empty()) return s;
    std::vector<FieldError> fields;
    for (const FieldError& f : s.fields()) {
      if (f.field == "id")
        fields.push_back({"id", "trial " + std::to_string(t.index) + "'s experiment id " + t.id +
                                    ": " + f.reason + "; choose another sweep id"});
      else
        fields.push_back({"experiment." + f.field, "in trial " + std::to_string(t.index) + " (" +
                                                       t.params.dump() + "): " + f.reason});
    }
    return Status(s.code(),
                  "trial " + std::to_string(t.index) + " of sweep '" + spec.id +
                      "' would be refused: " + s.message(),
                  std::move(fields));
  }
  const int64_t now = core_.ports().clock.NowMs();
  SweepRecord record;
  record.id = spec.id;
  record.owner = owner;
  record.spec_json = spec.ToJson().dump();
  record.state = SweepState::kRunning;
  record.reason = "starting its first trials";
  record.trials = static_cast<int>(trials->size());
  record.created_at = record.updated_at = now;
  Changes c;
  c.sweep = record;
  c.create_sweep = true;
  if (Status s = core_.Apply({&c, 1}); !s.ok()) {
    if (s.code() == StatusCode::kAlreadyExists)
      return Status(StatusCode::kAlreadyExists, "sweep '" + spec.id + "' exists; choose another id",
                    {{"id", "'" + spec.id + "' is taken"}});
    return s;
  }
  {
    MutexLock lock(mu_);
    Advance(record);
  }
  return Get(spec.id);
}

StatusOr<SweepView> SweepRunner::Get(const std::string& id) {
  Store& store = core_.ports().store;
  auto sweep = store.GetSweep(id);
  if (!sweep.ok()) return sweep.status();
  auto spec = SpecOf(*sweep);
  if (!spec.ok()) return Internal("sweep '" + id + "' has a stored spec that does not parse");
  auto trials = store.ListSweepTrials(id);
  if (!trials.ok()) return trials.status();
  SweepView view;
  view.sweep = std::move(sweep).value();
  const int64_t now = core_.ports().clock.NowMs();
  for (SweepTrialRecord& t : *trials) {
    SweepTrialView v;
    if (auto e = TrialExperiment(store, view.sweep, t); e.ok()) {
      v.state = e->state;
      v.reason = e->reason;
      if (t.state == SweepTrialState::kRunning) {
        auto series = store.ReadScalars(t.experiment_id, {spec->objective.tag});
        if (series.ok() && !series->empty()) {
          const Curve curve = CurveOf(series->front());
          if (!curve.empty()) t.last_step = curve.rbegin()->first;
          if (auto o = ObjectiveOf(curve, spec->objective)) {
            t.objective_step = o->first;
            t.objective = o->second;
          }
        }
        if (auto attempts = store.ListAttempts(t.experiment_id); attempts.ok())
          t.node_seconds = NodeSeconds(*e, *attempts, now);
      }
    }
    view.node_seconds += t.node_seconds;
    v.trial = std::move(t);
    view.trials.push_back(std::move(v));
  }
  view.best_trial = BestTrial(view.trials, spec->objective);
  return view;
}

Status SweepRunner::Cancel(const std::string& id, const std::string& why) {
  MutexLock lock(mu_);
  auto sweep = core_.ports().store.GetSweep(id);
  if (!sweep.ok()) return sweep.status();
  if (sweep->state != SweepState::kRunning)
    return FailedPrecondition("sweep '" + id + "' has already ended (" +
                              SweepStateName(sweep->state) + "); nothing to cancel");
  sweep->state = SweepState::kCancelled;
  sweep->reason = why;
  sweep->updated_at = core_.ports().clock.NowMs();
  Changes c;
  c.sweep = *sweep;
  if (Status s = core_.Apply({&c, 1}); !s.ok()) return s;
  // Its running trials are cancelled by the step; a crash before it leaves
  // them to the next one.
  Advance(*sweep);
  return Status::Ok();
}

StatusOr<SweepDeleteResult> SweepRunner::Delete(const std::string& id, bool files) {
  // Under mu_: no step of this sweep starts a trial while it goes.
  MutexLock lock(mu_);
  Store& store = core_.ports().store;
  auto sweep = store.GetSweep(id);
  if (!sweep.ok()) return sweep.status();
  if (sweep->state == SweepState::kRunning)
    return FailedPrecondition("sweep '" + id + "' is running (" + sweep->reason +
                              "); only an ended sweep can be deleted: cancel it first (tfctl "
                              "sweep cancel " +
                              id + ") or wait for it to complete");
  auto trials = store.ListSweepTrials(id);
  if (!trials.ok()) return trials.status();
  for (const SweepTrialRecord& t : *trials)
    if (t.state == SweepTrialState::kRunning)
      return Unavailable("sweep '" + id + "' has ended but its trial " + t.experiment_id +
                         " is still ending (its Slurm job has not left yet); retry in a few "
                         "seconds");
  SweepDeleteResult result{id, {}};
  for (const SweepTrialRecord& t : *trials) {
    if (t.state == SweepTrialState::kNotStarted) continue;
    auto deleted = delete_(t.experiment_id, files);
    if (deleted.ok()) {
      result.experiments.push_back(std::move(deleted).value());
    } else if (deleted.status().code() != StatusCode::kNotFound) {
      // The trials deleted so far stay deleted; a retry goes on from here.
      return Status(deleted.status().code(),
                    "deleting sweep '" + id + "': its trial " + t.experiment_id + ": " +
                        deleted.status().message(),
                    deleted.status().fields());
    }
  }
  Changes c;
  c.delete_sweep = id;
  if (Status s = core_.Apply({&c, 1}); !s.ok()) return s;
  spdlog::info("sweep {} deleted by its owner, with {} trial experiments{}", id,
               result.experiments.size(), files ? " and their files" : "");
  return result;
}

void SweepRunner::Tick() {
  MutexLock lock(mu_);
  const int64_t now = core_.ports().clock.NowMs();
  if (now - last_tick_ms_ < core_.config().poll_interval_ms) return;
  last_tick_ms_ = now;
  auto open = core_.ports().store.ListSweeps({"", /*open_only=*/true});
  if (!open.ok()) {
    spdlog::warn("reading the open sweeps: {}", open.status().message());
    return;
  }
  ForgetEndedSweeps(*open);
  for (SweepRecord& sweep : *open) Advance(std::move(sweep));
}

void SweepRunner::Advance(SweepRecord sweep) {
  Store& store = core_.ports().store;
  auto spec = SpecOf(sweep);
  if (!spec.ok()) {
    spdlog::error("sweep {}: its stored spec does not parse: {}", sweep.id,
                  spec.status().message());
    return;
  }
  auto listed = store.ListSweepTrials(sweep.id);
  if (!listed.ok()) return;
  std::vector<SweepTrialRecord>& trials = *listed;
  const int64_t now = core_.ports().clock.NowMs();
  Changes c;
  std::vector<Curve> curves(trials.size());
  std::vector<bool> open(trials.size(), false);  // its experiment has not ended
  // The state of the experiments of trials that ran at this step's start.
  std::vector<std::optional<ExperimentState>> states(trials.size());
  double node_seconds = 0;
  int running = 0;
  std::optional<std::vector<JobInfo>> jobs;  // Slurm's, when a step needs them

  // What became of the trials: every curve (a rung compares with them all),
  // and the end of those whose job has left Slurm.
  for (size_t i = 0; i < trials.size(); ++i) {
    SweepTrialRecord& t = trials[i];
    if (t.state == SweepTrialState::kNotStarted) continue;
    curves[i] = CurveOfTrial(sweep, t, spec->objective.tag);
    // Where it got to, before a stopped trial's curve is cut at its rung.
    const std::optional<int64_t> last_step =
        curves[i].empty() ? std::nullopt : std::optional<int64_t>(curves[i].rbegin()->first);
    if (t.end_reason == EndReason::kStoppedEarly)
      curves[i] = UpToRung(curves[i], spec->early_stopping, t.rungs_passed);
    if (t.state == SweepTrialState::kEnded) {
      node_seconds += t.node_seconds;
      continue;
    }
    auto e = TrialExperiment(store, sweep, t);
    if (!e.ok() && e.status().code() != StatusCode::kNotFound) return;  // the store: next time
    std::vector<AttemptRecord> attempts;
    if (e.ok()) {
      auto a = store.ListAttempts(t.experiment_id);
      if (!a.ok()) return;
      attempts = std::move(a).value();
      states[i] = e->state;
    }
    if (e.ok() && !JobGone(*e, attempts, jobs, c)) {
      open[i] = !IsTerminal(e->state);
      node_seconds += NodeSeconds(*e, attempts, now);
      ++running;
      continue;
    }
    t.state = SweepTrialState::kEnded;
    t.ended_at = now;
    if (!e.ok()) {
      t.note = "its experiment " + t.experiment_id + " is gone (deleted)";
    } else {
      t.end_reason = attempts.empty() ? std::nullopt : attempts.back().end_reason;
      t.node_seconds = NodeSeconds(*e, attempts, now);
      t.last_step = last_step;
      if (auto o = ObjectiveOf(curves[i], spec->objective)) {
        t.objective_step = o->first;
        t.objective = o->second;
      }
    }
    node_seconds += t.node_seconds;
    c.sweep_trials.push_back(t);
  }

  const std::optional<ObjectiveMissing> missing =
      FindObjectiveMissing(store, trials, curves, states, spec->objective.tag);
  if (sweep.state == SweepState::kRunning && missing && missing->ran_to_its_end) {
    // Every trial would do the same: none could be judged or ranked.
    sweep.state = SweepState::kCancelled;
    sweep.reason = "stopped: " + missing->Why(spec->objective.tag) +
                   ", and succeeded without it: no trial can be judged or ranked by it; fix "
                   "objective.tag and submit the sweep again";
    sweep.updated_at = now;
    c.sweep = sweep;
    spdlog::warn("sweep {}: {}", sweep.id, sweep.reason);
  }

  // Early stopping, rung by rung and at each rung trial by trial in index
  // order: a trial stopped at a rung is out of the later rungs before any
  // trial is judged there, as if every report had been judged as it came
  // (points arrive between steps, and a step may see a trial past several
  // rungs).
  std::vector<bool> changed(trials.size(), false);
  const int rungs = static_cast<int>(spec->early_stopping.rungs.size());
  for (int k = 0; k < rungs && sweep.state == SweepState::kRunning; ++k) {
    for (size_t i = 0; i < trials.size(); ++i) {
      SweepTrialRecord& t = trials[i];
      if (!open[i] || t.rungs_passed != k) continue;
      StopDecision d = DecideAtRung(spec->early_stopping, spec->objective, curves, i, k);
      if (d.verdict == StopDecision::Verdict::kWait) continue;
      changed[i] = true;
      if (d.verdict == StopDecision::Verdict::kContinue) {
        t.rungs_passed = k + 1;
        continue;
      }
      t.note = "stopped early: " + d.why;
      t.end_reason = EndReason::kStoppedEarly;  // its attempt's too, once it has ended
      curves[i] = UpToRung(curves[i], spec->early_stopping, k);
      open[i] = false;
      Status s =
          cancel_(t.experiment_id, sweep.owner, "stopped early by sweep " + sweep.id + ": " + d.why,
                  EndReason::kStoppedEarly);
      if (!s.ok())
        spdlog::warn("sweep {}: stopping {}: {}", sweep.id, t.experiment_id, s.message());
    }
  }
  for (size_t i = 0; i < trials.size(); ++i)
    if (changed[i]) c.sweep_trials.push_back(trials[i]);

  const bool capped = spec->max_node_hours && node_seconds >= *spec->max_node_hours * 3600.0;
  if (sweep.state == SweepState::kRunning && capped) {
    sweep.state = SweepState::kCompleted;
    sweep.reason = "its node-hours cap (" + SignificantDigits(*spec->max_node_hours, 6) +
                   ") is reached: " + SignificantDigits(node_seconds / 3600.0, 6) +
                   " node-hours used; no more trials start";
    sweep.updated_at = now;
    c.sweep = sweep;
  }
  // An ended sweep's trials end with it (cancelled, or the cap reached).
  if (sweep.state != SweepState::kRunning) {
    for (size_t i = 0; i < trials.size(); ++i) {
      if (!open[i]) continue;
      Status s =
          cancel_(trials[i].experiment_id, sweep.owner,
                  "sweep " + sweep.id + " " + SweepStateName(sweep.state) + ": " + sweep.reason,
                  EndReason::kCancelled);
      if (!s.ok() && s.code() != StatusCode::kFailedPrecondition)
        spdlog::warn("sweep {}: cancelling {}: {}", sweep.id, trials[i].experiment_id, s.message());
    }
  }
  core_.Commit(c);

  // The next trials, while fewer than max_concurrent run.
  int next = static_cast<int>(trials.size()) + 1;
  if (sweep.state == SweepState::kRunning && running < spec->max_concurrent &&
      next <= sweep.trials) {
    std::vector<json> points = SweepPoints(*spec);
    while (running < spec->max_concurrent && next <= sweep.trials) {
      SweepTrialRecord t;
      t.sweep_id = sweep.id;
      t.index = next;
      t.experiment_id = TrialId(sweep.id, next);
      t.params_json = points[next - 1].dump();
      t.started_at = core_.ports().clock.NowMs();
      auto started = submission_.Submit(TrialSpecInput(*spec, next, points[next - 1]), sweep.owner,
                                        /*dry_run=*/false, t);
      if (started.ok()) {
        ++running;
        trials.push_back(t);
      } else if (started.status().retryable() && !Recorded(store, sweep.id, next)) {
        // Refused before its intent (Slurm or the disk down): nothing is
        // stored, and the next step tries again. After its intent the row
        // says not_started already (Submission::SubmitAttempt).
        spdlog::warn("sweep {}: trial {} not started yet: {}", sweep.id, next,
                     started.status().message());
        break;
      } else {
        t.state = SweepTrialState::kNotStarted;
        t.note = "not started: " + started.status().message();
        t.ended_at = t.started_at;
        Changes refused;
        refused.sweep_trials.push_back(t);
        core_.Commit(refused);
        trials.push_back(t);
      }
      ++next;
    }
  }

  if (sweep.state == SweepState::kRunning && running == 0 &&
      static_cast<int>(trials.size()) >= sweep.trials) {
    auto view = Get(sweep.id);
    std::string best = "no trial reported " + spec->objective.tag;
    if (auto m = FindObjectiveMissing(store, trials, curves, {}, spec->objective.tag))
      best += " (" + m->Why(spec->objective.tag) + ")";
    if (view.ok() && view->best_trial)
      for (const SweepTrialView& v : view->trials)
        if (v.trial.index == *view->best_trial)
          best = "best trial " + v.trial.experiment_id + ": " + spec->objective.tag + " " +
                 SignificantDigits(v.trial.objective.value_or(0), 6) + " " + v.trial.params_json;
    int stopped = 0, succeeded = 0;
    for (const SweepTrialRecord& t : trials) {
      stopped += t.end_reason == EndReason::kStoppedEarly;
      succeeded += t.end_reason == EndReason::kSucceeded;
    }
    sweep.state = SweepState::kCompleted;
    sweep.reason = std::to_string(trials.size()) + " trials ended (" + std::to_string(succeeded) +
                   " succeeded, " + std::to_string(stopped) + " stopped early); " + best;
    sweep.updated_at = now;
    Changes done;
    done.sweep = sweep;
    core_.Commit(done);
  } else if (sweep.state == SweepState::kRunning) {
    std::string reason = std::to_string(running) + " of " + std::to_string(sweep.trials) +
                         " trials running, " + std::to_string(trials.size()) + " started";
    if (missing)
      reason = "warning: " + missing->Why(spec->objective.tag) +
               ": it cannot be judged or ranked; " + reason;
    if (reason != sweep.reason) {
      sweep.reason = reason;
      sweep.updated_at = now;
      Changes progress;
      progress.sweep = sweep;
      core_.Commit(progress);
    }
  }
}

}  // namespace tfslurm
