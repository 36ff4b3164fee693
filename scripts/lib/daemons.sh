# shellcheck shell=bash
# Sourced by every script and test that runs ferryds of its own (benchmarks,
# the Soft-RoCE VM checks, the demo): start one and wait for its sockets,
# stop every one started, find free ports. The one place that knows how a
# ferryd is started and when it is up.
#
#   ferry_start_daemon [OPTION...] FERRYD DIR [FERRYD_ARG...]
#       ferryd --runtime-dir DIR FERRYD_ARGS in the background, its output
#       in DIR/ferryd.log; waits until DIR/ferryd.sock and DIR/control.sock
#       exist. Its pid is appended to ferry_daemon_pids and left in
#       $ferry_daemon_pid. Returns 1 (the log's tail on stderr) when it
#       exits or does not come up in time. Options:
#         --log FILE      its output there instead (e.g. a results folder)
#         --wait SECONDS  how long it may take to come up (default 10)
#         --netns NS      run it in network namespace NS (ip netns exec)
#         --prefix WORDS  words put in front of it, split on blanks (e.g.
#                         "taskset -c 1"); after --netns's
#         --port PORT     also wait until a TCP listener on PORT shows (in NS)
#         --show          print the command line on stderr first
#       FERRY_DAEMON_PREFIX, when set, is a --prefix for every daemon.
#   ferry_stop_daemons [GRACE_S]
#       SIGTERM to every daemon started, then waits for each to exit (SIGKILL
#       after GRACE_S seconds, default 5).
#   ferry_program BUILD NAME
#       The path of program NAME (ferryd, ferryctl, ferry-bench, ferry-ps) in
#       the build folder BUILD, on stdout; returns 1, saying so on stderr,
#       when it is not built there.
#   ferry_free_port [COUNT]
#       A port on 127.0.0.1 with COUNT (default 4) free ports from it on, for
#       a ferryd whose engine i listens on PORT+i.

# Sourcing it again (two libraries that both need it) forgets no daemon.
[[ -n ${ferry_daemon_pids+set} ]] || ferry_daemon_pids=()
ferry_daemon_pid=${ferry_daemon_pid:-}

# shellcheck disable=SC2206 # a prefix is words on purpose
ferry_start_daemon() {
  local log='' wait_s=10 netns='' port='' show=0
  local -a pre=()
  [[ -n ${FERRY_DAEMON_PREFIX:-} ]] && pre=($FERRY_DAEMON_PREFIX)
  while [[ $# -gt 0 ]]; do
    case $1 in
      --log) log=$2; shift 2 ;;
      --wait) wait_s=$2; shift 2 ;;
      --netns) netns=$2; shift 2 ;;
      --prefix) pre+=($2); shift 2 ;;
      --port) port=$2; shift 2 ;;
      --show) show=1; shift ;;
      *) break ;;
    esac
  done
  local ferryd=$1 dir=$2
  shift 2
  mkdir -p "$dir"
  log=${log:-$dir/ferryd.log}
  local -a netns_cmd=()
  [[ -z $netns ]] || netns_cmd=(ip netns exec "$netns")
  local -a cmd=("${netns_cmd[@]}" "${pre[@]}" "$ferryd" --runtime-dir "$dir" "$@")
  ((show)) && echo "+ ${cmd[*]}" >&2
  # A simple command in the background: $! is ferryd itself (ip netns exec
  # and taskset exec it), the process ferry_stop_daemons signals.
  "${cmd[@]}" >"$log" 2>&1 &
  ferry_daemon_pid=$!
  ferry_daemon_pids+=("$ferry_daemon_pid")
  local deadline=$((SECONDS + wait_s))
  while ((SECONDS <= deadline)); do
    if [[ -S $dir/ferryd.sock && -S $dir/control.sock ]] &&
      { [[ -z $port ]] || [[ -n $("${netns_cmd[@]}" ss -Hltn "sport = :$port") ]]; }; then
      return 0
    fi
    kill -0 "$ferry_daemon_pid" 2>/dev/null || break
    sleep 0.05 # polling a condition with a deadline
  done
  echo "ferryd in $dir did not come up${port:+ (listening on port $port)}:" >&2
  tail -20 "$log" >&2
  return 1
}

ferry_stop_daemons() {
  local pid i polls=$((${1:-5} * 20))
  for pid in "${ferry_daemon_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${ferry_daemon_pids[@]}"; do
    for ((i = 0; i < polls; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  ferry_daemon_pids=()
}

ferry_program() {
  local path
  case $2 in
    ferryd) path=$1/daemon/ferryd ;;
    ferryctl) path=$1/control/ferryctl ;;
    ferry-bench) path=$1/tests/perf/ferry-bench ;;
    ferry-ps) path=$1/client/examples/ps/ferry-ps ;;
    *) echo "ferry_program: no program named $2" >&2; return 2 ;;
  esac
  [[ -x $path ]] || { echo "$path is not built (ninja -C $1)" >&2; return 1; }
  echo "$path"
}

ferry_free_port() {
  local count=${1:-4}
  python3 - "$count" <<'PY'
import random, socket, sys
count = int(sys.argv[1])
for _ in range(500):
    base = random.randint(20000, 32000 - count)
    ok = True
    for p in range(base, base + count):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
        except OSError:
            ok = False
        finally:
            s.close()
        if not ok:
            break
    if ok:
        print(base)
        sys.exit(0)
sys.exit("no free port range found")
PY
}
