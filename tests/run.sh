#!/usr/bin/env bash
# tests/run.sh: installs what is needed, builds, checks the formatting of
# every tracked C/C++ file (clang-format), and runs every test:
#   1. integration tests (pytest) against a real local Slurm cluster whose
#      hosts are apart, real TensorFlow and JAX among them
#      (deploy/install-tf.sh, install-jax.sh, install-pytools.sh), and real
#      pyxis and enroot running images built locally (deploy/containers/;
#      the images in the background, for the session's last tests)
#   2. end-to-end dashboard tests in headless Chromium (beside step 3)
#   3. the Debian packages: built from the main build's objects (through
#      ccache), lintian, piuparts, and a Debian 12 system container on a
#      local cluster of its own (tests/packages.sh)
#   4. the integration tests that make every libslurm call, against the
#      newest Slurm release built from source (tests/compat.sh)
#   5. the Python package: wheel, unit tests, mypy, installs (tests/python.sh)
#   6. every benchmark script at its smallest size (bench/run.sh --smoke)
#   7. the unit tests (gtest, via ctest), built with clang under ASan + UBSan
#   8. clang's thread-safety analysis of every source (-Werror=thread-safety;
#      the same compile as step 7)
#   9. each libFuzzer target for a bounded time (the same compile again;
#      beside step 6)
#  10. unit, agent and concurrency tests built with TSan
# Works on a fresh Debian machine; CI runs it through .ci/run.
#
# Two cores, three compiles (docs/contributing.md, "What CI costs"): the
# main build (gcc, RelWithDebInfo: the programs and benchmark programs the
# integration tests and benchmarks run, no tests), the sanitizer build
# (clang, ASan + UBSan + libFuzzer's coverage: every test, every fuzzer and
# the programs, with -Werror=thread-safety), and the TSan build. The last
# two, the container images, Slurm 26.05.3 with tfslurmd against it, and
# the Debian packages' checks that need no cluster (tests/packages.sh
# --prepare), are built in the background under SCHED_IDLE while steps 1-6
# wait on Slurm
# (tests/lib/background.sh).
#
# The summary gives each stage's passed, failed and skipped tests, as the
# runner's own closing lines count them (tests/lib/counts.sh), or NOT RUN.
# The run fails when a test fails, when a test skipped that
# tests/skip_allowlist.txt does not allow to skip on this machine
# (tests/lib/skips.sh), and under CI when a stage did not run. The machine
# conditions some tests need (IPv6 on loopback, cgroup v1's devices and
# memory controllers, root) are checked and reported first (tests/lib/machine.sh).
#
# Environment, for local iterations only (under CI, refused; see below):
#   TFSLURM_SKIP_SANITIZERS=1   no sanitizer build: the unit tests run from
#                               the main build instead; no steps 8, 9, 10
#   TFSLURM_SKIP_E2E=1          skip step 2
#   TFSLURM_FUZZ=0              skip step 9
#   TFSLURM_FUZZ_SECONDS=N      per fuzz target (default 30)
#   TFSLURM_TSAN=0              skip step 10
#   TFSLURM_SKIP_BENCH=1        skip step 6
#   PYTEST_ARGS="-k resume"     passed to pytest (the tests left out count
#                               as skipped, so the run fails: it did not run
#                               everything)
#   TFSLURM_BUILD=DIR           the build the integration tests run
set -euo pipefail

repo="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
jobs=2
# shellcheck source=lib/counts.sh
source tests/lib/counts.sh
# shellcheck source=lib/skips.sh
source tests/lib/skips.sh
# shellcheck source=lib/machine.sh
source tests/lib/machine.sh
# shellcheck source=lib/summary.sh
source tests/lib/summary.sh
# shellcheck source=lib/ci.sh
source tests/lib/ci.sh
# shellcheck source=lib/background.sh
source tests/lib/background.sh

# Under CI, a variable above that would switch a stage off is refused
# before anything runs (tests/lib/ci.sh says why).
detect_ci
refuse_stage_switches >&2 || exit 2
read_floors tests/floors.txt >&2 || exit 2

