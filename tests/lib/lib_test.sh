#!/usr/bin/env bash
# tests/lib/lib_test.sh: tests/run.sh's counting, skip and summary functions
# (tests/lib/*.sh) on logs the runners wrote (tests/lib/testdata/: pytest
# 7.2, ctest 3.25, node 20's TAP, tests/compat.sh), and its refusal of
# stage switches under CI. ctest runs it as `run_lib` (tests/CMakeLists.txt).
# A miscount here is a CI run that reads green when it is not.
set -uo pipefail
root="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root" || exit 1
# shellcheck source=counts.sh
source tests/lib/counts.sh
# shellcheck source=skips.sh
source tests/lib/skips.sh
# shellcheck source=machine.sh
source tests/lib/machine.sh
# shellcheck source=summary.sh
source tests/lib/summary.sh
# shellcheck source=ci.sh
source tests/lib/ci.sh
data=tests/lib/testdata
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0

expect() { # expect WHAT WANT GOT
  if [[ $2 == "$3" ]]; then return 0; fi
  printf 'FAIL %s\n  want: %s\n  got:  %s\n' "$1" "$2" "$3"
  failures=$((failures + 1))
}

# pytest: "2 failed, 2 passed, 2 skipped, 1 xfailed, 1 error": failures and
# errors both count, xfailed is a skip.
expect "pytest counts" "2 3 3" "$(pytest_counts $data/pytest.log)"
expect "pytest skipped" $'test_a.py::test_skip\tno thing (here)\ntest_a.py::test_fx\tfixture skip\ntest_a.py::test_xf\t' \
  "$(pytest_skipped $data/pytest.log)"
# The summary names what failed: pytest's short summary (-rfE), setup and
# teardown errors too; ctest's and TAP's failures with the lines after them.
expect "pytest failed tests" $'FAILED test_a.py::test_p[c] - AssertionError: assert \'c\' != \'c\'\nFAILED test_a.py::test_fail - assert 0\nERROR test_a.py::test_err - RuntimeError: setup broke\nERROR test_a.py::test_td - RuntimeError: teardown broke' \
  "$(failed_tests $data/pytest-rfEs.log)"
expect "pytest -rfEs counts" "3 4 3" "$(pytest_counts $data/pytest-rfEs.log)"
expect "ctest failed tests, each with why" $'\t  3 - fails (Failed)\n    /src/x_test.cc:12: Failure\n    Expected equality of these values:\n      1\n      2\n    [  FAILED  ] Suite.Fails (0 ms)' \
  "$(failed_tests $data/ctest.log | head -n 6)"
expect "TAP failed tests" "not ok 5 - b fails" "$(failed_tests $data/node20.tap | head -n 1)"
# tests/packages.sh's and the fuzzers' own lines: the check or target, and
# the crash log's lines the fuzzers print after theirs.
printf 'packages lintian: ok (0 overrides, 11 s)\npiuparts: ERROR: purge left /etc/x\npackages piuparts: FAILED (see above, 30 s)\n\n18 passed, 1 failed\n' >"$work/pk.log"
expect "packages failed checks, with what they said above" \
  $'packages lintian: ok (0 overrides, 11 s)\npiuparts: ERROR: purge left /etc/x\npackages piuparts: FAILED (see above, 30 s)' \
  "$(failed_tests "$work/pk.log")"
printf 'fuzz spec: ok execs=1 cov=2 ft=3 corpus=4\nfuzz sbatch: FAILED execs=9 cov=8 (exit 1); log: b/fuzz-sbatch.log\n==1==ERROR: AddressSanitizer: heap-buffer-overflow\n' >"$work/fz.log"
expect "fuzz failed targets, with the crash log's lines" \
  $'fuzz sbatch: FAILED execs=9 cov=8 (exit 1); log: b/fuzz-sbatch.log\n==1==ERROR: AddressSanitizer: heap-buffer-overflow' \
  "$(failed_tests "$work/fz.log")"
