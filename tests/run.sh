#!/usr/bin/env bash
# tests/run.sh: installs what is needed, builds, checks the formatting of
# every tracked C/C++ file (clang-format), and runs every test:
#   1. unit tests (gtest, via ctest)
#   2. the same unit tests built with ASan + UBSan
#   3. integration tests (pytest) against a real local Slurm cluster, real
#      TensorFlow among them (deploy/install-tf.sh)
#   4. end-to-end dashboard tests in headless Chromium
#   5. each libFuzzer target for a bounded time (clang, ASan + UBSan)
#   6. unit, agent and concurrency tests built with TSan
#   7. a clang build of every program with -Wthread-safety (lock annotations)
# Works on a fresh Debian machine; CI runs it through .ci/run.
#
# Environment:
#   TFSLURM_SKIP_SANITIZERS=1   skip steps 2, 5, 6 and 7 (local iterations)
#   TFSLURM_SKIP_E2E=1          skip step 4
#   TFSLURM_FUZZ=0              skip step 5; TFSLURM_FUZZ=1 runs it even
#                               with TFSLURM_SKIP_SANITIZERS=1
#   TFSLURM_FUZZ_SECONDS=N      per fuzz target (default 60)
#   TFSLURM_TSAN=0              skip step 6; =1 as TFSLURM_FUZZ=1
#   TFSLURM_THREAD_SAFETY=0     skip step 7; =1 as TFSLURM_FUZZ=1
#   PYTEST_ARGS="-k resume"     passed to pytest
set -euo pipefail

repo="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
jobs=2