# Each step's wall time, for the summary (what each part of a CI run costs).
step_names=() step_seconds=() step_started=$SECONDS
step() {
  if ((${#step_names[@]})); then step_seconds+=("$((SECONDS - step_started))"); fi
  step_names+=("$*")
  step_started=$SECONDS
  printf '\n=== %s === (%d:%02d into the run)\n' "$*" $((SECONDS / 60)) $((SECONDS % 60))
}

# Every stage, in the order of the summary; each ends up counted (record)
# or NOT RUN with the reason (not_run).
compat_release=26.05.3
stages=(format integration e2e packages "compat-$compat_release" python bench unit thread-safety fuzz tsan)
declare -A passed failed skipped not_run_why
mkdir -p build
skips_file=build/skips.tsv # STAGE<TAB>TEST<TAB>REASON, one line per skipped test
: >"$skips_file"
sanitizers=1
[[ "${TFSLURM_SKIP_SANITIZERS:-0}" == 1 ]] && sanitizers=0
run_fuzz=$sanitizers run_tsan=$sanitizers
[[ "${TFSLURM_FUZZ:-1}" == 0 ]] && run_fuzz=0
[[ "${TFSLURM_TSAN:-1}" == 0 ]] && run_tsan=0

step "machine conditions"
check_machine_conditions
((in_ci)) && echo "CI=$CI: every stage must run (a NOT RUN stage fails the run)"

step "install dependencies"
# Debian's packages first (the build needs them). Everything else is made
# beside the main build, which needs none of it, in one session of its own
# (setsid: an early exit ends all of it), one after the other: apt runs once
# at a time (the e2e's Chromium, the container tools). On a new machine
# that is mostly downloads and writes, which the compile on both cores
# leaves room for: the venvs about 2 minutes (docs/contributing.md, "What CI
# costs"); about a second each when cached. The TF venv downloads
# TensorFlow's wheels once (deploy/python/wheels.sh), for the TF image too.
# Its output waits in build/installs.log and build/containers.log for the
# stage that waits for it, below.
deploy/install-deps.sh
installs_log=build/installs.log containers_log=build/containers.log
rm -f build/venvs.env build/containers.rc build/containers.dir build/images.dir
skip_e2e=${TFSLURM_SKIP_E2E:-0}
setsid bash -c '
  set -uo pipefail
  skip_e2e=$1
  # The real TensorFlow of the TF integration tests (tests/integration/
  # test_tensorflow.py), a pinned tensorflow-cpu; the real JAX of
  # test_jax.py; the tools venv (pandas and PyYAML for the README'"'"'s Python
  # walkthrough, mypy and pytest for the Python stage). Each in a venv
  # outside the checkout, cached across runs and clones. Made here: the
  # integration session runs on the cluster'"'"'s service host, whose network
  # reaches no package index.
  if tf=$(deploy/install-tf.sh) && jax=$(deploy/install-jax.sh) && tools=$(deploy/install-pytools.sh); then
    printf "export TFSLURM_TF_PYTHON=%q TFSLURM_JAX_PYTHON=%q TFSLURM_PYTOOLS_PYTHON=%q\n" \
      "$tf" "$jax" "$tools" >build/venvs.env
  fi
  if [[ $skip_e2e != 1 && -x tests/e2e/install.sh ]]; then tests/e2e/install.sh || echo "installs: tests/e2e/install.sh failed"; fi
  # The container runtimes (enroot, pyxis built against Debian'"'"'s Slurm,
  # runc'"'"'s oci.conf), cached by their inputs under /opt/tfslurm
  # (docs/containers.md gives the costs); the cluster starts with them. The
  # images come later, in the background chain (bg_images, below).
  deploy/containers/setup.sh >build/containers.dir 2>"$2"
  echo $? >build/containers.rc
' installs "$skip_e2e" "$containers_log" >"$installs_log" 2>&1 &
installs_pid=$!
stop_installs() { kill -- -"$installs_pid" 2>/dev/null || true; }
trap stop_installs EXIT

step "main build (gcc: the programs and the benchmark programs)"
# What the integration tests, the end-to-end tests and the benchmarks run.
# The tests are built in the sanitizer build instead (TFSLURM_BUILD_TESTS),
# unless the sanitizers are switched off. Through ccache (tests/lib/ccache.sh):
# the compat stage builds tfslurmd again against another Slurm's libslurm,
# and every file but the Slurm adapter's is compiled as here.
# With the Debian packages' compiler flags (tests/lib/build_flags.sh), so
# that the packages stage builds them from this build's objects, through
# ccache, and the tests run the objects the packages ship.
# shellcheck source=lib/ccache.sh
source tests/lib/ccache.sh
# shellcheck source=lib/build_flags.sh
source tests/lib/build_flags.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTFSLURM_BUILD_BENCH=ON \
  -DTFSLURM_BUILD_TESTS=$((sanitizers ? 0 : 1)) "${ccache_launcher[@]}" "${package_flags[@]}" >/dev/null
ninja -C build -j"$jobs"

# Every tracked C and C++ file must be as .clang-format says (docs/style.md).
# Generated code (protoc's, the embedded migrations and web assets) lives in
# build directories and is not tracked; third_party/ and *.pb.* are left out
# should they ever be. A file deleted in the work tree but still in the index
# is skipped.
step "format (clang-format --dry-run --Werror)"
format_checked=0 format_bad=()
if ! command -v clang-format >/dev/null; then
  echo "format: clang-format is not installed (deploy/install-deps.sh installs it)"
elif ! format_list=$(git ls-files -- '*.cc' '*.h' '*.c' ':!:third_party/**' ':!:*.pb.cc' ':!:*.pb.h'); then
  echo "format: git ls-files failed (not a git checkout?): cannot list the tracked files"
else
  while IFS= read -r f; do
    [[ -n $f && -f $f ]] || continue
    format_checked=$((format_checked + 1))
    clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || format_bad+=("$f")
  done <<<"$format_list"
  if ((${#format_bad[@]})); then
    echo "not formatted as .clang-format says (clang-format -i FILE fixes one; clang-format --dry-run FILE shows where):"
    printf '  %s\n' "${format_bad[@]}"
  else
    echo "format: all $format_checked files formatted"
  fi
fi
if ((format_checked)); then
  record format "$((format_checked - ${#format_bad[@]}))" "${#format_bad[@]}"
else
  record format 0 1 # nothing could be checked
fi

# What was made beside the main build (above): the venvs and the e2e's
# browser, which the stages below need, and the container runtimes, which
# the session's cluster runs. Before the background chain starts: its
# packages' checks may run apt too. Kept out of the environment of the other
# stages, the containers (their clusters run without pyxis): the session's
# cluster gets them by --containers, pytest by name (so the clusters its
# tests start run pyxis too, which does nothing for a step without
# --container-image); bench/containers.sh finds them cached itself. A
# failure of the containers fails the container tests, not the run's other
# stages.
step "venvs, browser and container runtimes (made beside the main build)"
wait "$installs_pid" || true
cat "$installs_log"
if [[ -s build/venvs.env ]]; then
  # shellcheck source=/dev/null
  source build/venvs.env
  echo "venvs: TF $TFSLURM_TF_PYTHON, JAX $TFSLURM_JAX_PYTHON, tools $TFSLURM_PYTOOLS_PYTHON"
else
  echo "installs: a venv could not be made (the lines above say why)"
  exit 1
fi
cat "$containers_log"
with_containers=(env) containers_option=()
if [[ $(cat build/containers.rc 2>/dev/null) == 0 && -s build/containers.dir ]]; then
  containers_dir="$(cat build/containers.dir)"
  echo "containers: $containers_dir"
  # The images (Debian 12 with python3, with tensorflow-cpu, and with
  # python3-torch) are the background chain's first build (bg_images), made
  # while the integration tests run: the tests that need them run last in
  # the session and wait for build/images.dir (tests/integration/helpers/
  # images.py).
  with_containers+=(LOCAL_SLURM_CONTAINERS="$containers_dir" TFSLURM_IMAGES_FROM="$PWD/build/images.dir")
  containers_option=(--containers "$containers_dir")
else
  echo "containers: deploy/containers/setup.sh failed: the container tests will fail"
fi

# The background chain (tests/lib/background.sh), in the order the stages
# need it: the container images (the integration session's last tests), the
# packages' checks that need no cluster and Slurm 26.05.3 with tfslurmd
# against it (the packages and compat stages come first after the
# integration tests), then the sanitizer build, then the TSan build.
# The images: mmdebstrap, pip into the TF image from the wheels the TF venv
# was made from, podman and `enroot import` (deploy/containers/
# build-images.sh); cached by their inputs under /opt/tfslurm. build/
# images.dir gets their directory, or "failed" and where the log is, for
# the tests that wait for it.
bg_images() {
  local dir rc=0
  dir="$(ionice -c 3 deploy/containers/build-images.sh)" || rc=$?
  if ((rc == 0)); then
    printf '%s\n' "$dir" >build/images.dir.part
  else
    printf 'failed (exit %s): the end of %s/images.log says why\n' "$rc" "$PWD/$bg_dir" >build/images.dir.part
  fi
  mv build/images.dir.part build/images.dir
  return "$rc"
}
bg_compat() { tests/compat.sh --build-only "$compat_release"; }
# The sanitizer build: clang, ASan + UBSan and libFuzzer's coverage in every
# library, -O1 (CMakeLists.txt). Everything: the tests, the fuzzers and the
# three programs, whose every source clang's thread-safety analysis checks
# as it compiles them (-Werror=thread-safety, for clang only).
# The sanitizer and TSan builds compile in unity batches (CMake's
# CMAKE_UNITY_BUILD: each target's sources 8 to a compile), which parses the
# headers (gRPC, protobuf, nlohmann/json, CLI11) and instantiates their
# templates once per batch instead of once per file (docs/contributing.md,
# "What CI costs"). The main build compiles every file alone, as a
# developer's build and the packages' do, so a source that does not include
# what it uses still fails there.
unity=(-DCMAKE_UNITY_BUILD=ON)
bg_sanitizers() {
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DTFSLURM_SANITIZE=ON -DTFSLURM_FUZZ=ON "${unity[@]}" "${ccache_launcher[@]}" &&
    ninja -C build-asan -j"$jobs"
}
# TSan: the programs that run threads against each other (rendezvous, the
# Slurm poller, the API, the agent's session and its streams, the node's
# relay, the daemon), and the control that a race in our own gRPC reactions is still reported
# (tests/concurrency/tsan_grpc_control.cc). The service's unit tests are not
# among them: they drive core from one thread (TSan finds nothing there that
# ASan's run misses).
tsan_targets=(agent_unit_tests agent_end_to_end_test agent_session_test agent_relay_test
  experiments_concurrency_test api_concurrency_test daemon_test local_files_test tsan_grpc_control)
bg_tsan() {
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTFSLURM_TSAN=ON "${unity[@]}" \
    "${ccache_launcher[@]}" && ninja -C build-tsan -j"$jobs" "${tsan_targets[@]}"
}
# tests/packages.sh --prepare: the packages built from the main build's
# objects (ccache), the previous commit's, lintian, the unit's exposure,
# the settings, the Debian 12 tree and piuparts. Its lines wait in
# build/packages/ for the packages stage (tests/packages.sh), which takes
# the lock it holds.
bg_packages() { ionice -c 3 tests/packages.sh --prepare; }
background=()
((${#containers_option[@]})) && background+=(images)
background+=(packages compat)
((sanitizers)) && background+=(sanitizers)
((run_tsan)) && background+=(tsan)
step "background builds (SCHED_IDLE): ${background[*]}"
start_background "${background[@]}"
echo "started; logs in $bg_dir/"

step "local Slurm cluster"
# The Unix users the tests run jobs as, with their final groups, before
# slurmctld starts and caches anyone's (tests/integration/unix_users.py).
/usr/bin/python3 tests/integration/unix_users.py
cluster_dir="$(mktemp -d /tmp/tfs-ci-XXXX)"
chmod 755 "$cluster_dir" # munged runs as the munge user and must reach its socket
# The stages that run beside another (the end-to-end tests beside the
# packages', the fuzzers beside the benchmarks), each in a process group of
# its own: an early exit ends them with everything they started.
side_stage_pids=()
stop_side_stages() {
  local pid
  for pid in "${side_stage_pids[@]}"; do kill -- -"$pid" 2>/dev/null || true; done
}
# start_side_stage LOG FUNCTION: FUNCTION in the background, in a process
# group of its own, its output to LOG; its pid in side_stage_pid.
start_side_stage() {
  set -m
  "$2" >"$1" 2>&1 &
  side_stage_pid=$!
  side_stage_pids+=("$side_stage_pid")
  set +m
}
# finish_side_stage PID STAGE RUNNER LOG STEP: waits for the side stage
# started as PID, prints LOG under the step STEP and counts it as
# record_counts STAGE RUNNER does.
finish_side_stage() {
  local pid=$1 stage=$2 runner=$3 log=$4 rc
  step "$5"
  set +e
  wait "$pid"
  rc=$?
  set -e
  cat "$log"
  record_counts "$stage" "$runner" "$log" "$rc"
}
cleanup() {
  stop_installs
  stop_background
  stop_side_stages
  deploy/local-slurm/stop.sh "$cluster_dir" >/dev/null 2>&1 || true
  rm -rf "$cluster_dir"
}
trap cleanup EXIT
# Hosts apart (issue 43): every slurmd, slurmctld, the service host and a
# login host in network namespaces of their own, joined by bridges; the
# integration tests run on the service host and reach every other host by
# its own address (deploy/local-slurm/README.md, "Hosts apart").
conf_line="$(deploy/local-slurm/start.sh --hosts-apart "${containers_option[@]}" "$cluster_dir")"
export TFSLURM_SLURM_CONF="${conf_line#SLURM_CONF=}"
echo "cluster: $TFSLURM_SLURM_CONF"

step "integration tests (real Slurm)"
set +e
# Debian's python3 has pytest; a python3 earlier on PATH (pyenv) may not.
# -rs: each skip's reason in the log (the summary names the skipped tests).
# --durations: the slowest tests, for what this stage costs.
# test_slurm_release_crossing.py needs a second Slurm release: the compat stage runs it.
# shellcheck disable=SC2086 # PYTEST_ARGS is words
"${with_containers[@]}" /usr/bin/python3 -m pytest tests/integration -v -rfEs -p no:cacheprovider --durations=25 \
  --ignore=tests/integration/test_slurm_release_crossing.py ${PYTEST_ARGS:-} 2>&1 | tee build/integration.log
integration_rc=${PIPESTATUS[0]}
set -e
record_counts integration pytest build/integration.log "$integration_rc"

# The end-to-end dashboard tests and the Debian packages' stage side by
# side: one drives Chromium against the session cluster's dashboard, the
# other a Debian 12 system container on a local cluster of its own; neither
# fills two cores for long, and each is a few minutes (docs/contributing.md,
# "What CI costs"). The end-to-end tests' output waits in build/e2e.log and
# is printed after the packages'.
e2e_pid=""
if [[ "${TFSLURM_SKIP_E2E:-0}" == 1 ]]; then
  not_run e2e "TFSLURM_SKIP_E2E=1"
elif [[ ! -d tests/e2e ]]; then
  not_run e2e "no tests/e2e"
else
  # tests/lib/counts.sh reads node 20's TAP output (its node_counts says
  # what it relies on); another node may count otherwise.
  node_version=$(node --version 2>/dev/null || echo none)
  if [[ $node_version != v20.* ]]; then
    echo "e2e: node_counts (tests/lib/counts.sh) reads node 20's TAP output, and node $node_version is installed: check what it prints and adapt node_counts"
    record e2e 0 1 0
  else
    # One file at a time: they share the one local cluster (node runs files in
    # parallel on machines with more than 2 cores). TAP, as node_counts reads.
    # On the cluster's service host, as the integration tests: tfslurmd there
    # reaches slurmctld and the agents over the cluster network, and Chromium
    # reaches the dashboard on that host's loopback. Its own process group,
    # so that an early exit ends Chromium too.
    e2e_tests() {
      echo "node $node_version"
      cd tests/e2e && ../../deploy/local-slurm/on-host.sh "$cluster_dir" svc \
        node --test --test-concurrency=1 --test-reporter=tap
    }
    start_side_stage build/e2e.log e2e_tests
    e2e_pid=$side_stage_pid
  fi
fi

# The Debian packages (tests/packages.sh): the checks prepared in the
# background (their lines are printed again and counted here, a failed one
# among them), then a Debian 12 system container on a local cluster of its
# own: install, an experiment through the packaged tfctl and agent over
# TLS, the upgrade under load, backups, refusals, purge.
step "Debian packages (tests/packages.sh)${e2e_pid:+, and beside them the end-to-end dashboard tests (headless Chromium)}"
set +e
wait_background packages
tests/packages.sh 2>&1 | tee build/packages.log
packages_rc=${PIPESTATUS[0]}
set -e
record_counts packages packages build/packages.log "$packages_rc"

if [[ -n $e2e_pid ]]; then
  finish_side_stage "$e2e_pid" e2e node build/e2e.log \
    "end-to-end dashboard tests (headless Chromium), the rest of them"
fi

# The newest Slurm release the project claims, built from its release source
# (cached outside the checkout), with tfslurmd built against it and the
# integration tests that make every libslurm call (tests/compat.sh; it prints
# its own summary, and compat_counts adds up its parts). Built in the
# background: this run of it finds its builds done.
step "Slurm $compat_release compatibility (tests/compat.sh)"
set +e
wait_background compat
tests/compat.sh "$compat_release" 2>&1 | tee build/compat.log
compat_rc=${PIPESTATUS[0]}
set -e
record_counts "compat-$compat_release" compat build/compat.log "$compat_rc"

# The Python package (client/python): its wheel, its unit tests, mypy
# --strict, and installs beside tensorflow-cpu and torch (tests/python.sh;
# its tools in a venv cached outside the checkout, deploy/install-pytools.sh).
step "Python package (tests/python.sh)"
set +e
tests/python.sh 2>&1 | tee build/python.log
python_rc=${PIPESTATUS[0]}
set -e
record_counts python pytest build/python.log "$python_rc"

# Benchmarks that cannot run fail CI rather than rot until someone needs a
# figure: every bench/*.sh at its smallest size, on this build, its figures
# to a scratch file, not bench/RESULTS.md. Before the sanitizer stages:
# the benchmarks, like the integration tests, mostly wait on Slurm, and the
# background builds those stages need go on meanwhile. About 10 minutes on
# 2 cores (10:23 on a fresh machine, 2026-11-30), the longest tf_ps.sh (whose
# hand-written job holds its nodes to its 1-minute limit) and sweep.sh; each
# script's cost is in bench/run.sh (--smoke).
# Fuzzing: each libFuzzer target (tests/fuzz, in the sanitizer build) runs
# for TFSLURM_FUZZ_SECONDS, two at a time: 30 s each catches what a change
# breaks in the corpus's neighbourhood; finding deep bugs is
# tests/fuzz/run-long.sh's job (hours). Beside the benchmarks, which mostly
# wait on Slurm, as soon as the sanitizer build is done (on a new machine it
# is done before the benchmarks start), and under SCHED_IDLE as the
# background builds: the benchmarks' clusters and programs run as if alone,
# and a fuzzer gets the cycles they leave (each target's line gives its
# executions). Its lines wait in build/fuzz.log for its stage below.
fuzz_pid=""
if ((run_fuzz)); then
  fuzz_seconds=${TFSLURM_FUZZ_SECONDS:-30}
  fuzzers() {
    chrt --idle -p 0 "$BASHPID" >/dev/null || echo "fuzz: chrt --idle failed; the fuzzers run at normal priority"
    if wait_background sanitizers >/dev/null; then
      tests/fuzz/run-fuzzers.sh -b "$repo/build-asan" -t "$fuzz_seconds" -j "$jobs"
    else
      echo "fuzz: the sanitizer build failed (its stage below says why): no fuzzer ran"
      return 1
    fi
  }
  start_side_stage build/fuzz.log fuzzers
  fuzz_pid=$side_stage_pid
fi

if [[ "${TFSLURM_SKIP_BENCH:-0}" == 1 ]]; then
  not_run bench "TFSLURM_SKIP_BENCH=1"
else
  step "benchmarks, each at its smallest size (bench/run.sh --smoke)"
  set +e
  TFSLURM_BENCH_BUILD="$repo/build" bench/run.sh --smoke 2>&1 | tee build/bench.log
  bench_rc=${PIPESTATUS[0]}
  set -e
  record_counts bench bench build/bench.log "$bench_rc"
fi

# The unit tests: under ASan + UBSan from the sanitizer build, or, with the
# sanitizers switched off, plain from the main build. ctest refuses to find
# no test (--no-tests=error): a build that registered none must not pass as
# "0 failed".
if ((sanitizers)); then
  step "unit tests under ASan + UBSan (clang)"
  set +e
  wait_background sanitizers
  sanitizer_build_rc=$?
  if ((sanitizer_build_rc == 0)); then
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      ctest --test-dir build-asan --output-on-failure --no-tests=error -j"$jobs" 2>&1 | tee build-asan/unit.log
    unit_rc=${PIPESTATUS[0]}
    record_counts unit ctest build-asan/unit.log "$unit_rc"
  else
    record unit 0 1 0
  fi
  set -e

  # Thread-safety analysis: clang checked the lock annotations of every
  # source as the sanitizer build compiled it (ABSL_GUARDED_BY and friends;
  # docs/style.md): an unguarded access to guarded state fails that build
  # (-Werror=thread-safety, CMakeLists.txt). Counted as the sources of the
  # three programs, which a build that stopped early would not all have.
  step "thread-safety analysis (clang -Werror=thread-safety, in the sanitizer build)"
  tsa_sources=0
  if ((sanitizer_build_rc == 0)); then
    # An object of a unity batch counts the sources its batch includes.
    tsa_sources=$(ninja -C build-asan -t inputs tfslurmd tfslurm-agent tfctl | grep '\.o$' |
      while read -r object; do
        batch="build-asan/${object%.o}"
        if [[ $batch == */Unity/*.cxx ]]; then grep -c '^#include' "$batch"; else echo 1; fi
      done | awk '{ n += $1 } END { print n + 0 }')
  fi
  echo "thread-safety: $tsa_sources sources of tfslurmd, tfslurm-agent and tfctl compiled with -Werror=thread-safety"
  if ((sanitizer_build_rc == 0 && tsa_sources > 0)); then record thread-safety "$tsa_sources" 0; else record thread-safety 0 1; fi
else
  step "unit tests (main build, no sanitizers)"
  set +e
  ctest --test-dir build --output-on-failure --no-tests=error -j"$jobs" 2>&1 | tee build/unit.log
  unit_rc=${PIPESTATUS[0]}
  set -e
  record_counts unit ctest build/unit.log "$unit_rc"
  not_run thread-safety "TFSLURM_SKIP_SANITIZERS=1"
fi

# Fuzzing (started beside the benchmarks, above): its lines and counts.
if [[ -n $fuzz_pid ]]; then
  finish_side_stage "$fuzz_pid" fuzz fuzz build/fuzz.log \
    "fuzzing (libFuzzer + ASan + UBSan, $fuzz_seconds s per target), the rest of it"
else
  not_run fuzz "TFSLURM_FUZZ=0 or TFSLURM_SKIP_SANITIZERS=1"
fi

if ((run_tsan)); then
  step "unit, agent and concurrency tests under TSan"
  set +e
  wait_background tsan
  tsan_rc=$?
  if [[ $tsan_rc -eq 0 ]]; then
    # Test programs not built here are listed by ctest as *_NOT_BUILT.
    ctest --test-dir build-tsan --output-on-failure --no-tests=error -j"$jobs" -E _NOT_BUILT 2>&1 | tee build-tsan/tsan.log
    tsan_rc=${PIPESTATUS[0]}
    record_counts tsan ctest build-tsan/tsan.log "$tsan_rc"
  else
    record tsan 0 1 0
  fi
  set -e
else
  not_run tsan "TFSLURM_TSAN=0 or TFSLURM_SKIP_SANITIZERS=1"
fi

step "summary"
for i in "${!step_seconds[@]}"; do
  printf '%6d:%02d  %s\n' $((step_seconds[i] / 60)) $((step_seconds[i] % 60)) "${step_names[i]}"
done
printf '%6d:%02d  the whole run\n' $((SECONDS / 60)) $((SECONDS % 60))
# The background builds, each on its own: how long it took, beside the
# stages above (it overlapped them).
for name in "${background[@]}"; do
  if [[ -f $bg_dir/$name.seconds ]]; then
    printf '%6d:%02d  background: %s (overlapped the stages above)\n' \
      $(($(cat "$bg_dir/$name.seconds") / 60)) $(($(cat "$bg_dir/$name.seconds") % 60)) "$name"
  fi
done
echo
# What failed, by name and with its first lines, gathered from every stage's
# log: the logs are long, and only the end of a CI run's output is kept: last
# but for the table, so that the end shows why as well as what.
for log in build/integration.log build/e2e.log build/packages.log build/compat.log build/python.log build-asan/unit.log build/unit.log \
  build/fuzz.log build-tsan/tsan.log build/bench.log; do
  [[ -f $log ]] || continue
  failed=$(failed_tests "$log" || true)
  if [[ -n $failed ]]; then printf 'failed in %s:\n%s\n\n' "$log" "$failed"; fi
done
rc=0
print_summary || rc=$?
exit "$rc"
