# What each test runner ran, read from its log: tests/run.sh sources this
# (tests/lib/counts_test.sh checks it on captured logs). A runner's exit code
# alone cannot tell a skip from a pass, so every count is read from the
# runner's own closing lines, and every skipped test is named.
#
#   *_counts LOG   prints "PASSED FAILED SKIPPED"; when the log has no
#                  closing line it can read, says why on stderr and returns 1
#                  (the caller counts that as a failure: an unread log is not
#                  a pass).
#   *_skipped LOG  prints one line per test that did not run:
#                  "ID<TAB>REASON" (REASON may be empty).
# shellcheck shell=bash

# pytest's closing line, e.g. "=== 3 failed, 10 passed, 1 skipped, 2 errors
# in 12.30s (0:00:12) ===": every "N word" of it is counted, errors as
# failures (an error is a test whose setup or teardown broke), xfailed and
# deselected as skipped (they did not run as tests), xpassed as failed. A
# word it does not know makes the line unreadable rather than ignored.
pytest_counts() {
  local line
  line=$(grep -E '^=+ .* in [0-9.]+s( \([0-9:]+\))? =+$' "$1" | tail -n 1)
  if [[ -z $line ]]; then
    echo "pytest_counts: no closing line in $1 (pytest did not finish?)" >&2
    return 1
  fi
  awk -v line="$line" -v file="$1" 'BEGIN {
    sub(/^=+ /, "", line); sub(/ in [0-9.]+s( \([0-9:]+\))? =+$/, "", line)
    p = f = s = 0
    if (line == "no tests ran") { print 0, 0, 0; exit 0 }
    n = split(line, parts, /, /)
    for (i = 1; i <= n; i++) {
      if (split(parts[i], w, " ") != 2 || w[1] !~ /^[0-9]+$/) bad = 1
      else if (w[2] == "passed") p += w[1]
      else if (w[2] ~ /^(failed|error|errors|xpassed)$/) f += w[1]
      else if (w[2] ~ /^(skipped|xfailed|deselected)$/) s += w[1]
      else if (w[2] !~ /^(warning|warnings|rerun)$/) bad = 1
      if (bad) { printf "pytest_counts: cannot read \"%s\" in the closing line of %s\n", parts[i], file > "/dev/stderr"; exit 1 }
    }
    print p, f, s
  }'
}

# pytest -v names each test on its own line ("ID SKIPPED (reason) [ 50%]");
# xfailed tests are listed too, as they did not run as tests either.
pytest_skipped() {
  sed -nE 's/^(.+::.+) (SKIPPED|XFAIL)( \((.*)\))? +\[ *[0-9]+%\]$/\1\t\4/p' "$1"
}

# ctest's closing lines: "95% tests passed, 3 tests failed out of 60", then
# "The following tests did not run:" with one "  12 - NAME (Skipped)" or
# "(Disabled)" line each. A skipped test (gtest's GTEST_SKIP, which
# gtest_discover_tests turns into ctest's Skipped) is inside "out of N" and
# counted among the passed percentage; a disabled one is outside it.
ctest_counts() {
  local total failed skipped disabled
  total=$(sed -nE 's/^[0-9]+% tests passed, [0-9]+ tests? failed out of ([0-9]+)$/\1/p' "$1" | tail -n 1)
  failed=$(sed -nE 's/^[0-9]+% tests passed, ([0-9]+) tests? failed out of [0-9]+$/\1/p' "$1" | tail -n 1)
  if [[ -z $total || -z $failed ]]; then
    echo "ctest_counts: no \"tests passed, N tests failed out of M\" line in $1 (ctest did not finish, or found no test)" >&2
    return 1
  fi
  skipped=$(ctest_skipped "$1" | grep -c $'\tSkipped$' || true)
  disabled=$(ctest_skipped "$1" | grep -c $'\tDisabled$' || true)
  echo "$((total - failed - skipped)) $failed $((skipped + disabled))"
}

ctest_skipped() {
  awk '
    /^The following tests did not run:$/ { listing = 1; next }
    listing && match($0, /^[ \t]+[0-9]+ - .* \((Skipped|Disabled)\)$/) {
      line = $0
      sub(/^[ \t]+[0-9]+ - /, "", line)
      reason = line
      sub(/ \((Skipped|Disabled)\)$/, "", line)
      sub(/^.* \(/, "", reason)
      sub(/\)$/, "", reason)
      printf "%s\t%s\n", line, reason
      next
    }
    listing { listing = 0 }
  ' "$1"
}

