# shellcheck shell=bash
# Sourced by the Soft-RoCE VM benchmarks: which processes and threads play
# which part, for the samplers and the tracers.

# tree_pids PID: PID and every process below it (timeout starts the tool,
# and a tool may start more processes).
tree_pids() {
  local p=$1 c t
  echo "$p"
  for t in /proc/"$p"/task/*; do
    for c in $(cat "$t/children" 2>/dev/null); do tree_pids "$c"; done
  done
}

# roles NAME ROLE=PID...: every thread of each process and of the processes
# below it (timeout's child, anything a tool starts), and what their fds are, into
# $dir/NAME.roles: "role ROLE PID TID ON_CPU_NS COMM" and "fd ROLE FD TARGET".
roles() {
  local name=$1 kv role pid p t named=" "
  shift
  : >"$dir/$name.roles"
  for kv in "$@"; do named+="${kv#*=} "; done
  for kv in "$@"; do
    role=${kv%%=*} pid=${kv#*=}
    for p in $(tree_pids "$pid"); do
      # A process named for a role of its own is not also its parent's.
      [[ $p != "$pid" && $named == *" $p "* ]] && continue
      [[ $(cat /proc/"$p"/comm 2>/dev/null) == timeout ]] && continue
      for t in /proc/"$p"/task/*; do
        echo "role $role $p ${t##*/} $(cut -d' ' -f1 "$t/schedstat") $(cat "$t/comm")"
      done >>"$dir/$name.roles"
      find /proc/"$p"/fd -maxdepth 1 -type l -printf "fd $role %f %l\n" 2>/dev/null >>"$dir/$name.roles" || true
    done
  done
}

