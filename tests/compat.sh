#!/usr/bin/env bash
# tests/compat.sh VERSION: tfslurm against Slurm VERSION (24.11.7, 26.05.3),
# as a site that runs that release builds and uses it:
#   1. builds Slurm VERSION from its release source, once
#      (deploy/local-slurm/build-slurm.sh; cached outside the checkout);
#   2. builds tfslurmd against it (cmake -DTFSLURM_SLURM_PREFIX, in
#      build-slurm-VERSION/) and checks with ldd that it loads that release's
#      libslurm, and that the agent and tfctl of the main build (build/, with
#      Debian's libslurm-dev) load none, so one agent serves every release;
#   3. runs the Slurm adapter's unit tests against that libslurm;
#   4. starts a local cluster of that release
#      (deploy/local-slurm/start.sh --slurm-prefix, with pyxis 0.24.0 built
#      against it: tests/containers.sh) and runs the integration
#      tests that make every libslurm call tfslurmd makes (the list below),
#      tests/integration/test_slurm_releases.py (each build names its
#      libslurm's and slurmctld's releases), and
#      tests/integration/test_slurm_release_crossing.py, which crosses
#      releases: it starts a Debian 22.05 cluster beside this one, each
#      tfslurmd refuses the other's slurmctld naming both releases, and a
#      database of the main build is served by this one.
# Prints a summary line per part and exits non-zero when one failed.
# tests/run.sh runs it for the newest release; the others by hand.
#
# --build-only: steps 1 and 2 without their checks (tests/run.sh builds in
# the background while other stages run, then runs this again, whose builds
# are then no-ops).
#
# Environment: TFSLURM_COMPAT_KEEP=1 keeps the cluster's directory.
set -euo pipefail

repo="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build_only=0
if [[ ${1:-} == --build-only ]]; then
  build_only=1
  shift
