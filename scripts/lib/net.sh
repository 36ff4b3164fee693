# shellcheck shell=bash
# Sourced by the scripts that build test networks (network namespaces, the
# Soft-RoCE VM's veth pairs): nothing is sent before the kernel is shown to
# route it where the script meant.
#
#   ferry_check_route [--netns NS] DEV TO [ROUTE_GET_ARG...]
#       `ip [-n NS] route get TO ROUTE_GET_ARGS` (e.g. from ADDR, or
#       ipproto tcp dport PORT) must leave through DEV. Returns 1 with the
#       route the kernel chose on stderr otherwise; prints nothing when it does.

ferry_check_route() {
  local -a in_netns=()
  if [[ $1 == --netns ]]; then
    in_netns=(-n "$2")
    shift 2
  fi
  local dev=$1 to=$2 got
  shift 2
  got=$(ip "${in_netns[@]}" route get "$to" "$@") || return 1
  if [[ "$got " != *" dev $dev "* ]]; then
    echo "route${in_netns:+ in ${in_netns[1]}} to $to${*:+ ($*)} does not use $dev: $got" >&2
    return 1
  fi
}