printf '====== 3 failed, 10 passed, 1 skipped, 2 errors in 12.30s (0:00:12) ======\n' >"$work/p.log"
expect "pytest: 3 failed and 2 errors are 5" "10 5 1" "$(pytest_counts "$work/p.log")"
printf '======= 4 passed, 7 deselected in 1.00s =======\n' >"$work/p.log"
expect "pytest: deselected counts as skipped" "4 0 7" "$(pytest_counts "$work/p.log")"
printf '======= 4 passed, 1 frobbed in 1.00s =======\n' >"$work/p.log"
expect "pytest: an unknown word is unreadable" "" "$(pytest_counts "$work/p.log" 2>/dev/null)"
printf 'Traceback (most recent call last):\n' >"$work/p.log"
pytest_counts "$work/p.log" 2>/dev/null
expect "pytest: no closing line is an error" 1 $?

# ctest: 1 passed, 1 skipped (inside "out of 4"), 1 failed, 1 not run
# (failed), 1 disabled (outside "out of 4").
expect "ctest counts" "1 2 2" "$(ctest_counts $data/ctest.log)"
expect "ctest skipped" $'skipme\tSkipped\ndis\tDisabled' "$(ctest_skipped $data/ctest.log)"
printf 'No tests were found!!!\n' >"$work/c.log"
ctest_counts "$work/c.log" 2>/dev/null
expect "ctest: no test found is an error" 1 $?

# node 20: 7 tests, subtests included: 3 pass, 1 fail, 2 skip, 1 todo.
expect "node counts" "3 1 3" "$(node_counts $data/node20.tap)"
expect "node skipped" $'two skips\tno reason here\nthree todo\tlater\nchild skip\tbecause (x)' \
  "$(node_skipped $data/node20.tap)"
sed 's/^# skipped 2$/# skipped 3/' $data/node20.tap >"$work/n.tap"
node_counts "$work/n.tap" 2>/dev/null
expect "node: counts that do not add up are refused" 1 $?

# tests/compat.sh: 3 ldd checks + 6 adapter tests + 23 passed, 1 failed.
expect "compat counts" "32 1 0" "$(compat_counts $data/compat.log)"

# gtest run directly, brief or not: a skip is counted either way, and a
# brief one, without its name, reaches the skips as unnamed (refused).
printf '[==========] 3 tests from 1 test suite ran. (1 ms total)\n[  PASSED  ] 2 tests.\n[  SKIPPED ] 1 test.\n' >"$work/g.log"
expect "gtest brief: the skip counts" "2 0 1" "$(gtest_counts "$work/g.log")"
printf '[==========] 3 tests from 1 test suite ran. (1 ms total)\n[  PASSED  ] 2 tests.\n[  SKIPPED ] 1 test, listed below:\n[  SKIPPED ] A.B\n' >"$work/g2.log"
expect "gtest: the skip counts and is named" "2 0 1" "$(gtest_counts "$work/g2.log")"
expect "gtest: its name" $'A.B\t' "$(gtest_skipped "$work/g2.log")"
printf '[==========] 3 tests from 1 test suite ran. (1 ms total)\n[  PASSED  ] 1 test.\n[  FAILED  ] 2 tests.\n' >"$work/g3.log"
expect "gtest brief: the failures count" "1 2 0" "$(gtest_counts "$work/g3.log")"

stages=(compat) in_ci=1 skips_file="$work/brief-skips" MISSING_CONDITIONS=()
: >"$skips_file"
declare -A passed=() failed=() skipped=() not_run_why=()
record_counts compat gtest "$work/g.log" 0 >/dev/null
check_skips tests/skip_allowlist.txt "$skips_file" ipv6-loopback root cgroup-v1-devices cgroup-v1-memory >/dev/null
expect "gtest brief: an unnamed skip is refused on any machine" 1 "$SKIPS_REFUSED"

printf 'fuzz spec_fuzzer: ok\nfuzz sbatch_fuzzer: FAILED (crash)\n' >"$work/f.log"
expect "fuzz counts" "1 1 0" "$(fuzz_counts "$work/f.log")"
printf 'bench smoke reaping.sh: ok (30 s: bench/reaping.sh --runs 1)\n' >"$work/b.log"
expect "bench counts" "1 0 0" "$(bench_counts "$work/b.log")"
printf 'packages: prepared in 300 s:\npackages build: ok (0.1.0+git9.abc, 130 hits, 0 misses, 40 s)\npackages purge: FAILED (see above, 3 s)\npackages: the container checks took 99 s\n' >"$work/k.log"
expect "packages counts: its own notes are not checks" "1 1 0" "$(packages_counts "$work/k.log")"

