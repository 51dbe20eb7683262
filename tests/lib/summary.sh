# The closing summary of tests/run.sh: each stage's passed, failed and
# skipped tests, or NOT RUN and why; the machine conditions the run lacked;
# every skipped test with its verdict (tests/lib/skips.sh); then the one
# closing line, "summary: N passed, N failed, N skipped".
# shellcheck shell=bash

# The stage tables tests/run.sh fills: passed, failed, skipped and
# not_run_why, by stage; $skips_file gets every skipped test.
record() { passed[$1]=$2 failed[$1]=$3 skipped[$1]=${4:-0}; }
not_run() { not_run_why[$1]=$2; }

# record_counts STAGE RUNNER LOG EXIT: STAGE's counts as RUNNER's closing
# lines give them (RUNNER_counts, tests/lib/counts.sh), and its skipped tests
# by name into $skips_file. What the counts do not show still fails: a log
# without its closing lines, an exit code that says failure, a stage that
# ran no test, skips the log does not name.
record_counts() {
  local stage=$1 runner=$2 log=$3 rc=$4 counts p f s named
  if counts=$("${runner}_counts" "$log"); then
    read -r p f s <<<"$counts"
  else
    p=0 f=1 s=0
  fi
  named=$("${runner}_skipped" "$log")
  if [[ -n $named ]]; then
    sed "s/^/$stage\t/" <<<"$named" >>"$skips_file"
    named=$(wc -l <<<"$named")
  else
    named=0
  fi
  if ((named < s)); then
    printf '%s\t(%d tests skipped without their names in %s)\t\n' "$stage" $((s - named)) "$log" >>"$skips_file"
  fi
  if ((p + f + s == 0)); then
    echo "$stage: ran no test"
    f=1
  fi
  if ((rc != 0 && f == 0)); then
    echo "$stage: exited $rc, though its log counts no failure"
    f=1
  fi
  record "$stage" "$p" "$f" "$s"
}

# failed_tests LOG: what failed in LOG, by name with why: TAP's failures with
# the 12 lines after each; ctest's (its closing list) each with the first
# lines of its output from gtest's failure or a sanitizer's report on
# (ctest_why); pytest's from its short summary ("FAILED file::test -
# message", "ERROR ..." for a fixture's setup or teardown), which pytest
# prints when run with -rfE; tests/packages.sh's "packages NAME: FAILED (why)"
# lines with the 8 lines before (a check that failed says why above its
# line, "see above"); tests/fuzz/run-fuzzers.sh's "fuzz TARGET: FAILED" with the lines
# of the crash log it prints after. At most 60 lines.
failed_tests() {
  {
    grep -E -A 12 '^not ok ' "$1"
    grep -E -B 8 '^packages [a-z_]+: FAILED' "$1"
    grep -E -A 12 '^fuzz [a-z_]+: FAILED' "$1"
    grep -E '^[[:space:]]*[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess aborted|Exception|Not Run)\)$' "$1" |
      while IFS= read -r line; do
        printf '%s\n' "$line"
        ctest_why "$1" "$(sed -E 's/^[[:space:]]*[0-9]+ - (.*) \([^)]*\)$/\1/' <<<"$line")"
      done
    grep -E '^(FAILED|ERROR) [^ ]+::' "$1"
  } | head -n 60
}

# ctest_why LOG NAME: up to 8 lines of NAME's output in LOG (ctest
# --output-on-failure prints it after the test's result line, until the next
# test's line), from the first that says why: gtest's "Failure", a
# sanitizer's "ERROR:" or "runtime error", a C++ terminate. Indented.
ctest_why() {
  awk -v name="$2" '
    / Test +#[0-9]+: / { mine = index($0, ": " name " ") > 0; why = 0; next }
    /^ +Start +[0-9]+: / { mine = 0; next }
    mine && !why && /Failure$|ERROR: |runtime error|terminate called/ { why = 1; n = 0 }
    mine && why && n++ < 8 { print "    " $0 }
  ' "$1"
}