# node --test --test-reporter=tap, as node 20 writes it (tests/run.sh checks
# that node 20 is what runs): every test, subtests included, counted in the
# closing comments "# pass N", "# fail N", "# cancelled N", "# skipped N",
# "# todo N", which add up to "# tests N". Other node majors changed this
# output before (18 counted files as tests; 22 nests differently), so the
# reader refuses a log whose counts do not add up rather than guess.
node_counts() {
  awk -v file="$1" '
    /^# (tests|pass|fail|cancelled|skipped|todo) [0-9]+$/ { c[$2] = $3; seen[$2] = 1 }
    END {
      split("tests pass fail cancelled skipped todo", keys, " ")
      for (i in keys) if (!seen[keys[i]]) {
        printf "node_counts: no \"# %s N\" line in %s (node did not finish, or its TAP output changed)\n", keys[i], file > "/dev/stderr"
        exit 1
      }
      if (c["pass"] + c["fail"] + c["cancelled"] + c["skipped"] + c["todo"] != c["tests"]) {
        printf "node_counts: pass + fail + cancelled + skipped + todo != tests (%d) in %s\n", c["tests"], file > "/dev/stderr"
        exit 1
      }
      print c["pass"], c["fail"] + c["cancelled"], c["skipped"] + c["todo"]
    }' "$1"
}

# "ok 3 - NAME # SKIP reason" or "... # TODO reason", at any depth.
node_skipped() {
  sed -nE 's/^ *(not )?ok [0-9]+ - (.*) # (SKIP|TODO)( (.*))?$/\2\t\5/p' "$1"
}

# A gtest program run directly (not through ctest), as tests/compat.sh runs
# the Slurm adapter's tests: "[  PASSED  ] N tests.", "[  SKIPPED ] N test(s),
# listed below:", "[  FAILED  ] N test(s), listed below:". With
# --gtest_brief=1 gtest names neither (BriefUnitTestResultPrinter prints
# "[  SKIPPED ] N test." and "[  FAILED  ] N tests."): those are counted
# too, and record_counts then finds skips without their names, which no
# allowlist can allow.
gtest_counts() {
  local passed failed skipped
  passed=$(sed -nE 's/^\[  PASSED  \] ([0-9]+) tests?\.$/\1/p' "$1" | tail -n 1)
  if [[ -z $passed ]] && ! grep -q '^\[==========\] [0-9]* tests\{0,1\} from .* ran\.' "$1"; then
    echo "gtest_counts: no \"[==========] N tests ... ran.\" line in $1" >&2
    return 1
  fi
  failed=$(sed -nE 's/^\[  FAILED  \] ([0-9]+) tests?(, listed below:|\.)$/\1/p' "$1" | tail -n 1)
  skipped=$(sed -nE 's/^\[  SKIPPED \] ([0-9]+) tests?(, listed below:|\.)$/\1/p' "$1" | tail -n 1)
  echo "${passed:-0} ${failed:-0} ${skipped:-0}"
}

gtest_skipped() {
  sed -nE 's/^\[  SKIPPED \] ([A-Za-z0-9_]+\.[A-Za-z0-9_/]+)$/\1\t/p' "$1" | sort -u
}

# tests/compat.sh's parts, each counted: its ldd checks ("ldd ...: ok" or
# "FAILED" in its summary), the Slurm adapter's gtest program and the
# integration subset (pytest).
compat_counts() {
  local g p ldd_ok ldd_failed gp gf gs pp pf ps
  g=$(gtest_counts "$1") || return 1
  p=$(pytest_counts "$1") || return 1
  ldd_ok=$(grep -c '^ldd .*: ok$' "$1" || true)
  ldd_failed=$(grep -c '^ldd .*: FAILED$' "$1" || true)
  if ((ldd_ok + ldd_failed == 0)); then
    echo "compat_counts: no \"ldd ...: ok\" line in $1 (tests/compat.sh did not reach its summary?)" >&2
    return 1
  fi
  read -r gp gf gs <<<"$g"
  read -r pp pf ps <<<"$p"
  echo "$((ldd_ok + gp + pp)) $((ldd_failed + gf + pf)) $((gs + ps))"
}

compat_skipped() {
  gtest_skipped "$1"
  pytest_skipped "$1"
}

# tests/fuzz/run-fuzzers.sh: one "fuzz TARGET: ok" or "fuzz TARGET: FAILED"
# line per target.
fuzz_counts() { outcome_counts "$1" '^fuzz [a-z_]*: ' fuzz; }
fuzz_skipped() { :; }

# bench/run.sh --smoke: one "bench smoke SCRIPT: ok" or "... FAILED" line per
# script.
bench_counts() { outcome_counts "$1" '^bench smoke [a-z_]*\.sh: ' bench; }
bench_skipped() { :; }

# tests/packages.sh: one "packages CHECK: ok" or "... FAILED" line per check.
packages_counts() { outcome_counts "$1" '^packages [a-z_]*: ' packages; }
packages_skipped() { :; }

outcome_counts() {
  local ok bad
  ok=$(grep -c "${2}ok" "$1" || true)
  bad=$(grep -c "${2}FAILED" "$1" || true)
  if ((ok + bad == 0)); then
    echo "${3}_counts: no \"${2}ok\" or \"FAILED\" line in $1" >&2
    return 1
  fi
  echo "$ok $bad 0"
}
