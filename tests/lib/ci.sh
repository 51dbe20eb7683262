# Whether tests/run.sh runs under CI, and what it then refuses. Sourced.
# shellcheck shell=bash

# Under CI the stages are not the caller's to choose: a variable that
# switches one off, narrows it or points it at another build would make a
# green run mean less than "everything ran". Refused rather than ignored:
# ignoring would quietly run something other than what the caller asked
# for, and whoever set the variable learns of it at once rather than from a
# summary an hour and a half later. (.ci/run exports CI=true itself.)
stage_switches=(TFSLURM_SKIP_SANITIZERS TFSLURM_SKIP_E2E TFSLURM_FUZZ TFSLURM_FUZZ_SECONDS TFSLURM_TSAN
  TFSLURM_THREAD_SAFETY TFSLURM_SKIP_BENCH PYTEST_ARGS TFSLURM_BUILD)

# Sets in_ci to 1 when CI is set to anything but "", "false" or "0" (CI
# services set CI=true).
detect_ci() {
  in_ci=0
  if [[ -n ${CI:-} && ${CI} != false && ${CI} != 0 ]]; then in_ci=1; fi
}

# Under CI, says which stage switches are set and returns 1; else returns 0.
refuse_stage_switches() {
  local v set_switches=()
  ((in_ci)) || return 0
  for v in "${stage_switches[@]}"; do
    if [[ -n ${!v:-} ]]; then set_switches+=("$v=${!v}"); fi
  done
  ((${#set_switches[@]})) || return 0
  echo "tests/run.sh: CI=$CI, and these would change what the run covers: ${set_switches[*]}."
  echo "Under CI every stage runs in full: unset them (they are for local runs, without CI)."
  return 1
}
