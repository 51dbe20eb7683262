# Which skipped tests a run may accept: tests/run.sh sources this. A test
# that skipped tested nothing, whatever the runner's exit code says, so a
# skip passes only when tests/skip_allowlist.txt names the test and the
# machine condition it needs (tests/lib/machine.sh), and this machine lacks
# that condition. Anything else fails the run: a new skip, or a listed test
# that skipped on a machine that has what it needs.
# shellcheck shell=bash

# check_skips ALLOWLIST SKIPS MISSING...: SKIPS has one "STAGE<TAB>ID<TAB>REASON"
# line per skipped test; MISSING are the conditions this machine lacks.
# Prints a verdict per skip, and sets SKIPS_REFUSED to the number refused
# (an unreadable allowlist entry counts as one).
check_skips() {
  local allowlist=$1 skips=$2
  shift 2
  local -a missing=("$@")
  local -A condition_of=()
  local line id condition why stage reason m lacking known
  SKIPS_REFUSED=0
  while IFS= read -r line; do
    [[ $line =~ ^[[:space:]]*(#|$) ]] && continue
    IFS='|' read -r id condition why <<<"$line"
    id=$(echo "$id" | sed 's/^ *//; s/ *$//')
    condition=$(echo "$condition" | sed 's/^ *//; s/ *$//')
    known=0
    for m in "${machine_conditions[@]}"; do [[ $m == "$condition" ]] && known=1; done
    if [[ -z $id || -z $condition || -z ${why// /} ]] || ((!known)); then
      echo "  $allowlist: cannot read \"$line\" (ID | CONDITION | WHY, CONDITION one of ${machine_conditions[*]})"
      SKIPS_REFUSED=$((SKIPS_REFUSED + 1))
      continue
    fi
    condition_of[$id]=$condition
  done <"$allowlist"
  [[ -s $skips ]] || return 0
  while IFS=$'\t' read -r stage id reason; do
    condition=${condition_of[$id]:-}
    lacking=0
    for m in "${missing[@]}"; do [[ $m == "$condition" ]] && lacking=1; done
    if [[ -z $condition ]]; then
      printf '  REFUSED  %-13s %s: not on %s (skipped: %s)\n' "$stage" "$id" "$allowlist" "${reason:-no reason given}"
      SKIPS_REFUSED=$((SKIPS_REFUSED + 1))
    elif ((!lacking)); then
      printf '  REFUSED  %-13s %s: allowed only without %s, which this machine has\n' "$stage" "$id" "$condition"
      SKIPS_REFUSED=$((SKIPS_REFUSED + 1))
    else
      printf '  allowed  %-13s %s: this machine lacks %s\n' "$stage" "$id" "$condition"
    fi
  done <"$skips"
}