# Skips: allowed only when listed with a condition this machine lacks.
printf 'unit\tPortReservationTest.GrpcDefaultServerBindsItThenHoldsItAlone\t\n' >"$work/skips"
check_skips tests/skip_allowlist.txt "$work/skips" >/dev/null
expect "a listed skip on a machine with its condition is refused" 1 "$SKIPS_REFUSED"
check_skips tests/skip_allowlist.txt "$work/skips" ipv6-loopback >/dev/null
expect "a listed skip on a machine without its condition is allowed" 0 "$SKIPS_REFUSED"
printf 'unit\tSomeTest.NotListed\tbecause\n' >"$work/skips"
check_skips tests/skip_allowlist.txt "$work/skips" ipv6-loopback root cgroup-v1-devices cgroup-v1-memory >/dev/null
expect "an unlisted skip is refused whatever the machine" 1 "$SKIPS_REFUSED"
check_skips tests/skip_allowlist.txt /dev/null >/dev/null
expect "the allowlist reads" 0 "$SKIPS_REFUSED"

# The summary: a refused skip fails the run and its closing line; so does a
# stage NOT RUN under CI, but not outside it.
stages=(unit e2e) in_ci=0 skips_file="$work/skips" MISSING_CONDITIONS=()
declare -A passed=([unit]=10) failed=([unit]=0) skipped=([unit]=1) not_run_why=([e2e]="TFSLURM_SKIP_E2E=1")
out=$(print_summary)
expect "summary: a refused skip fails" 1 $?
expect "summary: its closing line" "summary: 10 passed, 1 failed, 1 skipped" "$(tail -n 1 <<<"$out")"
: >"$work/skips"
skipped[unit]=0
out=$(print_summary)
expect "summary: NOT RUN outside CI passes" 0 $?
grep -q '^e2e  *NOT RUN (TFSLURM_SKIP_E2E=1)$' <<<"$out"
expect "summary: NOT RUN is shown" 0 $?
in_ci=1
out=$(print_summary)
expect "summary: NOT RUN under CI fails" 1 $?
expect "summary: under CI its closing line" "summary: 10 passed, 1 failed, 0 skipped" "$(tail -n 1 <<<"$out")"

# Floors: a stage that counts fewer tests than its floor fails the run and
# is named; skipped tests count towards it; the checked-in file reads.
stages=(unit e2e) in_ci=1 skips_file="$work/no-skips" MISSING_CONDITIONS=()
: >"$skips_file"
declare -A passed=([unit]=8 [e2e]=3) failed=([unit]=0 [e2e]=0) skipped=([unit]=1 [e2e]=0) not_run_why=()
floor=([unit]=10 [e2e]=3)
out=$(print_summary)
expect "floor: a stage below its floor fails" 1 $?
grep -q '^  unit counted 9, below its floor of 10$' <<<"$out"
expect "floor: naming the stage, its count and its floor" 0 $?
expect "floor: the closing line counts it" "summary: 11 passed, 1 failed, 1 skipped" "$(tail -n 1 <<<"$out")"
floor=([unit]=9 [e2e]=3)
print_summary >/dev/null
expect "floor: at its floor, skips included, passes" 0 $?
printf 'unit 10\ne2e x\n' >"$work/floors"
read_floors "$work/floors" >/dev/null
expect "floor: an unreadable line is an error" 1 $?
read_floors tests/floors.txt
expect "floor: tests/floors.txt reads" 0 $?
for stage in unit integration e2e fuzz tsan bench; do
  [[ -n ${floor[$stage]:-} ]]
  expect "floor: tests/floors.txt has $stage" 0 $?
done
floor=()

