"""Process orchestration for the Python benchmark and the training demo:
shard processes (ferry: ``python3 -m ferry.ps.server``; torch-rpc: RPC shard
processes), worker processes, optional network namespaces, a measured phase
that every worker enters at once, and CPU accounting over every process
involved (workers report their own; shards and daemons are read from /proc).

Worker protocol (stdin/stdout lines): the worker sets up, prints
``ready``, waits for ``go`` on stdin, runs, prints ``report <json>``.
"""

import argparse
import contextlib
import glob
import importlib
import json
import os
import subprocess
import sys
import time
from typing import Any, Iterator, List, Optional

READY_TIMEOUT_S = 120


def cpu_ns(pid):
    """CPU time of every thread of a live process, in ns (schedstat; 0 when gone)."""
    total = 0
    for path in glob.glob("/proc/%d/task/*/schedstat" % pid):
        try:
            with open(path) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


HERE = os.path.dirname(os.path.abspath(__file__))


def python_cmd(module, *args, netns=None):
    """A child running `module`: ``-m`` for ferry's own modules, else the script of that name beside this file."""
    if module.startswith("ferry."):
        cmd = [sys.executable, "-m", module]
    else:
        cmd = [sys.executable, os.path.join(HERE, module + ".py")]
    cmd += [str(a) for a in args]
    return (["ip", "netns", "exec", netns] + cmd) if netns else cmd


def child_env(extra=None):
    import ferry
    env = dict(os.environ)
    # The package's own location, so children import this same build of ferry.
    here = os.path.dirname(os.path.dirname(os.path.abspath(ferry.__file__)))
    env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("OMP_NUM_THREADS", "1")
    env.update(extra or {})
    return env


@contextlib.contextmanager
def ferry_shards(tables: Any, shards: int, socket: str, prefix: str, checkpoint_dir: Optional[str] = None,
                 restore: Optional[str] = None) -> Iterator[List[Any]]:
    """``shards`` shard processes (``python3 -m ferry.ps.server``) of ``tables``
    serving PREFIX<i> over the ferryd at ``socket``, each waited for until it
    says ready; stopped when the block ends, however it ends. With
    ``checkpoint_dir``, shard i saves into (and restores ``restore`` from)
    ``checkpoint_dir/shard-i``, as if each were on a host of its own."""
    spec = json.dumps([t.to_dict() for t in tables])
    procs: List[Any] = []
    try:
        for i in range(shards):
            extra: List[str] = []
            if checkpoint_dir is not None:
                own = os.path.join(checkpoint_dir, "shard-%d" % i)
                os.makedirs(own, exist_ok=True)
                extra += ["--checkpoint-dir", own] + (["--restore", restore] if restore else [])
            procs.append(subprocess.Popen(python_cmd("ferry.ps.server", "--tables", spec, "--shard",
                                                     "%d/%d" % (i, shards), "--socket", socket,
                                                     "--service-prefix", prefix, *extra),
                                          stdout=subprocess.PIPE, text=True, env=child_env()))
        for p in procs:
            line = p.stdout.readline() if p.stdout else ""
            if not line.startswith("ready"):
                raise SystemExit("a shard did not start: %r" % line)
        yield procs
    finally:
        for p in procs:
            p.terminate()
            p.wait(30)


