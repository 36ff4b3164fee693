"""Helper processes for the Python suites (run as: helpers.py ROLE ARGS...).

  serve SOCKET SERVICE [DELAY_MS]   answer each request with its payload
                                    reversed, DELAY_MS after it arrived
  record SOCKET SERVICE OUT         answer each request with 8 bytes, after
                                    writing the payload it saw to OUT (hex)
  shard SOCKET TABLES_JSON I/N      a ferry.ps shard (python3 -m ferry.ps.server)
Each prints 'ready ...' once serving and stops on SIGTERM.
  signalled SOCKET ROUNDS           ferry.ps.serve() ROUNDS times in this
                                    process, sent SIGTERM at every call of
                                    its loop; prints 'stopped ROUNDS'
"""

import signal
import sys
import time

import ferry


def serve(socket, service, delay_ms="0", out=None):
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    delay = int(delay_ms) / 1000.0
    with ferry.attach(socket, "test helper " + service) as c:
        c.serve(service)
        print("ready", service, flush=True)
        answers = []
        while not stop:
            d = c.recv(timeout=0.1)
            if d is None:
                continue
            if delay:
                time.sleep(delay)
            data = bytes(memoryview(d))
            if out:
                with open(out, "a") as f:
                    f.write(data.hex() + "\n")
                data = len(data).to_bytes(8, "little")
            else:
                data = data[::-1]
            buf = c.alloc(max(len(data), 1))
            memoryview(buf)[:len(data)] = data
            answers.append((c.reply(d, buf, len(data)), buf))
            c.release(d)
            done = [a for a in answers if a[0].done()]
            for h, b in done:
                h.wait(0)
                c.free(b)
            answers = [a for a in answers if not a[0].done()]


def signalled(socket, rounds):
    """serve() sent SIGTERM at every call its main thread makes once it
    serves (a profile hook sends them), ROUNDS times: however the signals
    fall on its loop, each round must end, none may hang."""
    import os
    from ferry import ps
    from ferry.ps import shard
    tables = [ps.Embedding("t", rows=10, dim=4)]
    pid = os.getpid()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # what serve() puts back: the signals sent after it

    def ready(_server):
        sys.setprofile(lambda *_: os.kill(pid, signal.SIGTERM))

    for i in range(int(rounds)):
        try:
            counters = shard.serve(tables, 0, 1, socket, ready=ready, service_prefix="signalled-%d-" % i)
        finally:
            sys.setprofile(None)
        assert counters["result"] == "Ok", counters
    print("stopped", rounds, flush=True)


def main():
    role, args = sys.argv[1], sys.argv[2:]
    if role == "serve":
        serve(*args)
    elif role == "record":
        serve(args[0], args[1], "0", args[2])
    elif role == "shard":
        from ferry.ps import server
        sys.exit(server.main(["--socket", args[0], "--tables", args[1], "--shard", args[2]] + args[3:]))
    elif role == "signalled":
        signalled(*args)
    else:
        sys.exit("unknown role " + role)


if __name__ == "__main__":
    main()