# Each step's wall time, for the summary (what each part of a CI run costs).
step_names=() step_seconds=() step_started=$SECONDS
step() {
  if ((${#step_names[@]})); then step_seconds+=("$((SECONDS - step_started))"); fi
  step_names+=("$*")
  step_started=$SECONDS
  printf '\n=== %s === (%d:%02d into the run)\n' "$*" $((SECONDS / 60)) $((SECONDS % 60))
}

declare -A passed failed
record() { passed[$1]=$2; failed[$1]=$3; }

step "install dependencies"
deploy/install-deps.sh
# The real TensorFlow of the TF integration tests (tests/integration/
# test_tensorflow.py): a pinned tensorflow-cpu in a venv outside the checkout,
# cached across runs and clones.
TFSLURM_TF_PYTHON="$(deploy/install-tf.sh)"
export TFSLURM_TF_PYTHON
if [[ "${TFSLURM_SKIP_E2E:-0}" != 1 && -x tests/e2e/install.sh ]]; then
  tests/e2e/install.sh
fi

step "build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build -j"$jobs"

# Every tracked C and C++ file must be as .clang-format says (docs/style.md).
# Generated code (protoc's, the embedded migrations and web assets) lives in
# build directories and is not tracked; third_party/ and *.pb.* are left out
# should they ever be. A file deleted in the work tree but still in the index
# is skipped.
step "format (clang-format --dry-run --Werror)"
format_rc=0 format_checked=0 format_bad=()
if ! command -v clang-format >/dev/null; then
  echo "format: clang-format is not installed (deploy/install-deps.sh installs it)"
  format_rc=1
elif ! format_list=$(git ls-files -- '*.cc' '*.h' '*.c' ':!:third_party/**' ':!:*.pb.cc' ':!:*.pb.h'); then
  echo "format: git ls-files failed (not a git checkout?): cannot list the tracked files"
  format_rc=1
else
  while IFS= read -r f; do
    [[ -n $f && -f $f ]] || continue
    format_checked=$((format_checked + 1))
    clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || format_bad+=("$f")
  done <<<"$format_list"
  if ((${#format_bad[@]})); then
    format_rc=1
    echo "not formatted as .clang-format says (clang-format -i FILE fixes one; clang-format --dry-run FILE shows where):"
    printf '  %s\n' "${format_bad[@]}"
  else
    echo "format: all $format_checked files formatted"
  fi
fi
if ((format_checked)); then
  record format "$((format_checked - ${#format_bad[@]}))" "${#format_bad[@]}"
else
  record format 0 "$format_rc"
fi

# ctest's summary line: "100% tests passed, 0 tests failed out of 68".
ctest_counts() {
  local log=$1 total fails
  total=$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' "$log" | tail -1)
  fails=$(sed -n 's/.* \([0-9]*\) tests failed out of.*/\1/p' "$log" | tail -1)
  echo "$((total - fails)) $fails"
}

step "unit tests"
set +e
ctest --test-dir build --output-on-failure -j"$jobs" 2>&1 | tee build/unit.log
unit_rc=${PIPESTATUS[0]}
set -e
read -r p f < <(ctest_counts build/unit.log)
record unit "$p" "$f"

if [[ "${TFSLURM_SKIP_SANITIZERS:-0}" != 1 ]]; then
  step "unit tests under ASan + UBSan"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTFSLURM_SANITIZE=ON >/dev/null
  # Every gtest program (service, agent, client, concurrency, fuzz corpus).
  mapfile -t test_targets < <(ninja -C build-asan -t targets all | sed -n 's/^\([a-z_]*_tests\{0,1\}\): phony$/\1/p')
  ninja -C build-asan -j"$jobs" "${test_targets[@]}"
  set +e
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j"$jobs" 2>&1 | tee build-asan/unit.log
  asan_rc=${PIPESTATUS[0]}
  set -e
  read -r p f < <(ctest_counts build-asan/unit.log)
  record asan "$p" "$f"
else
  asan_rc=0
fi

step "local Slurm cluster"
# The Unix users the tests run jobs as, with their final groups, before
# slurmctld starts and caches anyone's (tests/integration/unix_users.py).
/usr/bin/python3 tests/integration/unix_users.py
cluster_dir="$(mktemp -d /tmp/tfs-ci-XXXX)"
chmod 755 "$cluster_dir" # munged runs as the munge user and must reach its socket
cleanup() { deploy/local-slurm/stop.sh "$cluster_dir" >/dev/null 2>&1 || true; rm -rf "$cluster_dir"; }
trap cleanup EXIT
conf_line="$(deploy/local-slurm/start.sh "$cluster_dir")"
export TFSLURM_SLURM_CONF="${conf_line#SLURM_CONF=}"
echo "cluster: $TFSLURM_SLURM_CONF"

step "integration tests (real Slurm)"
set +e
# Debian's python3 has pytest; a python3 earlier on PATH (pyenv) may not.
# test_slurm_release_crossing.py needs a second Slurm release: the compat stage runs it.
/usr/bin/python3 -m pytest tests/integration -v -p no:cacheprovider \
  --ignore=tests/integration/test_slurm_release_crossing.py ${PYTEST_ARGS:-} 2>&1 | tee build/integration.log
integration_rc=${PIPESTATUS[0]}
set -e
p=$(grep -Eo '[0-9]+ passed' build/integration.log | tail -1 | grep -Eo '[0-9]+' || echo 0)
f=$(grep -Eo '[0-9]+ (failed|error)' build/integration.log | tail -1 | grep -Eo '[0-9]+' || echo 0)
record integration "$p" "$f"

e2e_rc=0
if [[ "${TFSLURM_SKIP_E2E:-0}" != 1 && -d tests/e2e ]]; then
  step "end-to-end dashboard tests (headless Chromium)"
  set +e
  # One file at a time: they share the one local cluster (node runs files in
  # parallel on machines with more than 2 cores).
  (cd tests/e2e && node --test --test-concurrency=1 2>&1) | tee build/e2e.log
  e2e_rc=${PIPESTATUS[0]}
  set -e
  p=$(sed -n 's/^# pass \([0-9]*\)/\1/p' build/e2e.log | tail -1)
  f=$(sed -n 's/^# fail \([0-9]*\)/\1/p' build/e2e.log | tail -1)
  record e2e "${p:-0}" "${f:-0}"
fi

# The newest Slurm release the project claims, built from its release source
# (cached outside the checkout), with tfslurmd built against it and the
# integration tests that make every libslurm call (tests/compat.sh).
compat_release=26.05.3
step "Slurm $compat_release compatibility (tests/compat.sh)"
set +e
tests/compat.sh "$compat_release" 2>&1 | tee build/compat.log
compat_rc=${PIPESTATUS[0]}
set -e
p=$(grep -Eo '[0-9]+ passed' build/compat.log | tail -1 | grep -Eo '[0-9]+' || echo 0)
f=$(grep -Eo '[0-9]+ (failed|error)' build/compat.log | tail -1 | grep -Eo '[0-9]+' || echo 0)
if [[ $compat_rc -ne 0 && $f -eq 0 ]]; then f=1; fi
record "compat-$compat_release" "$p" "$f"

# Fuzzing: each libFuzzer target (tests/fuzz, clang) runs for
# TFSLURM_FUZZ_SECONDS, two at a time; longer runs: tests/fuzz/run-long.sh.
# On 2 cores: 2-3 minutes of build (clang, cold), then 2 x SECONDS.
sanitizers_default=1
if [[ "${TFSLURM_SKIP_SANITIZERS:-0}" == 1 ]]; then sanitizers_default=0; fi
fuzz_rc=0 tsan_rc=0
if [[ "${TFSLURM_FUZZ:-$sanitizers_default}" != 0 ]]; then
  fuzz_seconds=${TFSLURM_FUZZ_SECONDS:-60}
  step "fuzzing (libFuzzer + ASan + UBSan, $fuzz_seconds s per target)"
  set +e
  tests/fuzz/run-fuzzers.sh -t "$fuzz_seconds" -j "$jobs" 2>&1 | tee build/fuzz.log
  fuzz_rc=${PIPESTATUS[0]}
  set -e
  p=$(grep -c '^fuzz [a-z_]*: ok' build/fuzz.log || true)
  f=$(grep -c '^fuzz [a-z_]*: FAILED' build/fuzz.log || true)
  if [[ $fuzz_rc -ne 0 && $f -eq 0 ]]; then f=1; fi # the build failed
  record fuzz "$p" "$f"
fi
# TSan: the programs that run threads against each other (rendezvous, the
# Slurm poller, the API). 5-8 minutes on 2 cores (cold), nearly all build.
if [[ "${TFSLURM_TSAN:-$sanitizers_default}" != 0 ]]; then
  step "unit, agent and concurrency tests under TSan"
  set +e
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTFSLURM_TSAN=ON >/dev/null &&
    ninja -C build-tsan -j"$jobs" service_unit_tests agent_unit_tests agent_end_to_end_test \
      experiments_concurrency_test api_concurrency_test daemon_test
  tsan_rc=$?
  p=0 f=1
  if [[ $tsan_rc -eq 0 ]]; then
    # Test programs not built here are listed by ctest as *_NOT_BUILT.
    ctest --test-dir build-tsan --output-on-failure -j"$jobs" -E _NOT_BUILT 2>&1 | tee build-tsan/tsan.log
    tsan_rc=${PIPESTATUS[0]}
    read -r p f < <(ctest_counts build-tsan/tsan.log)
  fi
  set -e
  record tsan "$p" "$f"
fi

# Thread-safety analysis: clang checks the lock annotations of every library
# (ABSL_GUARDED_BY and friends; docs/style.md). A compile, no test: an
# unguarded access to guarded state fails it (-Werror=thread-safety, set in
# CMakeLists.txt for clang). Debug, for the compile time: 3-4 minutes cold.
tsa_rc=0
if [[ "${TFSLURM_THREAD_SAFETY:-$sanitizers_default}" != 0 ]]; then
  step "thread-safety analysis (clang -Wthread-safety)"
  set +e
  cmake -S . -B build-clang -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ >/dev/null &&
    ninja -C build-clang -j"$jobs" tfslurmd tfslurm-agent tfctl
  tsa_rc=$?
  set -e
  if [[ $tsa_rc -eq 0 ]]; then record thread-safety 1 0; else record thread-safety 0 1; fi
fi

step "summary"
for i in "${!step_seconds[@]}"; do
  printf '%6d:%02d  %s\n' $((step_seconds[i] / 60)) $((step_seconds[i] % 60)) "${step_names[i]}"
done
printf '%6d:%02d  the whole run\n' $((SECONDS / 60)) $((SECONDS % 60))
total_p=0 total_f=0
for k in "${!passed[@]}"; do
  printf '%-12s %4s passed, %s failed\n' "$k" "${passed[$k]}" "${failed[$k]}"
  total_p=$((total_p + passed[$k])); total_f=$((total_f + failed[$k]))
done
rc=0
for r in $format_rc $unit_rc $asan_rc $integration_rc $e2e_rc $compat_rc $fuzz_rc $tsan_rc $tsa_rc; do [[ $r -eq 0 ]] || rc=1; done
if [[ $rc -ne 0 && $total_f -eq 0 ]]; then total_f=1; fi
echo "summary: $total_p passed, $total_f failed"
exit $rc
