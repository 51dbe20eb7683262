#!/usr/bin/env bash
# tests/layering_test.sh: runs the proof of the layering that
# docs/contributing.md gives under the heading "The layering, checked". Every
# command of the ```sh block after that heading must print nothing (on stdout
# or stderr); the test fails, showing each command that printed and what it
# printed, when one does. The document is the proof and this runs it, so the
# two cannot drift apart. ctest runs it as `layering` (tests/CMakeLists.txt).
#
#   tests/layering_test.sh [DOC]    DOC: another document to take the block
#                                   from (default docs/contributing.md)
#
# Commands run with bash from the repository root (this script's parent
# directory), one at a time; a line ending in '\' continues on the next, and
# blank lines and '#' comment lines are skipped. Exit codes are not looked
# at: `grep ... | grep -v ...` exits 1 exactly when it holds.
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

commands=()
current=""
nl=$'\n'
while IFS= read -r line; do
  current+="${current:+$nl}$line"
  [[ $line == *\\ ]] && continue
  [[ $current =~ ^[[:space:]]*(#|$) ]] || commands+=("$current")
  current=""
done <<<"$block"
[[ -n $current ]] && commands+=("$current")

if ((${#commands[@]} == 0)); then
  echo "layering: no commands found in a \`\`\`sh block under \"The layering, checked\" in $doc"
  exit 1
fi

failed=0
for cmd in "${commands[@]}"; do
  out="$(bash -c "$cmd" 2>&1)"
  if [[ -n $out ]]; then
    failed=$((failed + 1))
    printf 'layering rule broken; this command printed what it must not:\n  %s\n%s\n\n' \
      "$cmd" "$out"
  fi
done

if ((failed)); then
  echo "layering: $failed of ${#commands[@]} checks failed (rules: $doc, \"The layering, checked\")"
  exit 1
fi
echo "layering: all ${#commands[@]} checks printed nothing"
