# shellcheck shell=bash
# Sourced by scripts and tests that run their own ferryds: start one and wait
# for its sockets, stop every one started, find free ports.
#
#   ferry_start_daemon FERRYD DIR [FERRYD_ARG...]
#       ferryd --runtime-dir DIR ARGS, log in DIR/ferryd.log; waits up to
#       10 s for ferryd.sock and control.sock. Its pid is appended to
#       ferry_daemon_pids and printed in $ferry_daemon_pid. Returns 1 (the
#       log's tail on stderr) when it does not come up.
#       FERRY_DAEMON_PREFIX: words put in front (e.g. "ip netns exec NS").
#   ferry_stop_daemons
#       SIGTERM to every daemon started, then waits for each (SIGKILL after 5 s).
#   ferry_free_port [COUNT]
#       A port on 127.0.0.1 with COUNT (default 4) free ports from it on, for
#       a ferryd whose engine i listens on PORT+i.

ferry_daemon_pids=()
ferry_daemon_pid=

ferry_start_daemon() {
  local ferryd=$1 dir=$2
  shift 2
  mkdir -p "$dir"
  local -a prefix=()
  # shellcheck disable=SC2206 # the prefix is words on purpose
  [[ -n ${FERRY_DAEMON_PREFIX:-} ]] && prefix=($FERRY_DAEMON_PREFIX)
  "${prefix[@]}" "$ferryd" --runtime-dir "$dir" "$@" >"$dir/ferryd.log" 2>&1 &
  ferry_daemon_pid=$!
  ferry_daemon_pids+=("$ferry_daemon_pid")
  local i
  for ((i = 0; i < 200; i++)); do
    [[ -S $dir/ferryd.sock && -S $dir/control.sock ]] && return 0
    kill -0 "$ferry_daemon_pid" 2>/dev/null || break
    sleep 0.05
  done
  echo "ferryd in $dir did not come up:" >&2
  tail -20 "$dir/ferryd.log" >&2
  return 1
}

ferry_stop_daemons() {
  local pid i
  for pid in "${ferry_daemon_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${ferry_daemon_pids[@]}"; do
    for ((i = 0; i < 100; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  ferry_daemon_pids=()
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
