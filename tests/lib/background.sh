# Builds that tests/run.sh runs in the background while the integration and
# end-to-end tests, which spend most of their time waiting on Slurm, leave a
# core idle. Sourced.
#
# The builds run under SCHED_IDLE (chrt --idle, sched(7)): the kernel runs
# them only on a core that nothing else wants, so the tests beside them run
# as if alone, while a build left unfinished when the tests end gets both
# cores. `nice 19` would not do: CFS still gives a nice-19 task a share of
# a busy core, enough to slow a test that races a time limit.
#
#   start_background NAME...  runs each NAME's function (bg_NAME), in the
#                             order given, in one background chain; each
#                             writes build/bg/NAME.log and, when it ends,
#                             build/bg/NAME.rc and build/bg/NAME.seconds
#   wait_background NAME      waits for NAME to end; prints how long the
#                             run waited for it; returns its exit code
#   stop_background           ends the chain and everything it started
# shellcheck shell=bash

bg_dir=build/bg # where the logs and exit codes go (lib_test.sh points it elsewhere)
bg_chain_pid=""

start_background() {
  local names=("$@")
  mkdir -p "$bg_dir"
  rm -f "$bg_dir"/*.rc "$bg_dir"/*.rc.part "$bg_dir"/*.seconds
  # Its own process group (job control on for this one fork), so that
  # stop_background ends the whole chain, whatever it has started.
  set -m
  (
    # The chain itself first, before it starts anything: SCHED_IDLE is
    # inherited across fork and exec.
    chrt --idle -p 0 "$BASHPID" >/dev/null ||
      echo "background: chrt --idle failed; the builds run at normal priority" >&2
    for name in "${names[@]}"; do
      started=$SECONDS
      rc=0
      "bg_$name" >"$bg_dir/$name.log" 2>&1 || rc=$?
      echo $((SECONDS - started)) >"$bg_dir/$name.seconds"
      # Whole or not at all: wait_background takes the file's existence for
      # the exit code's, and reads it at once.
      echo "$rc" >"$bg_dir/$name.rc.part" && mv "$bg_dir/$name.rc.part" "$bg_dir/$name.rc"
    done
  ) &
  bg_chain_pid=$!
  set +m
}

wait_background() {
  local name=$1 started=$SECONDS rc
  while [[ ! -f $bg_dir/$name.rc ]]; do
    if ! kill -0 "$bg_chain_pid" 2>/dev/null && [[ ! -f $bg_dir/$name.rc ]]; then
      echo "background: $name never finished (the chain ended without it)"
      return 1
    fi
    sleep 1
  done
  rc=$(cat "$bg_dir/$name.rc")
  echo "background: $name took $(cat "$bg_dir/$name.seconds") s (exit $rc); this run waited $((SECONDS - started)) s for it"
  if ((rc != 0)); then
    echo "background: $name failed; the end of $bg_dir/$name.log:"
    tail -n 40 "$bg_dir/$name.log"
  fi
  return "$rc"
}

stop_background() {
  [[ -n $bg_chain_pid ]] || return 0
  kill -- -"$bg_chain_pid" 2>/dev/null || true
}