# read_floors FILE: fills the floor table (stage -> the fewest tests it may
# count) from FILE's "STAGE MINIMUM" lines; # starts a comment. Returns 1,
# naming the line, when one cannot be read.
declare -A floor=()
read_floors() {
  local line stage minimum rest
  floor=()
  while IFS= read -r line; do
    line=${line%%#*}
    read -r stage minimum rest <<<"$line"
    [[ -z $stage ]] && continue
    if [[ -n $rest || ! $minimum =~ ^[0-9]+$ ]]; then
      echo "read_floors: cannot read \"$line\" in $1 (STAGE MINIMUM)"
      return 1
    fi
    floor[$stage]=$minimum
  done <"$1"
}

# print_summary: reads tests/run.sh's stages, passed, failed, skipped,
# not_run_why, floor, in_ci, skips_file and MISSING_CONDITIONS. Returns 1
# when the run fails: a failure in any stage, a stage that counted fewer
# tests than its floor (tests/floors.txt), a skip the allowlist does not
# allow here, or (under CI) a stage NOT RUN.
print_summary() {
  local stage total_p=0 total_f=0 total_s=0 rc=0 not_run_count=0 refused=0 counted short=0
  local -a why_failed=() below=()
  printf '%-16s %8s %8s %8s %8s\n' stage passed failed skipped floor
  for stage in "${stages[@]}"; do
    if [[ -n ${not_run_why[$stage]:-} || -z ${passed[$stage]:-} ]]; then
      printf '%-16s NOT RUN (%s)\n' "$stage" "${not_run_why[$stage]:-no result recorded}"
      not_run_count=$((not_run_count + 1))
      continue
    fi
    printf '%-16s %8d %8d %8d %8s\n' "$stage" "${passed[$stage]}" "${failed[$stage]}" "${skipped[$stage]}" \
      "${floor[$stage]:--}"
    total_p=$((total_p + passed[$stage]))
    total_f=$((total_f + failed[$stage]))
    total_s=$((total_s + skipped[$stage]))
    # Skipped tests count towards the floor: they are there, and the
    # allowlist judges each skip on its own.
    counted=$((passed[$stage] + failed[$stage] + skipped[$stage]))
    if [[ -n ${floor[$stage]:-} ]] && ((counted < floor[$stage])); then
      below+=("$stage counted $counted, below its floor of ${floor[$stage]}")
    fi
  done
  ((total_f)) && why_failed+=("$total_f failed")
  if ((${#below[@]})); then
    printf '\nstages that ran fewer tests than tests/floors.txt says they have (a test removed needs its\n'
    printf 'floor lowered in the same commit; anything else means the stage did not run all of them):\n'
    printf '  %s\n' "${below[@]}"
    short=${#below[@]}
    why_failed+=("$short stages below their floor")
  fi
  if ((${#MISSING_CONDITIONS[@]})); then
    printf '\n!!! This machine lacks %s: the tests that need it did not test anything here.\n' \
      "${MISSING_CONDITIONS[*]}"
  fi
  if [[ -s $skips_file ]]; then
    printf '\nskipped tests (tests/skip_allowlist.txt):\n'
  fi
  check_skips tests/skip_allowlist.txt "$skips_file" "${MISSING_CONDITIONS[@]}"
  refused=$SKIPS_REFUSED
  ((refused)) && why_failed+=("$refused skipped tests not allowed to skip on this machine")
  if ((in_ci && not_run_count)); then
    why_failed+=("$not_run_count stages NOT RUN under CI")
  fi
  echo
  if ((${#why_failed[@]})); then
    rc=1
    printf 'the run FAILED: %s\n' "$(IFS=';'; echo "${why_failed[*]}" | sed 's/;/; /g')"
    # The closing line counts every reason as a failure, so that it never
    # reads as a pass when the run did not pass.
    total_f=$((total_f + refused + short + (in_ci ? not_run_count : 0)))
  fi
  echo "summary: $total_p passed, $total_f failed, $total_s skipped"
  return "$rc"
}
