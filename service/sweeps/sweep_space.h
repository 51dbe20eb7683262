// A sweep's trials: the points of its parameter space in trial order (a
// grid's in odometer order, the last parameter fastest, or that order
// shuffled from the seed; a random search's drawn from its seed), and each
// trial's experiment spec, the base with the trial's id and values applied
// and checked by ParseSpec.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "service/sweeps/sweep_spec.h"

namespace tfslurm::sweeps {

struct TrialPlan {
  int index = 0;          // 1-based
  std::string id;         // <sweep>-<index>
  nlohmann::json params;  // {parameter name: value}
  nlohmann::json spec;    // the experiment spec input
};

// The experiment id of trial `index` (1-based) of sweep `sweep_id`.
std::string TrialId(const std::string& sweep_id, int index);

// The parameter values of every trial, spec.max_trials of them, in trial
// order. The same spec gives the same points: a random search draws from a
// generator seeded with spec.seed whose output is fixed by this code (not by
// the standard library's distributions, which vary between releases).
std::vector<nlohmann::json> SweepPoints(const SweepSpec& spec);

// The base experiment with trial `index`'s id and `params` applied
// (sweep_spec.h, ParameterTarget, says what each parameter sets).
nlohmann::json TrialSpecInput(const SweepSpec& spec, int index, const nlohmann::json& params);

// Every trial, each spec checked by ParseSpec. A problem a parameter's value
// causes is named as parameters.<name> with the trial and its value; any
// other as experiment.<field>; each field once (its first trial).
StatusOr<std::vector<TrialPlan>> ExpandTrials(const SweepSpec& spec, const SpecLimits& limits = {});

// A parameter's value as text: a string as it is, a number as JSON writes it.
std::string ParameterText(const nlohmann::json& value);

}  // namespace tfslurm::sweeps