# A run assembled from the captured logs, as tests/run.sh records them: the
# skips each names reach the summary, and an exit code the log does not
# explain is a failure.
stages=(unit integration e2e) in_ci=1 skips_file="$work/run-skips" MISSING_CONDITIONS=()
: >"$skips_file"
declare -A passed=() failed=() skipped=() not_run_why=()
record_counts unit ctest $data/ctest.log 8 >/dev/null
record_counts integration pytest $data/pytest.log 1 >/dev/null
record_counts e2e node $data/node20.tap 0 >/dev/null
expect "run: the skips of every stage, by name" "unit skipme
unit dis
integration test_a.py::test_skip
integration test_a.py::test_fx
integration test_a.py::test_xf
e2e two skips
e2e three todo
e2e child skip" "$(cut -f1,2 "$skips_file" | tr '\t' ' ')"
expect "run: closing line" "summary: 6 passed, 14 failed, 8 skipped" "$(print_summary | tail -n 1)"
printf '=== 3 passed in 1.00s ===\n' >"$work/p.log"
record_counts integration pytest "$work/p.log" 1 >/dev/null
expect "run: an exit code the log does not explain is a failure" "3 1 0" \
  "${passed[integration]} ${failed[integration]} ${skipped[integration]}"
printf '=== no tests ran in 0.01s ===\n' >"$work/p.log"
record_counts integration pytest "$work/p.log" 5 >/dev/null
expect "run: a stage that ran no test fails" "0 1 0" \
  "${passed[integration]} ${failed[integration]} ${skipped[integration]}"

# Under CI, a stage switch is refused (tests/run.sh then exits 2 before it
# does anything); outside CI it is the caller's to use. Each variable below
# emptied or narrowed a stage under CI before it was refused (issue 40).
for v in TFSLURM_SKIP_E2E=1 GTEST_TOTAL_SHARDS=1000 GTEST_SHARD_INDEX=999 GTEST_FILTER=Nothing.* \
  PYTEST_ADDOPTS=--ignore=tests/integration/test_x.py PYTEST_PLUGINS=p NODE_OPTIONS=--test-shard=1/2 \
  TSAN_OPTIONS=report_bugs=0 ASAN_OPTIONS=detect_leaks=0 TFSLURM_SLURM_CONF=/x TFSLURM_ANYTHING_NEW=1 \
  CTEST_NO_TESTS_ACTION=ignore PYTHONPATH=/tmp LD_PRELOAD=libc.so.6 CXXFLAGS=-DNDEBUG; do
  out=$(env CI=true "$v" bash -c 'source tests/lib/ci.sh; detect_ci; refuse_stage_switches')
  expect "CI=true $v is refused" 1 $?
  grep -qF "  $v" <<<"$out"
  expect "naming $v" 0 $?
done
CI=false TFSLURM_SKIP_E2E=1 bash -c 'source tests/lib/ci.sh; detect_ci; refuse_stage_switches'
expect "CI=false TFSLURM_SKIP_E2E=1 is the caller's" 0 $?
env -i PATH="$PATH" HOME="$HOME" CI=true MAKEFLAGS=-j2 bash -c 'source tests/lib/ci.sh; detect_ci; refuse_stage_switches'
expect "CI=true alone runs" 0 $?

# The background chain (background.sh): its builds run one after another
# under SCHED_IDLE, each's exit code reaches wait_background, and a name the
# chain never ran is an error, not a wait forever.
# shellcheck source=background.sh
source tests/lib/background.sh
bg_dir="$work/bg"
bg_first() { chrt -p "$BASHPID"; }
bg_second() { [[ -f $bg_dir/first.rc ]] && return 3; }
start_background first second
wait_background first >/dev/null
expect "background: the first's exit code" 0 $?
grep -q 'policy: SCHED_IDLE' "$bg_dir/first.log"
expect "background: it ran under SCHED_IDLE" 0 $?
wait_background second >/dev/null
expect "background: the second ran after the first, its exit code" 3 $?
wait_background third >/dev/null
expect "background: a name the chain did not run" 1 $?
stop_background

if ((failures)); then
  echo "run_lib: $failures checks failed"
  exit 1
fi
echo "run_lib: every check passed"
