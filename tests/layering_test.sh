#!/usr/bin/env bash
# tests/layering_test.sh: runs the proof of the layering that
# docs/contributing.md gives under the heading "The layering, checked". Every
# command of the ```sh block after that heading must print nothing (on stdout
# or stderr); the test fails, showing each command that printed and what it
# printed, when one does. The document is the proof and this runs it, so the
# two cannot drift apart. ctest runs it as `layering` (tests/CMakeLists.txt).
#
# A check that prints nothing because it can never print would pass for
# ever, so each command must come after a "# control: COMMAND" comment that
# breaks its rule. Each check is also run in a scratch copy of the tree:
# there it must print nothing as in the tree itself, and then, once its
# control has run in that copy, it must print. A check without a control,
# or one its control does not make print, fails the test.
#
#   tests/layering_test.sh [DOC]    DOC: another document to take the block
#                                   from (default docs/contributing.md)
#
# Commands run with bash from the repository root (this script's parent
# directory), one at a time; a line ending in '\' continues on the next, and
# blank lines and other '#' comment lines are skipped. Exit codes are not
# looked at: `grep ... | grep -v ...` exits 1 exactly when it holds.
set -uo pipefail

root="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
doc="$(realpath -- "${1:-$root/docs/contributing.md}")"
cd "$root" || exit 1

if [[ ! -r $doc ]]; then
  echo "layering: cannot read $doc"
  exit 1
fi

# The first ```sh block under the heading, up to its closing fence; a next
# heading before any block means there is none.
block="$(awk '
  /^#+ +The layering, checked *$/ { in_section = 1; next }
  in_section && !in_block && /^#+ / { exit }
  in_section && !in_block && /^```sh *$/ { in_block = 1; next }
  in_block && /^```/ { exit }
  in_block { print }
' "$doc")"

commands=() controls=()
current="" control=""
nl=$'\n'
while IFS= read -r line; do
  if [[ -z $current && $line =~ ^[[:space:]]*#[[:space:]]*control:[[:space:]]*(.*)$ ]]; then
    control=${BASH_REMATCH[1]}
    continue
  fi
  current+="${current:+$nl}$line"
  [[ $line == *\\ ]] && continue
  if ! [[ $current =~ ^[[:space:]]*(#|$) ]]; then
    commands+=("$current")
    controls+=("$control")
    control=""
  fi
  current=""
done <<<"$block"
if [[ -n $current ]]; then
  commands+=("$current")
  controls+=("$control")
fi

if ((${#commands[@]} == 0)); then
  echo "layering: no commands found in a \`\`\`sh block under \"The layering, checked\" in $doc"
  exit 1
fi

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
# copy_tree DIR: the tree as the checks see it (sources and CMake files;
# not builds, git or node_modules).
copy_tree() {
  mkdir -p "$1"
  tar -C "$root" --exclude='./build*' --exclude=./.git --exclude=node_modules -cf - . | tar -C "$1" -xf -
}

said() { if [[ -n $1 ]]; then echo something; else echo nothing; fi; }

failed=0
for i in "${!commands[@]}"; do
  cmd=${commands[i]} control=${controls[i]}
  out="$(bash -c "$cmd" 2>&1)"
  if [[ -n $out ]]; then
    failed=$((failed + 1))
    printf 'layering rule broken; this command printed what it must not:\n  %s\n%s\n\n' \
      "$cmd" "$out"
    continue
  fi
  if [[ -z $control ]]; then
    failed=$((failed + 1))
    printf 'layering check without a "# control:" line before it (nothing shows it could fail):\n  %s\n\n' "$cmd"
    continue
  fi
  copy="$scratch/$i"
  copy_tree "$copy"
  before="$(cd "$copy" && bash -c "$cmd" 2>&1)"
  control_out="$(cd "$copy" && bash -c "$control" 2>&1)" || {
    failed=$((failed + 1))
    printf 'layering control failed to run:\n  %s\n%s\n\n' "$control" "$control_out"
    continue
  }
  after="$(cd "$copy" && bash -c "$cmd" 2>&1)"
  rm -rf "$copy"
  if [[ -n $before || -z $after ]]; then
    failed=$((failed + 1))
    printf 'layering check does not catch its control (in a copy of the tree it printed %s before and %s after it):\n  control: %s\n  check:   %s\n\n' \
      "$(said "$before")" "$(said "$after")" "$control" "$cmd"
  fi
done

if ((failed)); then
  echo "layering: $failed of ${#commands[@]} checks failed (rules: $doc, \"The layering, checked\")"
  exit 1
fi
echo "layering: all ${#commands[@]} checks printed nothing, and each printed once its control broke its rule"
