# bash completion for commprof (docs/cli.md#shell-completion). Installed by `cmake --install` as
# share/bash-completion/completions/commprof; or `source` it. The commands and each command's
# options are read from `commprof help` and `commprof COMMAND --help` when asked, so they are
# never out of date with the commprof being completed.

# The commands of the commprof at $1 (`help` left out).
_commprof_commands() {
  "$1" help 2>/dev/null | awk '/^Subcommands:/ { listing = 1; next } listing && /^  [a-z]/ { print $1 }' |
    grep -vx help
}

# The option names of `$1 $2... --help`, one per line ("-o", "--output", "--stacks").
_commprof_options() {
  local exe=$1
  shift
  "$exe" "$@" --help 2>/dev/null | awk '/^  -/ { print $1 }' | tr ',' '\n' | sed 's/\[.*//'
}

# The values of an option shown as "--name a|b|c" in the help of `$2...` ($1: the commprof).
_commprof_choices() {
  local exe=$1 option=$2
  shift 2
  "$exe" "$@" --help 2>/dev/null | awk -v opt="$option" '
    /^  -/ { n = split($1, names, ","); for (i = 1; i <= n; ++i) if (names[i] == opt && $2 ~ /\|/) {
               v = $2; sub(/=.*/, "", v); gsub(/\|/, " ", v); print v } }'
}

_commprof() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
  local exe=${COMP_WORDS[0]} i
  COMPREPLY=()
  # After "--" the words are the job's (commprof run ... -- LAUNCHER ARGS...): commands, then files.
  for ((i = 1; i < COMP_CWORD; i++)); do
    if [[ ${COMP_WORDS[i]} == -- ]]; then
      if ((COMP_CWORD == i + 1)); then
        mapfile -t COMPREPLY < <(compgen -c -- "$cur")
      else
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
      fi
      return 0
    fi
  done
  if ((COMP_CWORD == 1)); then
    mapfile -t COMPREPLY < <(compgen -W "$(_commprof_commands "$exe") help --help --version --help-env" -- "$cur")
    return 0
  fi
  local command=(${COMP_WORDS[1]})
  if [[ ${COMP_WORDS[1]} == help ]]; then
    ((COMP_CWORD == 2)) && mapfile -t COMPREPLY < <(compgen -W "$(_commprof_commands "$exe")" -- "$cur")
    return 0
  fi
  # A command with commands of its own (commprof import kineto).
  local nested
  nested=$("$exe" "${command[@]}" --help 2>/dev/null | awk '/^Subcommands:/ { listing = 1; next }
                                                             listing && /^  [a-z]/ { print $1 }')
  if [[ -n $nested ]]; then
    if ((COMP_CWORD == 2)); then
      mapfile -t COMPREPLY < <(compgen -W "$nested --help" -- "$cur")
      return 0
    fi
    command+=("${COMP_WORDS[2]}")
  fi
  if [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_commprof_options "$exe" "${command[@]}")" -- "$cur")
    return 0
  fi
  if [[ $prev == -* ]]; then
    local choices
    choices=$(_commprof_choices "$exe" "$prev" "${command[@]}")
    if [[ -n $choices ]]; then
      mapfile -t COMPREPLY < <(compgen -W "$choices" -- "$cur")
      return 0
    fi
  fi
  mapfile -t COMPREPLY < <(compgen -f -- "$cur")
  return 0
}

complete -o filenames -F _commprof commprof
