#!/usr/bin/env bash
# tsan_control_test.sh PROGRAM SUPPRESSIONS: runs the TSan control program
# (tsan_grpc_control.cc) with the suppressions the concurrency tests use and
# passes only when ThreadSanitizer reports its race in a gRPC reaction of
# ours. If this fails, the suppressions hide races in our own gRPC code.
set -uo pipefail
program=$1 suppressions=$2
out=$(TSAN_OPTIONS="suppressions=$suppressions:halt_on_error=0:exitcode=66" "$program" 2>&1)
rc=$?
# The race's own summary line: in RacyReactor::OnReadDone, at its line of
# tsan_grpc_control.cc (the symbolizer may leave the class out).
if ((rc == 66)) && grep -qE '^SUMMARY: ThreadSanitizer: data race .*tsan_grpc_control\.cc:[0-9]+ in (.*::)?OnReadDone' <<<"$out"; then
  echo "tsan control: the race in RacyReactor::OnReadDone was reported (exit $rc)"
  exit 0
fi
echo "tsan control: FAILED: TSan did not report the race in RacyReactor::OnReadDone with $suppressions (exit $rc)"
echo "$out" | tail -n 40
exit 1
