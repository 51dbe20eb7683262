#!/usr/bin/env bash
# Long fuzzing runs, outside CI: every target for HOURS (default 1) each,
# JOBS at a time (default: all cores), keeping what the fuzzers learn across
# runs in BUILD/fuzz-corpus (see run-fuzzers.sh). At the end, the corpus of
# each target is merged into a minimal set in BUILD/fuzz-merged/TARGET: copy
# small, new-coverage files from there into tests/fuzz/corpus/TARGET when they
# are worth keeping (keep the tree's corpus under 200 KB).
#
#   tests/fuzz/run-long.sh [-h HOURS] [-j JOBS] [-b BUILD] [TARGET...]
#
# A crash stops its target and leaves BUILD/fuzz-artifacts/TARGET/crash-*.
# Reproduce:  BUILD/bin/TARGET_fuzzer CRASH_FILE
# Minimize:   BUILD/bin/TARGET_fuzzer -minimize_crash=1 -runs=100000 CRASH_FILE
set -euo pipefail

fuzz_dir="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd -- "$fuzz_dir/../.." && pwd)"
hours=1 jobs=$(nproc) build="$repo/build-asan"
while getopts "h:j:b:" opt; do
  case $opt in
    h) hours=$OPTARG ;;
    j) jobs=$OPTARG ;;
    b) build=$OPTARG ;;
    *) sed -n '2,13p' "$0" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
targets=("$@")

seconds=$(awk -v h="$hours" 'BEGIN { printf "%d", h * 3600 }')
rc=0
"$fuzz_dir/run-fuzzers.sh" -t "$seconds" -j "$jobs" -b "$build" "${targets[@]}" || rc=$?
# Every target run-fuzzers.sh ran when none was named: each that has a corpus.
if ((${#targets[@]} == 0)); then
  mapfile -t targets < <(find "$build/fuzz-corpus" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort)
fi

for t in "${targets[@]}"; do
  merged="$build/fuzz-merged/$t"
  rm -rf "$merged" && mkdir -p "$merged"
  "$build/bin/${t}_fuzzer" -merge=1 "$merged" "$fuzz_dir/corpus/$t" "$build/fuzz-corpus/$t" \
    >"$build/fuzz-merge-$t.log" 2>&1 || true
  echo "merged $t: $(find "$merged" -type f | wc -l) files, $(du -sk "$merged" | cut -f1) KB in $merged"
done
exit $rc
