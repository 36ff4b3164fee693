"""The processes of test_chaos.py (run as: chaos_roles.py ROLE ARGS...).

  serve SOCKET SERVICE           echo each request's payload; a killed
                                 predecessor's name is retried, a daemon
                                 that goes away ends it (exit 0)
  call SOCKET TARGETS DEPTH OUT  calls with DEPTH in flight, to targets
                                 (comma-separated) picked at random, each
                                 payload a byte pattern its answer must
                                 repeat; OUT gets the completions so far
  shard SOCKET TABLES I/N        python3 -m ferry.ps.server's main, once
                                 a killed predecessor's service is gone
  ps SOCKET TARGET TABLES OUT    a ferry.ps Worker of two shards behind
                                 TARGET: pulls (each row's shape and
                                 finiteness checked) and pushes of 1 to
                                 4,096 keys; OUT as for call

A caller exits 3 when a call does not complete within 30 s of the wait for
it (a hang), 4 when an answer differs from its request, 5 on a status the
user guide does not give for a call; SIGTERM ends it with 0. The ps worker
exits the same way for an operation past 30 s, rows of the wrong shape or
not finite, or another status.
"""

import json
import os
import random
import signal
import sys
import time

import ferry

# What a call may complete with while servers, callers and a peer daemon
# are killed, stopped and restarted (docs/user-guide.md, call and close).
ALLOWED = {"ServiceGone", "PeerReset", "PeerUnreachable", "Timeout", "EndpointClosed", "ServiceNotFound",
           "CallerGone", "Busy", "Cancelled"}
# After these the endpoint is of no more use: close it and open it again.
REOPEN = {"EndpointClosed", "ServiceGone", "PeerReset", "PeerUnreachable"}
SIZES = [64, 1000, 4096, 20000, 70000, 300000]


def serve(socket, service):
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    deadline = time.monotonic() + 20  # past a SIGSTOP of ferryd (up to 5 s)
    while True:  # the name of a killed predecessor is free once its daemon saw the hang-up
        c = None
        try:
            c = ferry.attach(socket, "chaos " + service)
            c.serve(service)
            break
        except (ferry.ServiceExists, ferry.DaemonGone):
            if c is not None:
                c.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    print("ready", service, flush=True)
    answers = []
    try:
        while True:
            d = c.recv(timeout=0.1)
            if d is not None and d.kind == "request":
                if random.random() < 0.02:
                    time.sleep(random.random() * 0.05)
                out = c.alloc(max(len(d), 1))
                memoryview(out)[:len(d)] = memoryview(d)
                answers.append((c.reply(d, out, len(d)), out))
            if d is not None:
                c.release(d)
            for h, b in [a for a in answers if a[0].done()]:
                b.free()
            answers = [a for a in answers if not a[0].done()]
    except ferry.DaemonGone:
        os._exit(0)


def shard(socket, tables, spec):
    index = spec.split("/")[0]
    deadline = time.monotonic() + 20  # past a SIGSTOP of ferryd (up to 5 s)
    with ferry.attach(socket, "chaos shard probe") as c:
        while time.monotonic() < deadline:
            try:
                c.close_endpoint(c.open("ps-shard-" + index, timeout=2))
            except ferry.ServiceNotFound:
                break
            except ferry.Timeout:  # ferryd stopped (SIGSTOP) for up to 5 s just now
                continue
            time.sleep(0.05)
    from ferry.ps import server
    sys.exit(server.main(["--socket", socket, "--tables", tables, "--shard", spec]))


