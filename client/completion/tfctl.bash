# Bash completion for tfctl. Load it with
#   source client/completion/tfctl.bash
# or install it as /etc/bash_completion.d/tfctl (or into
# ~/.local/share/bash-completion/completions/tfctl).
#
# Completes subcommands, their flags and the values of -o, --state and
# --task; experiment ids are asked from the service (`tfctl list`), so they
# complete only when it can be reached.

_tfctl_experiment_ids() {
  # `tfctl list -o name` prints one id a line, running experiments first.
  tfctl list --limit 200 -o name 2>/dev/null
}

_tfctl() {
  local cur prev command i
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD - 1]}
  local commands="submit status list events logs metrics cancel resume delete token login sweep"
  local global_flags="--url --token --cacert --help"

  command=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    case ${COMP_WORDS[i]} in
      --) return 0 ;;  # the experiment's own command: nothing to offer
      --url | --token | --cacert) ((i++)) ;;
      -*) ;;
      *)
        command=${COMP_WORDS[i]}
        break
        ;;
    esac
  done

  case $prev in
    -o | --output)
      local formats="table json yaml"
      [[ $command == list ]] && formats+=" name"
      mapfile -t COMPREPLY < <(compgen -W "$formats" -- "$cur")
      return 0
      ;;
    --state)
      mapfile -t COMPREPLY < <(compgen -W "running starting restarting queued succeeded failed cancelled" -- "$cur")
      return 0
      ;;
    --task)
      mapfile -t COMPREPLY < <(compgen -W "chief: ps: worker: evaluator: batch" -- "$cur")
      compopt -o nospace 2>/dev/null
      return 0
      ;;
    --cacert)
      compopt -o filenames 2>/dev/null
      mapfile -t COMPREPLY < <(compgen -f -- "$cur")
      return 0
      ;;
    --url | --token | --id | --ps | --workers | --nodes | --tasks-per-node | --partition | --time | \
      --limit | --interval | --attempt | --tail | --tag | --user | --fingerprint)
      return 0
      ;;
  esac

  if [[ -z $command ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$commands $global_flags" -- "$cur")
    return 0
  fi

  local flags
  case $command in
    submit) flags="--id --ps --workers --nodes --tasks-per-node --partition --time --dry-run --wait -o --output" ;;
    status) flags="--watch --interval -o --output" ;;
    list) flags="--state --limit -o --output" ;;
    events | cancel) flags="-o --output" ;;
    logs) flags="--task --attempt --tail --follow -f" ;;
    metrics) flags="--tag -o --output" ;;
    resume) flags="--time-limit --set --wait -o --output" ;;
    delete) flags="--files -o --output" ;;
    login) flags="--fingerprint --yes --no-token" ;;
    token)
      if [[ " ${COMP_WORDS[*]:1:COMP_CWORD-1} " != *" create "* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "create" -- "$cur")
        return 0
      fi
      flags="--user --admin"
      ;;
    sweep)
      local verbs="submit status list cancel delete"
      local verb="" w
      for w in "${COMP_WORDS[@]:1:COMP_CWORD-1}"; do
        [[ " $verbs " == *" $w "* ]] && verb=$w
      done
      if [[ -z $verb ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$verbs" -- "$cur")
        return 0
      fi
      if [[ $cur != -* && $verb == submit ]]; then
        compopt -o filenames 2>/dev/null
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        return 0
      fi
      if [[ $cur != -* && ($verb == status || $verb == cancel || $verb == delete) ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$(tfctl sweep list -o json 2>/dev/null |
          sed -n 's/.*"id": *"\([^"]*\)".*/\1/p')" -- "$cur")
        return 0
      fi
      flags="-o --output"
      [[ $verb == delete ]] && flags="--files -o --output"
      ;;
    *) return 0 ;;
  esac

  if [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$flags $global_flags" -- "$cur")
  elif [[ $command == submit ]]; then
    # Spec files, and directories on the way to them.
    local path
    COMPREPLY=()
    while IFS= read -r path; do
      if [[ -d $path || $path == *.yaml || $path == *.yml || $path == *.json ]]; then
        COMPREPLY+=("$path")
      fi
    done < <(compgen -f -- "$cur")
    compopt -o filenames 2>/dev/null
  elif [[ $command != list ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_tfctl_experiment_ids)" -- "$cur")
  fi
  return 0
}

complete -F _tfctl tfctl
