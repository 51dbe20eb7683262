#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan; in BUILD, by default
# build-asan, tests/run.sh's sanitizer build, configured here if it is not
# yet) and runs each for SECONDS, JOBS at a time, starting from the corpus in
# the tree. The tree is never written: new inputs go to
# BUILD/fuzz-corpus/TARGET, crashes to BUILD/fuzz-artifacts/TARGET/. One line
# per target:
#   fuzz TARGET: ok|FAILED execs=N cov=N ft=N corpus=N
# and the crash log when one fails. Exit status 1 when any target failed.
#
#   tests/fuzz/run-fuzzers.sh [-t SECONDS] [-j JOBS] [-b BUILD] [TARGET...]
#   TARGET: one tests/fuzz/CMakeLists.txt registers (default: every one)
set -euo pipefail

fuzz_dir="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd -- "$fuzz_dir/../.." && pwd)"
seconds=60 jobs=2 build="$repo/build-asan"
while getopts "t:j:b:" opt; do
  case $opt in
    t) seconds=$OPTARG ;;
    j) jobs=$OPTARG ;;
    b) build=$OPTARG ;;
    *) sed -n '2,12p' "$0" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
targets=("$@")

if [[ ! -f $build/CMakeCache.txt ]]; then
  # Through ccache, as every build of tests/run.sh (tests/lib/ccache.sh).
  # shellcheck source=../lib/ccache.sh
  source "$repo/tests/lib/ccache.sh"
  cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DTFSLURM_SANITIZE=ON -DTFSLURM_FUZZ=ON "${ccache_launcher[@]}" >/dev/null
fi
# Every fuzzer the build registers: the `fuzzers` target's dependencies.
mapfile -t registered < <(ninja -C "$build" -t query tests/fuzz/fuzzers | sed -nE 's|^ +bin/([a-z_]+)_fuzzer$|\1|p' | sort -u)
if ((${#registered[@]} == 0)); then
  echo "run-fuzzers: $build registers no fuzzer (configured without -DTFSLURM_FUZZ=ON?)" >&2
  exit 1
fi
((${#targets[@]})) || targets=("${registered[@]}")
ninja -C "$build" -j"$jobs" "${targets[@]/%/_fuzzer}"

dict_of() {
  case $1 in
    spec | sbatch) echo "-dict=$fuzz_dir/spec.dict" ;;
    agent_json) echo "-dict=$fuzz_dir/agent_json.dict" ;;
  esac
}

# The scalar files' readers, and httplib reading a request (a chunk size, a
# Content-Length), must not allocate what a length field or a line claims:
# any one allocation over 64 MB is a failure there.
limits_of() {
  case $1 in
    tfevents | scalars_jsonl | request_head | http_request) echo "-malloc_limit_mb=64" ;;
  esac
}

run_one() {
  local t=$1 work="$build/fuzz-corpus/$1" art="$build/fuzz-artifacts/$1/" log="$build/fuzz-$1.log"
  mkdir -p "$work" "$art"
  # -timeout: one input taking 120 s is a hang. libFuzzer times an input by
  # the wall clock, and tests/run.sh runs the fuzzers under SCHED_IDLE beside
  # the benchmarks, which keep both cores busy: there an input that takes 30
  # ms on a core of its own can take 10 s. -rss_limit_mb: a blow-up.
  # -max_len: room for deep nesting and long strings.
  "$build/bin/${t}_fuzzer" -max_total_time="$seconds" -timeout=120 -rss_limit_mb=2048 -max_len=16384 \
    -print_final_stats=1 -artifact_prefix="$art" $(dict_of "$t") $(limits_of "$t") "$work" "$fuzz_dir/corpus/$t" >"$log" 2>&1
}

declare -A pid
failed=0
running=0
for t in "${targets[@]}"; do
  run_one "$t" &
  pid[$t]=$!
  running=$((running + 1))
  if ((running >= jobs)); then wait -n || true; running=$((running - 1)); fi
done
for t in "${targets[@]}"; do
  rc=0
  wait "${pid[$t]}" || rc=$?
  log="$build/fuzz-$t.log"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
  if [[ $rc -eq 0 ]]; then
    echo "fuzz $t: ok execs=${execs:-?} cov=${cov:-?} ft=${ft:-?} corpus=${corp:-?}"
  else
    failed=1
    echo "fuzz $t: FAILED execs=${execs:-?} cov=${cov:-?} (exit $rc); log: $log"
    grep -E 'INVARIANT VIOLATED|ERROR: |SUMMARY|Test unit written|#[0-9]+ in ' "$log" | head -40 || true
  fi
done
exit $failed