class Caller:
    def __init__(self, socket, targets, depth, out):
        self.c = ferry.attach(socket, "chaos caller")
        self.targets, self.depth, self.out = targets, depth, out
        self.endpoints = {}
        self.counts = {"ok": 0}
        self.pid = os.getpid()
        self.in_flight = []  # (handle, request, response, size, byte, target)
        self.saved = 0.0

    def count(self, what):
        self.counts[what] = self.counts.get(what, 0) + 1
        if what == "ok":
            self.last_ok = time.monotonic()  # CLOCK_MONOTONIC: the test's clock too

    def save(self, force=False):
        if force or time.monotonic() - self.saved > 0.2:
            with open(self.out + ".tmp", "w") as f:
                json.dump(dict(self.counts, pid=self.pid, last_ok=getattr(self, "last_ok", 0.0), **self.extra()), f)
            os.replace(self.out + ".tmp", self.out)
            self.saved = time.monotonic()

    def extra(self):
        return {}

    def finish(self):
        h, req, resp, size, byte, target = self.in_flight.pop(0)
        try:
            n = h.wait(30)
            if n != size or bytes(memoryview(resp)[:n]) != bytes([byte]) * size:
                print("WRONG ANSWER from %s: %s bytes for %d" % (target, n, size), flush=True)
                os._exit(4)
            self.count("ok")
        except ferry.Error as e:
            if not h.done():
                print("HANG: a call to %s of %d bytes not done after 30 s" % (target, size), flush=True)
                os._exit(3)
            if e.status not in ALLOWED:
                print("UNEXPECTED status %s of a call to %s" % (e.status, target), flush=True)
                os._exit(5)
            self.count(e.status)
            if e.status in REOPEN and target in self.endpoints:
                try:
                    self.c.close_endpoint(self.endpoints.pop(target))
                except ferry.Error:
                    pass
        req.free()
        resp.free()

    def run(self):
        while True:
            while len(self.in_flight) >= self.depth:
                self.finish()
            self.save()
            target = random.choice(self.targets)
            if target not in self.endpoints:
                try:
                    self.endpoints[target] = self.c.open(target, timeout=5)
                except ferry.Error as e:
                    self.count("open " + e.status)
                    time.sleep(0.05)
                    continue
            size = random.choice(SIZES)
            try:
                req, resp = self.c.alloc(size), self.c.alloc(size)
            except ferry.NoMemory:
                self.count("alloc NoMemory")
                if self.in_flight:
                    self.finish()
                continue
            byte = random.randrange(256)
            view = memoryview(req)
            view[:] = bytes([byte]) * size
            view.release()
            try:
                h = self.c.call(self.endpoints[target], req, resp, size, timeout=2.0)
            except ferry.Error as e:
                self.count("submit " + e.status)
                req.free()
                resp.free()
                self.endpoints.pop(target, None)
                continue
            self.in_flight.append((h, req, resp, size, byte, target))


class PsWorker(Caller):
    def __init__(self, socket, target, tables_json, out):
        import ferry.ps as ps
        import numpy as np
        self.ps, self.np = ps, np
        self.tables = [ps.Table.from_dict(t) for t in json.loads(tables_json)]
        self.socket, self.target, self.out = socket, target, out
        self.counts = {"ok": 0}
        self.pid = os.getpid()
        self.saved = 0.0
        deadline = time.monotonic() + 30
        while True:  # the shards (or their ferryd) may be down just now
            try:
                self.w = ps.Worker(self.tables, 2, socket, target=target, timeout=3)
                break
            except (ferry.ServiceNotFound, ferry.PeerUnreachable, ferry.PeerReset, ferry.ServiceGone, ferry.Timeout,
                    ferry.DaemonGone):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def extra(self):
        return {"reattached": self.w.reattached}  # attached again after ferryd A restarted

    def one(self):
        np = self.np
        t = self.tables[0]
        keys = np.random.randint(0, t.rows, size=random.choice([1, 16, 256, 4096]))
        t0 = time.monotonic()
        try:
            if random.random() < 0.6:
                rows = self.w.pull(t.name, keys).gather()
                if tuple(rows.shape) != (len(keys), t.dim) or not bool(rows.isfinite().all()):
                    print("WRONG ROWS: %s for %d keys" % (tuple(rows.shape), len(keys)), flush=True)
                    os._exit(4)
            else:
                self.w.push(t.name, keys, np.full((len(keys), t.dim), 0.01, np.float32))
                self.w.synchronize()
            self.count("ok")
        except ferry.Error as e:
            if e.status not in ALLOWED and e.status != "DaemonGone":  # ferryd A restarted: the worker goes on
                print("UNEXPECTED status %s: %s" % (e.status, e), flush=True)
                os._exit(5)
            self.count(e.status)
            time.sleep(0.01)  # a shard that is not back fails at once
        if time.monotonic() - t0 > 30:
            print("HANG: an operation took %.1f s" % (time.monotonic() - t0), flush=True)
            os._exit(3)

    def run(self):
        while True:
            self.one()
            self.save()


def main():
    role, args = sys.argv[1], sys.argv[2:]
    if role == "serve":
        serve(*args)
    elif role == "shard":
        shard(*args)
    elif role in ("call", "ps"):
        if role == "call":
            caller = Caller(args[0], args[1].split(","), int(args[2]), args[3])
        else:
            caller = PsWorker(args[0], args[1], args[2], args[3])

        def stop(*_):
            caller.save(force=True)
            print("calls", json.dumps(caller.counts), flush=True)
            os._exit(0)

        signal.signal(signal.SIGTERM, stop)
        print("ready", flush=True)
        caller.run()
    else:
        sys.exit("unknown role " + role)


if __name__ == "__main__":
    main()