fi
[[ $# -eq 1 ]] || {
  echo "usage: $0 [--build-only] VERSION (a release deploy/local-slurm/build-slurm.sh builds)" >&2
  exit 2
}
version="$1"
jobs=2
step() { printf '\n=== compat %s: %s ===\n' "$version" "$*"; }
seconds() { printf '%d s' "$((SECONDS - $1))"; }

step "install dependencies"
deploy/install-deps.sh

step "Slurm $version (deploy/local-slurm/build-slurm.sh)"
t=$SECONDS
prefix="$(deploy/local-slurm/build-slurm.sh "$version")"
slurm_time="$(seconds $t)"

# The main build (Debian's libslurm): its agent and tfctl serve this release
# too, and its tfslurmd is the other release test_slurm_release_crossing.py
# crosses.
step "main build (Debian's libslurm)"
t=$SECONDS
# Both builds with the Debian packages' flags, as tests/run.sh's main build
# (tests/lib/build_flags.sh), so that ccache serves one from the other.
# shellcheck source=lib/ccache.sh
source tests/lib/ccache.sh
# shellcheck source=lib/build_flags.sh
source tests/lib/build_flags.sh
if [[ ! -f build/build.ninja ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${ccache_launcher[@]}" \
    "${package_flags[@]}" >/dev/null
fi
ninja -C build -j"$jobs" tfslurmd tfslurm-agent tfctl tfslurm-container-launch tfslurm-agent-bundle
main_time="$(seconds $t)"

step "tfslurmd against Slurm $version"
t=$SECONDS
build="build-slurm-$version"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTFSLURM_SLURM_PREFIX="$prefix" "${ccache_launcher[@]}" "${package_flags[@]}" >/dev/null
ninja -C "$build" -j"$jobs" tfslurmd slurm_adapter_test
# The integration tests find the programs in one bin/; the job scripts find
# the agent beside tfslurmd.
ln -sfn "$repo/build/bin/tfslurm-agent" "$repo/build/bin/tfctl" "$repo/build/bin/tfslurm-container-launch" \
  "$repo/build/bin/agent-bundle" "$build/bin/"
build_time="$(seconds $t)"
if ((build_only)); then
  echo "compat $version: built (Slurm $slurm_time, main build $main_time, tfslurmd $build_time)"
  exit 0
fi

rc=0
declare -a summary
check() { # check NAME COMMAND...: one summary line for COMMAND's outcome
  local name="$1"
  shift
  if "$@"; then summary+=("$name: ok"); else
    summary+=("$name: FAILED")
    rc=1
  fi
}
links_libslurm_of() { # links_libslurm_of BINARY PREFIX: ldd resolves libslurm into PREFIX/lib
  local line
  line="$(ldd "$1" | grep 'libslurm' || true)"
  echo "  $1: ${line:-no libslurm}"
  [[ -n "$line" && "$line" == *"=> $2/lib/libslurm"* ]]
}
links_no_libslurm() {
  local line
  line="$(ldd "$1" | grep 'libslurm' || true)"
  echo "  $1: ${line:-no libslurm}"
  [[ -z "$line" ]]
}

step "ldd"
check "ldd tfslurmd -> $prefix/lib/libslurm" links_libslurm_of "$build/bin/tfslurmd" "$prefix"
check "ldd tfslurm-agent: no libslurm" links_no_libslurm build/bin/tfslurm-agent
check "ldd tfctl: no libslurm" links_no_libslurm build/bin/tfctl

step "unit tests of the Slurm adapter"
# Not --gtest_brief: it prints a skip's count without the skipped test's name.
check "slurm_adapter_test" "$build/bin/slurm_adapter_test"

step "local Slurm $version cluster"
t=$SECONDS
/usr/bin/python3 tests/integration/unix_users.py
cluster_dir="$(mktemp -d /tmp/tfs-compat-XXXX)"
chmod 755 "$cluster_dir"
cleanup() {
  deploy/local-slurm/stop.sh "$cluster_dir" >/dev/null 2>&1 || true
  if [[ "${TFSLURM_COMPAT_KEEP:-0}" != 1 ]]; then rm -rf "$cluster_dir"; fi
}
trap cleanup EXIT
# pyxis built against this release, enroot and runc (tests/containers.sh;
# cached), so the container tests below run on it.
eval "$(tests/containers.sh --slurm-prefix "$prefix")"
conf_line="$(deploy/local-slurm/start.sh --slurm-prefix "$prefix" --containers "$LOCAL_SLURM_CONTAINERS" \
  "$cluster_dir")"
cluster_time="$(seconds $t)"

# Every libslurm call tfslurmd makes, each through a test of what it is for:
# slurm_load_partitions, slurm_load_node and slurm_load_ctl_conf (a
# partition's shape and default memory), slurm_submit_batch_job and
# slurm_load_jobs (every test), hostlists (every job's nodes),
# slurm_kill_job (cancel, a failed attempt, preemption's requeue),
# slurm_kill_job_step (an agent that does not confirm its Shutdown),
# slurm_submit_batch_het_job (heterogeneous jobs), the site's options and
# Slurm's refusals of them on an accounting cluster, a node failure with
# its node excluded from the next attempt, a time limit with its warning
# signal, preemption, a job as another user (site mode), and the release
# checks of test_slurm_releases.py and test_slurm_release_crossing.py. And
# the restarts that keep the job: a killed program's next attempt inside
# the same job (and, to compare, in a new one), a real TF worker restarted
# alone while its chief trains on, and a node's failure in a --no-kill job
# whose spare node takes its place.
subset=(
  tests/integration/test_slurm_releases.py
  tests/integration/test_slurm_release_crossing.py
  "tests/integration/test_service_core.py::test_three_nodes_two_tasks_run_with_computed_memory_and_succeed"
  "tests/integration/test_service_core.py::test_auto_memory_takes_the_partitions_then_the_clusters_def_mem_per_cpu"
  "tests/integration/test_service_core.py::test_spec_too_big_for_the_partition_is_refused_with_numbers"
  "tests/integration/test_service_core.py::test_delete_while_running_cancels_the_slurm_job"
  "tests/integration/test_agent_rendezvous.py::test_linear_ps_spread_succeeds_reaps_ps_and_job_completes"
  "tests/integration/test_agent_rendezvous.py::test_an_agent_that_does_not_confirm_its_shutdown_has_its_step_ended_by_slurm"
  "tests/integration/test_hetjob.py::test_ps_and_workers_run_in_their_own_components_and_the_job_completes"
  "tests/integration/test_hetjob.py::test_failure_in_one_component_fails_the_attempt_and_reaps_the_other"
  tests/integration/test_site_options.py
  "tests/integration/test_bad_nodes.py::test_a_node_failure_excludes_that_node_from_the_next_attempt"
  "tests/integration/test_restarts.py::test_time_limit_runs_as_a_chain_of_attempts_checkpointing_on_the_signal"
  "tests/integration/test_restarts.py::test_real_preemption_comes_back_and_finishes_from_checkpoint"
  "tests/integration/test_restarts.py::test_kill9_of_a_worker_restarts_from_the_last_checkpoint"
  "tests/integration/test_tensorflow.py::test_a_killed_worker_restarts_alone_and_the_chief_trains_on"
  "tests/integration/test_site_mode.py::test_alices_job_runs_as_alice_and_everything_made_for_it_is_hers"
  tests/integration/test_spare_nodes.py
  # Real TensorFlow parameter servers in an image through pyxis built
  # against this release (issue 44), and a missing image, a startup_error
  # in pyxis's words as slurmstepd writes them in this release (from 25.05
  # on, its lines begin with the time, not its name).
  "tests/integration/test_containers.py::test_tf_parameter_servers_in_the_image_succeed_and_the_ps_are_reaped[pyxis]"
  "tests/integration/test_containers.py::test_a_missing_image_is_a_startup_error_in_pyxiss_words_after_one_attempt"
  # Slurm's own OCI support (srun --container, rootless runc), which tfslurm
  # runs on 23.02 and later only (22.05 refuses it: container.runtime): real
  # parameter servers, a worker restarted alone and the chief in place, a
  # missing bundle in runc's words, and alice's job as alice.
  "tests/integration/test_containers.py::test_tf_parameter_servers_in_the_image_succeed_and_the_ps_are_reaped[oci]"
  "tests/integration/test_containers.py::test_oci_a_missing_bundle_is_a_startup_error_in_runcs_words_after_one_attempt"
  "tests/integration/test_containers.py::test_in_oci_a_killed_worker_restarts_alone_and_a_killed_chief_restarts_in_place_from_tfs_checkpoint"
  "tests/integration/test_containers.py::test_site_mode_alices_program_in_oci_runs_as_alice_and_its_files_are_hers"
  # And an OOM kill under OCI named as outside ("the job has 300 MB on this
  # node"), on a cluster of this release of its own that constrains memory
  # (task/cgroup on cgroup v1): runc's own cgroup below the task's is where
  # the kill counts.
  "tests/integration/test_own_program.py::test_an_oom_kill_names_the_memory_and_the_field_to_raise[oci]"
)
step "integration tests against Slurm $version"
t=$SECONDS
set +e
PATH="$prefix/bin:$prefix/sbin:$PATH" TFSLURM_SLURM_CONF="${conf_line#SLURM_CONF=}" \
  LOCAL_SLURM_PREFIX="$prefix" TFSLURM_BUILD="$repo/$build" TFSLURM_OTHER_BUILD="$repo/build" \
  TFSLURM_COMPAT_RELEASE="$version" \
  /usr/bin/python3 -m pytest -v -rfEs -p no:cacheprovider "${subset[@]}" 2>&1 | tee "$build/compat.log"
pytest_rc=${PIPESTATUS[0]}
set -e
integration_time="$(seconds $t)"
if ((pytest_rc == 0)); then summary+=("integration subset: ok"); else
  summary+=("integration subset: FAILED (exit $pytest_rc)")
  rc=1
fi

step "summary"
printf '%s\n' "${summary[@]}"
tail -n 1 "$build/compat.log"
echo "times: Slurm build $slurm_time, main build $main_time, tfslurmd build $build_time," \
  "cluster start $cluster_time, integration $integration_time"
exit $rc