class Proc:
    """A child with line-based stdout; stderr goes to a log file."""

    def __init__(self, cmd, log_path, env=None, stdin=False):
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.cmd = [str(c) for c in cmd]
        self.p: Any = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=self.log, text=True, env=env,
                                       stdin=subprocess.PIPE if stdin else subprocess.DEVNULL)
        self.pid = self.p.pid

    def expect(self, prefix, timeout=READY_TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.p.stdout.readline()
            if not line:
                break
            if line.startswith(prefix):
                return line[len(prefix):].strip()
        raise RuntimeError("%s: no %r line (exit %s); log %s:\n%s" % (
            self.cmd[-6:], prefix, self.p.poll(), self.log_path, self.tail()))

    def tail(self):
        self.log.flush()
        try:
            with open(self.log_path) as f:
                return f.read()[-3000:]
        except OSError:
            return ""

    def send(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def stop(self, timeout=10, grace=0):
        """Waits `grace` s for the child to exit on its own, then SIGTERM, then SIGKILL."""
        if grace:
            try:
                self.p.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(10)
        self.log.close()
        return self.p.returncode


class Run:
    """One measured run: shards, then workers, then go, then reports."""

    def __init__(self, system, tables, shards, workers, out_dir, *, socket=None, server_socket=None, target=None,
                 worker_netns=None, shard_netns=None, rpc_host="127.0.0.1", rpc_port=None, daemon_pids=(),
                 rpc_threads=8, max_count=None):
        self.system = system
        self.tables = tables
        self.shards, self.workers = shards, workers
        self.out_dir = out_dir
        self.socket, self.server_socket, self.target = socket, server_socket or socket, target
        self.worker_netns, self.shard_netns = worker_netns, shard_netns
        self.rpc_init = "tcp://%s:%d" % (rpc_host, rpc_port or 29500 + os.getpid() % 2000)
        self.rpc_threads = rpc_threads
        self.daemon_pids = list(daemon_pids)
        # ferry shards: the most keys a request carries (sizes their response
        # buffers), and replies in flight at once (as ferry-ps bench sizes them).
        self.max_count = max_count
        self.pool = 2 * workers + 4
        self.shard_procs, self.worker_procs = [], []
        os.makedirs(out_dir, exist_ok=True)

    def tables_json(self):
        path = os.path.join(self.out_dir, "tables.json")
        with open(path, "w") as f:
            json.dump([t.to_dict() for t in self.tables], f)
        return "@" + path

    def start_shards(self):
        tj = self.tables_json()
        env = child_env({"FERRY_RPC_THREADS": str(self.rpc_threads)})
        for i in range(self.shards):
            log = os.path.join(self.out_dir, "%s-shard-%d.log" % (self.system, i))
            if self.system == "ferry":
                cmd = python_cmd("ferry.ps.server", "--tables", tj, "--shard", "%d/%d" % (i, self.shards),
                                 "--socket", self.server_socket or "", "--pool", self.pool)
                if self.max_count:
                    cmd += ["--max-count", str(self.max_count)]
            else:
                cmd = python_cmd("launch", "rpc-shard", "--tables", tj, "--shard",
                                 "%d/%d" % (i, self.shards), "--trainers", self.workers, "--init", self.rpc_init,
                                 netns=self.shard_netns)
            p = Proc(cmd, log, env=env)
            self.shard_procs.append(p)
            if self.system == "ferry":
                p.expect("ready")  # rpc shards are ready once every process joined

    def start_workers(self, role, config):
        cfg = dict(config, system=self.system, shards=self.shards, workers=self.workers, socket=self.socket,
                   target=self.target, rpc_init=self.rpc_init, rpc_threads=self.rpc_threads)
        path = os.path.join(self.out_dir, "%s-%s.json" % (self.system, role))
        with open(path, "w") as f:
            json.dump(cfg, f)
        env = child_env()
        netns = self.worker_netns if self.system != "ferry" else None
        for r in range(self.workers):
            log = os.path.join(self.out_dir, "%s-%s-%d.log" % (self.system, role, r))
            cmd = python_cmd("launch", "worker", "--role", role, "--rank", r, "--config", path,
                             "--tables", self.tables_json(), netns=netns)
            self.worker_procs.append(Proc(cmd, log, env=env, stdin=True))
        for p in self.worker_procs:
            p.expect("ready")

    def measure(self):
        """go, collect every report; returns (reports, wall_s, cpu_ns of shards, cpu_ns of daemons)."""
        shards0 = sum(cpu_ns(p.pid) for p in self.shard_procs)
        daemons0 = sum(cpu_ns(pid) for pid in self.daemon_pids)
        t0 = time.monotonic()
        for p in self.worker_procs:
            p.send("go")
        reports = [json.loads(p.expect("report ", timeout=1800)) for p in self.worker_procs]
        wall = time.monotonic() - t0
        shards = sum(cpu_ns(p.pid) for p in self.shard_procs) - shards0
        daemons = sum(cpu_ns(pid) for pid in self.daemon_pids) - daemons0
        return reports, wall, shards, daemons

    def train(self, role, config):
        """start the shards and the workers of `role`, measure, close: the
        workers' reports by rank and the totals every training report gives
        (samples, the slowest worker's wall time, CPU of workers, shards and
        daemons in µs)."""
        try:
            self.start_shards()
            self.start_workers(role, config)
            reports, _, shard_ns, daemon_ns = self.measure()
        finally:
            self.close()
        reports.sort(key=lambda x: x["rank"])
        workers_us = sum(x["cpu_us"] for x in reports)
        return reports, {"samples": sum(x["samples"] for x in reports),
                         "train_wall": max(x["wall_s"] for x in reports),
                         "cpu_us": workers_us + (shard_ns + daemon_ns) / 1000.0,
                         "cpu_trainers_us": workers_us, "cpu_shards_us": shard_ns / 1000.0,
                         "cpu_daemon_us": daemon_ns / 1000.0}

    def close(self):
        # Workers leave by themselves once done (torch-rpc: after the
        # shutdown barrier every process joins); ferry shards on SIGTERM.
        for p in self.worker_procs:
            p.stop(10, grace=60)
        for p in self.shard_procs:
            p.stop(10, grace=30 if self.system != "ferry" else 0)


def daemon_pid(socket_path):
    """The pid of the ferryd whose client socket is `socket_path`, or None
    when it does not answer."""
    from ferry.ps.store import daemon_status
    status = daemon_status(socket_path)
    return int(status["pid"]) if status and "pid" in status else None


# -- child entry points ---------------------------------------------------------

def _worker_main(a):
    from ferry.ps import tables as _tables
    with open(a.config) as f:
        cfg = json.load(f)
    text = open(a.tables[1:]).read() if a.tables.startswith("@") else a.tables
    tables = [_tables.Table.from_dict(d) for d in json.loads(text)]
    worker: Optional[Any]
    if cfg["system"] == "local":
        worker = None  # train.py --ps local: the table is in the worker, no parameter server
    elif cfg["system"] == "ferry":
        from ferry.ps.worker import Worker
        worker = Worker(tables, cfg["shards"], cfg.get("socket"), cfg.get("target"),
                        name="ferry.ps %s %d" % (a.role, a.rank))
    else:
        from rpc_baseline import RpcWorker
        worker = RpcWorker(tables, cfg["shards"], a.rank, cfg["rpc_init"], cfg["rpc_threads"], cfg["workers"])
    # The role names the module whose Job this worker runs (bench.py, train.py
    # beside this file): imported by name, so launch imports none of them.
    role = importlib.import_module(a.role)
    job = role.Job(worker, tables, cfg, a.rank)
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return 1
    report = job.run()
    print("report " + json.dumps(report), flush=True)
    if worker is not None:
        worker.close()
    return 0


def _rpc_shard_main(a):
    import rpc_baseline
    from ferry.ps import tables as _tables
    text = open(a.tables[1:]).read() if a.tables.startswith("@") else a.tables
    tables = [_tables.Table.from_dict(d) for d in json.loads(text)]
    index, shards = (int(x) for x in a.shard.split("/"))
    rpc_baseline.run_shard(tables, index, shards, a.trainers, a.init, rpc_baseline.worker_threads())
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="launch.py")
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker")
    w.add_argument("--role", required=True)
    w.add_argument("--rank", type=int, required=True)
    w.add_argument("--config", required=True)
    w.add_argument("--tables", required=True)
    s = sub.add_parser("rpc-shard")
    s.add_argument("--tables", required=True)
    s.add_argument("--shard", required=True)
    s.add_argument("--trainers", type=int, required=True)
    s.add_argument("--init", required=True)
    a = ap.parse_args(argv)
    return _worker_main(a) if a.cmd == "worker" else _rpc_shard_main(a)


if __name__ == "__main__":
    sys.exit(main())

