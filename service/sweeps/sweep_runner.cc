#include "service/sweeps/sweep_runner.h"

#include <spdlog/spdlog.h>

#include <memory>
#include <set>

#include "base/number_text.h"
#include "service/sweeps/early_stopping.h"
#include "service/sweeps/sweep_space.h"
#include "service/sweeps/sweep_trials.h"

namespace tfslurm::sweeps {
namespace {

using nlohmann::json;

// Whether trial `index` of `sweep_id` has its row.
bool Recorded(Store& store, const std::string& sweep_id, int index) {
  auto trials = store.ListSweepTrials(sweep_id);
  if (!trials.ok()) return false;
  for (const SweepTrialRecord& t : *trials)
    if (t.index == index) return true;
  return false;
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

}  // namespace

Curve SweepRunner::CurveOfTrial(const SweepRecord& sweep, const SweepTrialRecord& t,
                                const std::string& tag) {
  // An ended trial's curve no longer changes: read once, not at every step
  // of its sweep for as long as the sweep runs.
  const std::pair<std::string, int> key{sweep.id, t.index};
  if (t.state == SweepTrialState::kEnded)
    if (auto it = ended_curves_.find(key); it != ended_curves_.end()) return it->second;
  Curve curve;
  auto series = store_.ReadScalars(t.experiment_id, {tag});
  if (series.ok() && !series->empty()) curve = CurveOf(series->front());
  if (t.state == SweepTrialState::kEnded && series.ok()) ended_curves_[key] = curve;
  return curve;
}

void SweepRunner::ForgetEndedSweeps(const std::vector<SweepRecord>& open) {
  std::set<std::string> ids;
  for (const SweepRecord& s : open) ids.insert(s.id);
  std::erase_if(ended_curves_, [&](const auto& entry) { return !ids.contains(entry.first.first); });
}

void SweepRunner::Write(const Changes& c) {
  if (c.empty()) return;
  if (Status s = store_.Apply(c); !s.ok())
    spdlog::error("could not persist a sweep's changes: {}", s.message());
}

std::unique_ptr<Sweeps> NewSweeps(Experiments& experiments, Store& store, Clock& clock,
                                  Randomness& random, SweepsConfig config) {
  return std::make_unique<SweepRunner>(experiments, store, clock, random, config);
}

StatusOr<SweepView> SweepRunner::Submit(const json& input, const std::string& owner) {
  auto parsed = ParseSweepSpec(input, config_.limits);
  if (!parsed.ok()) return parsed.status();
  SweepSpec spec = std::move(parsed).value();
  if (spec.id.empty()) {
    spec.id = random_.NewExperimentId().substr(0, kMaxSweepIdLength);
    while (!spec.id.empty() && !IsValidSweepId(spec.id)) spec.id.pop_back();
  }
  if (store_.GetSweep(spec.id).ok())
    return Status(StatusCode::kAlreadyExists, "sweep '" + spec.id + "' exists; choose another id",
                  {{"id", "'" + spec.id + "' is taken"}});
  // One owner's sweeps cannot take the poll thread from everyone else's.
  if (auto open = store_.ListSweeps({owner, /*open_only=*/true}); !open.ok()) {
    return open.status();
  } else if (static_cast<int>(open->size()) >= config_.max_open_per_owner) {
    return Status(StatusCode::kResourceExhausted,
                  owner + " has " + std::to_string(open->size()) + " sweeps running, at most " +
                      std::to_string(config_.max_open_per_owner) +
                      " at once; cancel one (tfctl sweep cancel ID) or wait for one to end");
  }
  auto trials = ExpandTrials(spec, config_.limits);
  if (!trials.ok()) return trials.status();
  // Each trial as the submission of an experiment would check it (its
  // owner's account, workdir, partition, memory, the id being free), so that
  // a sweep refused here leaves nothing behind, and one taken here does not
  // fail trial by trial later.
  for (const TrialPlan& t : *trials) {
    auto dry = experiments_.Submit(t.spec, owner, /*dry_run=*/true);
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
  const int64_t now = clock_.NowMs();
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
  if (Status s = store_.Apply(c); !s.ok()) {
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
  Store& store = store_;
  auto sweep = store.GetSweep(id);
  if (!sweep.ok()) return sweep.status();
  auto spec = SpecOf(*sweep);
  if (!spec.ok()) return Internal("sweep '" + id + "' has a stored spec that does not parse");
  auto trials = store.ListSweepTrials(id);
  if (!trials.ok()) return trials.status();
  SweepView view;
  view.sweep = std::move(sweep).value();
  const int64_t now = clock_.NowMs();
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
  auto sweep = store_.GetSweep(id);
  if (!sweep.ok()) return sweep.status();
  if (sweep->state != SweepState::kRunning)
    return FailedPrecondition("sweep '" + id + "' has already ended (" +
                              SweepStateName(sweep->state) + "); nothing to cancel");
  sweep->state = SweepState::kCancelled;
  sweep->reason = why;
  sweep->updated_at = clock_.NowMs();
  Changes c;
  c.sweep = *sweep;
  if (Status s = store_.Apply(c); !s.ok()) return s;
  // Its running trials are cancelled by the step; a crash before it leaves
  // them to the next one.
  Advance(*sweep);
  return Status::Ok();
}

StatusOr<SweepDeleteResult> SweepRunner::Delete(const std::string& id, bool files) {
  // Under mu_: no step of this sweep starts a trial while it goes.
  MutexLock lock(mu_);
  auto sweep = store_.GetSweep(id);
  if (!sweep.ok()) return sweep.status();
  if (sweep->state == SweepState::kRunning)
    return FailedPrecondition("sweep '" + id + "' is running (" + sweep->reason +
                              "); only an ended sweep can be deleted: cancel it first (tfctl "
                              "sweep cancel " +
                              id + ") or wait for it to complete");
  auto trials = store_.ListSweepTrials(id);
  if (!trials.ok()) return trials.status();
  for (const SweepTrialRecord& t : *trials)
    if (t.state == SweepTrialState::kRunning)
      return Unavailable("sweep '" + id + "' has ended but its trial " + t.experiment_id +
                         " is still ending (its Slurm job has not left yet); retry in a few "
                         "seconds");
  SweepDeleteResult result{id, {}};
  for (const SweepTrialRecord& t : *trials) {
    // Deleted already, or someone else's since: not the trial's to delete.
    auto e = TrialExperiment(store_, *sweep, t);
    if (!e.ok() && e.status().code() == StatusCode::kNotFound) continue;
    auto deleted =
        e.ok() ? experiments_.Delete(t.experiment_id, files) : StatusOr<DeleteResult>(e.status());
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
  if (Status s = store_.Apply(c); !s.ok()) return s;
  spdlog::info("sweep {} deleted by its owner, with {} trial experiments{}", id,
               result.experiments.size(), files ? " and their files" : "");
  return result;
}

void SweepRunner::Tick() {
  MutexLock lock(mu_);
  const int64_t now = clock_.NowMs();
  if (now - last_tick_ms_ < config_.poll_interval_ms) return;
  last_tick_ms_ = now;
  auto open = store_.ListSweeps({"", /*open_only=*/true});
  if (!open.ok()) {
    spdlog::warn("reading the open sweeps: {}", open.status().message());
    return;
  }
  ForgetEndedSweeps(*open);
  for (SweepRecord& sweep : *open) Advance(std::move(sweep));
}

// What one step of a sweep works on, phase after phase.
struct SweepRunner::Step {
  SweepRecord sweep;
  SweepSpec spec;
  std::vector<SweepTrialRecord> trials;
  int64_t now = 0;
  Changes changes;
  std::vector<Curve> curves;  // each trial's objective so far
  std::vector<bool> open;     // its experiment has not ended
  // The state of the experiments of trials that ran at this step's start.
  std::vector<std::optional<ExperimentState>> states;
  // A trial that reports scalars but not the objective's tag.
  std::optional<ObjectiveMissing> missing;
  double node_seconds = 0;
  int running = 0;
};

bool SweepRunner::RecordEndedTrials(Step& step) {
  Store& store = store_;
  // What became of the trials: every curve (a rung compares with them all),
  // and the end of those whose job has left Slurm.
  for (size_t i = 0; i < step.trials.size(); ++i) {
    SweepTrialRecord& t = step.trials[i];
    if (t.state == SweepTrialState::kNotStarted) continue;
    step.curves[i] = CurveOfTrial(step.sweep, t, step.spec.objective.tag);
    // Where it got to, before a stopped trial's curve is cut at its rung.
    const std::optional<int64_t> last_step =
        step.curves[i].empty() ? std::nullopt
                               : std::optional<int64_t>(step.curves[i].rbegin()->first);
    if (t.end_reason == EndReason::kStoppedEarly)
      step.curves[i] = UpToRung(step.curves[i], step.spec.early_stopping, t.rungs_passed);
    if (t.state == SweepTrialState::kEnded) {
      step.node_seconds += t.node_seconds;
      continue;
    }
    // NotFound: it was deleted (or the id is someone else's since).
    auto e = TrialExperiment(store, step.sweep, t);
    if (!e.ok() && e.status().code() != StatusCode::kNotFound)
      return false;  // the store: next time
    // Core says whether the trial's experiment is over, its job gone.
    // Anything unanswered: the next step.
    StatusOr<bool> over = e.ok() ? experiments_.IsOver(t.experiment_id) : StatusOr<bool>(true);
    if (!over.ok() && over.status().code() != StatusCode::kNotFound) return false;
    std::vector<AttemptRecord> attempts;
    if (e.ok()) {
      auto a = store.ListAttempts(t.experiment_id);
      if (!a.ok()) return false;
      attempts = std::move(a).value();
      step.states[i] = e->state;
    }
    if (e.ok() && over.ok() && !*over) {
      step.open[i] = !IsTerminal(e->state);
      step.node_seconds += NodeSeconds(*e, attempts, step.now);
      ++step.running;
      continue;
    }
    t.state = SweepTrialState::kEnded;
    t.ended_at = step.now;
    if (!e.ok()) {
      t.note = "its experiment " + t.experiment_id + " is gone (deleted)";
    } else {
      t.end_reason = attempts.empty() ? std::nullopt : attempts.back().end_reason;
      t.node_seconds = NodeSeconds(*e, attempts, step.now);
      t.last_step = last_step;
      if (auto o = ObjectiveOf(step.curves[i], step.spec.objective)) {
        t.objective_step = o->first;
        t.objective = o->second;
      }
    }
    step.node_seconds += t.node_seconds;
    step.changes.sweep_trials.push_back(t);
  }
  return true;
}

void SweepRunner::CheckObjectiveReported(Step& step) {
  step.missing =
      FindObjectiveMissing(store_, step.trials, step.curves, step.states, step.spec.objective.tag);
  SweepRecord& sweep = step.sweep;
  if (sweep.state != SweepState::kRunning || !step.missing || !step.missing->ran_to_its_end) return;
  // Every trial would do the same: none could be judged or ranked.
  sweep.state = SweepState::kCancelled;
  sweep.reason = "stopped: " + step.missing->Why(step.spec.objective.tag) +
                 ", and succeeded without it: no trial can be judged or ranked by it; fix "
                 "objective.tag and submit the sweep again";
  sweep.updated_at = step.now;
  step.changes.sweep = sweep;
  spdlog::warn("sweep {}: {}", sweep.id, sweep.reason);
}

void SweepRunner::JudgeAtRungs(Step& step) {
  // Early stopping, rung by rung and at each rung trial by trial in index
  // order: a trial stopped at a rung is out of the later rungs before any
  // trial is judged there, as if every report had been judged as it came
  // (points arrive between steps, and a step may see a trial past several
  // rungs).
  std::vector<bool> changed(step.trials.size(), false);
  const int rungs = static_cast<int>(step.spec.early_stopping.rungs.size());
  for (int k = 0; k < rungs && step.sweep.state == SweepState::kRunning; ++k) {
    for (size_t i = 0; i < step.trials.size(); ++i) {
      SweepTrialRecord& t = step.trials[i];
      if (!step.open[i] || t.rungs_passed != k) continue;
      StopDecision d =
          DecideAtRung(step.spec.early_stopping, step.spec.objective, step.curves, i, k);
      if (d.verdict == StopDecision::Verdict::kWait) continue;
      changed[i] = true;
      if (d.verdict == StopDecision::Verdict::kContinue) {
        t.rungs_passed = k + 1;
        continue;
      }
      t.note = "stopped early: " + d.why;
      t.end_reason = EndReason::kStoppedEarly;  // its attempt's too, once it has ended
      step.curves[i] = UpToRung(step.curves[i], step.spec.early_stopping, k);
      step.open[i] = false;
      Status s = experiments_.CancelOwnedBy(
          t.experiment_id, step.sweep.owner,
          "stopped early by sweep " + step.sweep.id + ": " + d.why, EndReason::kStoppedEarly);
      if (!s.ok())
        spdlog::warn("sweep {}: stopping {}: {}", step.sweep.id, t.experiment_id, s.message());
    }
  }
  for (size_t i = 0; i < step.trials.size(); ++i)
    if (changed[i]) step.changes.sweep_trials.push_back(step.trials[i]);
}

void SweepRunner::ApplyCapAndEnd(Step& step) {
  SweepRecord& sweep = step.sweep;
  const SweepSpec& spec = step.spec;
  const bool capped = spec.max_node_hours && step.node_seconds >= *spec.max_node_hours * 3600.0;
  if (sweep.state == SweepState::kRunning && capped) {
    sweep.state = SweepState::kCompleted;
    sweep.reason = "its node-hours cap (" + SignificantDigits(*spec.max_node_hours, 6) +
                   ") is reached: " + SignificantDigits(step.node_seconds / 3600.0, 6) +
                   " node-hours used; no more trials start";
    sweep.updated_at = step.now;
    step.changes.sweep = sweep;
  }
  // An ended sweep's trials end with it (cancelled, or the cap reached).
  if (sweep.state == SweepState::kRunning) return;
  for (size_t i = 0; i < step.trials.size(); ++i) {
    if (!step.open[i]) continue;
    Status s = experiments_.CancelOwnedBy(
        step.trials[i].experiment_id, sweep.owner,
        "sweep " + sweep.id + " " + SweepStateName(sweep.state) + ": " + sweep.reason,
        EndReason::kCancelled);
    if (!s.ok() && s.code() != StatusCode::kFailedPrecondition)
      spdlog::warn("sweep {}: cancelling {}: {}", sweep.id, step.trials[i].experiment_id,
                   s.message());
  }
}

void SweepRunner::StartNextTrials(Step& step) {
  // The next trials, while fewer than max_concurrent run.
  SweepRecord& sweep = step.sweep;
  const SweepSpec& spec = step.spec;
  int next = static_cast<int>(step.trials.size()) + 1;
  if (sweep.state != SweepState::kRunning || step.running >= spec.max_concurrent ||
      next > sweep.trials)
    return;
  std::vector<json> points = SweepPoints(spec);
  while (step.running < spec.max_concurrent && next <= sweep.trials) {
    SweepTrialRecord t;
    t.sweep_id = sweep.id;
    t.index = next;
    t.experiment_id = TrialId(sweep.id, next);
    t.params_json = points[next - 1].dump();
    t.started_at = clock_.NowMs();
    Status started = StartTrial(step, t, points[next - 1]);
    if (started.ok()) {
      ++step.running;
      step.trials.push_back(t);
    } else if (started.retryable() && !Recorded(store_, sweep.id, next)) {
      // Refused before its intent (Slurm or the disk down): nothing is
      // stored, and the next step tries again. After its intent the row
      // says not_started already (StartTrial's if_refused).
      spdlog::warn("sweep {}: trial {} not started yet: {}", sweep.id, next, started.message());
      break;
    } else {
      t.state = SweepTrialState::kNotStarted;
      t.note = "not started: " + started.message();
      t.ended_at = t.started_at;
      Changes refused;
      refused.sweep_trials.push_back(t);
      Write(refused);
      step.trials.push_back(t);
    }
    ++next;
  }
}

Status SweepRunner::StartTrial(const Step& step, SweepTrialRecord& t, const json& point) {
  SubmitOptions options;
  // The trial's row goes with its experiment's first intent: the trial is
  // started exactly when its row exists.
  options.with_intent.sweep_trials.push_back(t);
  // Its id is kept for it (CheckIdNotKept), and this is the keeper.
  options.keeper = true;
  // Slurm refused it, and its experiment goes: the row says so instead.
  options.if_refused = [t, this](const Status& refusal, Changes& instead) {
    SweepTrialRecord refused = t;
    refused.state = SweepTrialState::kNotStarted;
    refused.note = "not started: " + refusal.message();
    refused.ended_at = clock_.NowMs();
    instead.sweep_trials.push_back(refused);
  };
  return experiments_.Submit(TrialSpecInput(step.spec, t.index, point), step.sweep.owner, options)
      .status();
}

void SweepRunner::CompleteOrReport(Step& step) {
  SweepRecord& sweep = step.sweep;
  if (sweep.state != SweepState::kRunning) return;
  if (step.running == 0 && static_cast<int>(step.trials.size()) >= sweep.trials) {
    auto view = Get(sweep.id);
    std::string best = "no trial reported " + step.spec.objective.tag;
    if (auto m =
            FindObjectiveMissing(store_, step.trials, step.curves, {}, step.spec.objective.tag))
      best += " (" + m->Why(step.spec.objective.tag) + ")";
    if (view.ok() && view->best_trial)
      for (const SweepTrialView& v : view->trials)
        if (v.trial.index == *view->best_trial)
          best = "best trial " + v.trial.experiment_id + ": " + step.spec.objective.tag + " " +
                 SignificantDigits(v.trial.objective.value_or(0), 6) + " " + v.trial.params_json;
    int stopped = 0, succeeded = 0;
    for (const SweepTrialRecord& t : step.trials) {
      stopped += t.end_reason == EndReason::kStoppedEarly;
      succeeded += t.end_reason == EndReason::kSucceeded;
    }
    sweep.state = SweepState::kCompleted;
    sweep.reason = std::to_string(step.trials.size()) + " trials ended (" +
                   std::to_string(succeeded) + " succeeded, " + std::to_string(stopped) +
                   " stopped early); " + best;
    sweep.updated_at = step.now;
    Changes done;
    done.sweep = sweep;
    Write(done);
    return;
  }
  std::string reason = std::to_string(step.running) + " of " + std::to_string(sweep.trials) +
                       " trials running, " + std::to_string(step.trials.size()) + " started";
  if (step.missing)
    reason = "warning: " + step.missing->Why(step.spec.objective.tag) +
             ": it cannot be judged or ranked; " + reason;
  if (reason == sweep.reason) return;
  sweep.reason = reason;
  sweep.updated_at = step.now;
  Changes progress;
  progress.sweep = sweep;
  Write(progress);
}

void SweepRunner::Advance(SweepRecord sweep) {
  auto spec = SpecOf(sweep);
  if (!spec.ok()) {
    spdlog::error("sweep {}: its stored spec does not parse: {}", sweep.id,
                  spec.status().message());
    return;
  }
  auto listed = store_.ListSweepTrials(sweep.id);
  if (!listed.ok()) return;
  Step step;
  step.sweep = std::move(sweep);
  step.spec = std::move(spec).value();
  step.trials = std::move(listed).value();
  step.now = clock_.NowMs();
  step.curves.resize(step.trials.size());
  step.open.assign(step.trials.size(), false);
  step.states.resize(step.trials.size());
  if (!RecordEndedTrials(step)) return;
  CheckObjectiveReported(step);
  JudgeAtRungs(step);
  ApplyCapAndEnd(step);
  Write(step.changes);
  StartNextTrials(step);
  CompleteOrReport(step);
}

}  // namespace tfslurm::sweeps
