# Whether tests/run.sh runs under CI, and what it then refuses. Sourced.
# shellcheck shell=bash

# Under CI the stages are not the caller's to choose: a variable that
# switches one off, narrows it, points it at another build or weakens a
# checker would make a green run mean less than "everything ran". Refused
# rather than ignored: ignoring would quietly run something other than what
# the caller asked for, and whoever set the variable learns of it at once
# rather than from a summary an hour and a half later. (.ci/run exports
# CI=true itself.)
#
# Whole families are refused by prefix, not name by name, so that a test
# runner's next option is refused before anyone finds it:
#   TFSLURM_   every switch of tests/run.sh (TFSLURM_SKIP_*, TFSLURM_FUZZ*,
#              TFSLURM_TSAN, ...) and every setting the tests read
#              (TFSLURM_BUILD, TFSLURM_SLURM_CONF: another build or
#              cluster); run.sh sets for its stages the ones they need.
#   GTEST_     googletest reads its flags from the environment
#              (GTEST_FILTER, GTEST_TOTAL_SHARDS/GTEST_SHARD_INDEX: a shard
#              of none runs zero tests and passes), at build time too
#              (gtest_discover_tests lists the tests by running them).
#   PYTEST_    PYTEST_ADDOPTS (--ignore, -k, --deselect), PYTEST_PLUGINS.
#   CTEST_     ctest's defaults (CTEST_NO_TESTS_ACTION, ...).
#   ASAN_ UBSAN_ TSAN_ LSAN_ MSAN_   the sanitizers' runtime options
#              (detect_leaks=0, halt_on_error=0, suppressions=...).
#   NODE_TEST_ node's test runner's own (NODE_TEST_CONTEXT).
# and by name: NODE_OPTIONS (--test-shard, --test-name-pattern, --require),
# PYTEST_ARGS (run.sh's own), PYTHONPATH (a sitecustomize or
# conftest that rewrites outcomes), LD_PRELOAD (anything, into every
# process), CFLAGS/CXXFLAGS/CPPFLAGS/LDFLAGS (cmake takes them on a first
# configure: -fsanitize-recover, -DNDEBUG).
ci_refused_prefixes=(TFSLURM_ GTEST_ PYTEST_ CTEST_ ASAN_ UBSAN_ TSAN_ LSAN_ MSAN_ NODE_TEST_)
ci_refused_names=(NODE_OPTIONS PYTEST_ARGS PYTHONPATH LD_PRELOAD LD_AUDIT CFLAGS CXXFLAGS CPPFLAGS LDFLAGS)
# The local-run switches tests/run.sh's header documents, for its messages.
stage_switches=(TFSLURM_SKIP_SANITIZERS TFSLURM_SKIP_E2E TFSLURM_FUZZ TFSLURM_FUZZ_SECONDS TFSLURM_TSAN
  TFSLURM_SKIP_BENCH PYTEST_ARGS TFSLURM_BUILD)

# Sets in_ci to 1 when CI is set to anything but "", "false" or "0" (CI
# services set CI=true).
detect_ci() {
  in_ci=0
  if [[ -n ${CI:-} && ${CI} != false && ${CI} != 0 ]]; then in_ci=1; fi
}

# ci_refused_variables: prints NAME=VALUE for each variable of the
# environment that a CI run refuses, one per line.
ci_refused_variables() {
  local name prefix refused
  while IFS= read -r name; do
    refused=0
    for prefix in "${ci_refused_prefixes[@]}"; do [[ $name == "$prefix"* ]] && refused=1; done
    for prefix in "${ci_refused_names[@]}"; do [[ $name == "$prefix" ]] && refused=1; done
    if ((refused)); then printf '%s=%s\n' "$name" "${!name}"; fi
  done < <(compgen -e | sort)
}

# Under CI, names every refused variable that is set and returns 1; else
# returns 0.
refuse_stage_switches() {
  local set_switches
  ((in_ci)) || return 0
  set_switches=$(ci_refused_variables)
  [[ -n $set_switches ]] || return 0
  echo "tests/run.sh: CI=$CI, and these would change what the run covers or what its checkers report:"
  sed 's/^/  /' <<<"$set_switches"
  echo "Under CI every stage runs in full, as tests/run.sh sets it up: unset them (refused: the prefixes" \
    "${ci_refused_prefixes[*]} and ${ci_refused_names[*]}; tests/lib/ci.sh says why)."
  return 1
}
