"""Hardening, second pass through the Python package: a forked
child cannot use its parent's client and the parent goes on; a client sees
its daemon's death without polling; the shard server refuses a bad
command line in one line and tells systemd it is ready and stopping; a
table list that cannot be is refused before anything starts; non-integer keys are a
TypeError; non-finite gradients, pushes outside a table's access list and
rows past max_rows are refused; a pull of keys never pushed creates no
row."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

import ferry
import ferry.ps as ps
from conftest import shard_process

HERE = os.path.dirname(os.path.abspath(__file__))


def echo_call(c, ep, payload):
    req, resp = c.alloc(len(payload)), c.alloc(len(payload))
    memoryview(req)[:] = payload
    n = c.call(ep, req, resp).wait(10)
    out = bytes(memoryview(resp)[:n])
    c.free(req)
    c.free(resp)
    return out


def test_forked_child_cannot_use_the_parents_client(daemon, helpers):
    helpers("serve", daemon.socket, "rev")  # answers with the payload reversed
    c = ferry.attach(daemon.socket, "fork parent")
    ep = c.open("rev")
    assert echo_call(c, ep, b"before the fork") == b"before the fork"[::-1]
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe, never return into pytest
        problems = []
        try:
            os.close(r)
            req = resp = None
            try:
                c.alloc(8)
                problems.append("alloc was not refused")
            except ferry.Forked:
                pass
            try:
                c.open("rev")
                problems.append("open was not refused")
            except ferry.Forked:
                pass
            if c.state != "Forked":
                problems.append("state %s" % c.state)
            try:
                c.poll()
                problems.append("poll was not refused")
            except ferry.Forked:
                pass
            own = ferry.attach(daemon.socket, "fork child")  # a client of its own works
            e2 = own.open("rev")
            for i in range(20):
                p = b"child %d" % i
                if echo_call(own, e2, p) != p[::-1]:
                    problems.append("the child's own call %d" % i)
            own.close()
        except BaseException as e:  # anything else: reported, not raised in the child
            problems.append("%s: %s" % (type(e).__name__, e))
        os.write(w, ("\n".join(problems) or "ok").encode())
        os._exit(0)
    os.close(w)
    # The parent calls on while the child runs and after it is gone.
    for i in range(100):
        p = b"parent %d" % i
        assert echo_call(c, ep, p) == p[::-1]
    _, status = os.waitpid(pid, 0)
    report = b""
    while True:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        report += chunk
    os.close(r)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert report.decode() == "ok"
    for i in range(100):
        p = b"after %d" % i
        assert echo_call(c, ep, p) == p[::-1]
    assert c.state == "Ok"
    assert c.stats["dropped_completions"] == 0
    c.close()


def test_state_sees_the_daemon_die_without_polling(daemon):
    c = ferry.attach(daemon.socket, "never polls")
    assert c.state == "Ok"
    daemon.kill()  # SIGKILL and reaped: its end of the attach socket is closed
    t0 = time.monotonic()
    state = c.state
    while state == "Ok" and time.monotonic() - t0 < 2:
        state = c.state  # only the state, never a poll or a wait
    took = time.monotonic() - t0
    assert state == "DaemonGone"
    assert took < 0.1, "DaemonGone only after %.3f s" % took


def run_shard_server(socket, tables_arg, shard="0/1"):
    return subprocess.run([sys.executable, "-m", "ferry.ps.server", "--socket", socket, "--tables", tables_arg,
                           "--shard", shard], capture_output=True, text=True, timeout=60)


def test_shard_server_refuses_a_bad_command_line_in_one_line(daemon, tmp_path):
    good = json.dumps([ps.Embedding("t", rows=10, dim=4).to_dict()])
    cases = [
        ("{bad", "0/1", "--tables: not JSON"),
        ("[]", "0/1", "a non-empty JSON list of tables"),
        ('{"name": "t"}', "0/1", "a non-empty JSON list of tables"),
        ("[3]", "0/1", "a table is a JSON object"),
        ('[{"rows": 3}]', "0/1", 'a table needs a "name"'),
        ('[{"name": "t", "colour": 1}]', "0/1", "table 't': unknown field(s) colour"),
        ('[{"name": "t", "optimizer": {"kind": "Adam"}}]', "0/1", "table 't': optimizer must be an object whose"),
        ('[{"name": "t", "optimizer": {"kind": "SGD", "momentum": 0.9}}]', "0/1",
         "table 't': optimizer SGD takes lr, got momentum"),
        ('[{"name": "t", "init": {"kind": "Zeros", "scale": 1}}]', "0/1", "table 't': init Zeros takes nothing"),
        ("@" + str(tmp_path / "missing.json"), "0/1", "No such file or directory"),
        (good, "2/2", "--shard: INDEX/SHARDS with 0 <= INDEX < SHARDS"),
        (good, "x", "--shard: INDEX/SHARDS"),
        (good, "0/0", "--shard: INDEX/SHARDS"),
        ('[{"name": "t", "rows": 10, "dim": 0}]', "0/1", "table 0 't': dim must be in [1, 4096]"),
    ]
    for tables_arg, shard, want in cases:
        r = run_shard_server(daemon.socket, tables_arg, shard)
        assert r.returncode == 2, (tables_arg, shard, r.returncode, r.stderr)
        assert "Traceback" not in r.stderr and want in r.stderr.strip().splitlines()[-1], (tables_arg, r.stderr)
        assert "ready" not in r.stdout
    # What fails at run time is one line too, with status 1 (a supervisor may try again).
    r = run_shard_server(str(tmp_path / "no-ferryd.sock"), good)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "cannot attach to ferryd" in r.stderr and "DaemonGone" in r.stderr
    first = shard_process(daemon, [ps.Embedding("t", rows=10, dim=4)])
    try:
        assert first.stdout.readline().startswith("ready ")
        r = run_shard_server(daemon.socket, good)
        assert r.returncode == 1 and "Traceback" not in r.stderr and "serve ps-shard-0: ServiceExists" in r.stderr
    finally:
        first.terminate()
        first.communicate(timeout=30)
    # Fields left out take Table's defaults; what to_dict() writes comes back the same.
    assert ps.Table.from_dict({"name": "t", "rows": 10, "dim": 4}) == ps.Table("t", dim=4, rows=10)
    t = ps.Embedding("t", rows=10, dim=4, optimizer=ps.Adagrad(lr=0.2), init=ps.Uniform(0.1, seed=5), max_rows=7)
    assert ps.Table.from_dict(json.loads(json.dumps(t.to_dict()))) == t


def test_a_table_list_that_cannot_be_is_refused_before_anything_starts(daemon):
    t = ps.Embedding("t", rows=10, dim=4)
    cases = [
        ([], ValueError, "tables: at least one table"),
        (t, TypeError, "tables: a list of ferry.ps tables, got Table"),
        ([t, {"name": "u"}], TypeError, "tables: ferry.ps tables (Embedding(), Dense(), Table()), got dict"),
        ([ps.Embedding("t", rows=10, dim=2.5)], ValueError, "table 't': dim must be an integer >= 0, got 2.5"),
        ([ps.Embedding("t", rows=-1, dim=2)], ValueError, "table 't': rows must be an integer >= 0, got -1"),
        ([ps.Embedding("t", rows=10, dim=True)], ValueError, "table 't': dim must be an integer >= 0, got True"),
        ([ps.Embedding("t", rows=10, dim=2, max_rows=1.5)], ValueError, "max_rows must be an integer >= 0"),
        ([ps.Embedding(3, rows=10, dim=2)], ValueError, "table name: a string, got 3"),
    ]
    for tables, kind, want in cases:
        for make in (lambda: ps.Worker(tables, 1, daemon.socket, timeout=1),
                     lambda: ps.ShardServer(tables, 0, 1, daemon.socket)):
            with pytest.raises(kind) as e:
                make()
            assert want in str(e.value), (tables, str(e.value))
    # numpy integers are integers; a Worker of valid tables still starts (its shard is served here).
    ok = [ps.Embedding("t", rows=np.int64(10), dim=np.int32(4))]
    with ps.ShardServer(ok, 0, 1, daemon.socket), ps.Worker(ok, 1, daemon.socket) as w:
        assert w.pull("t", [9]).gather().shape == (1, 4)


def test_a_worker_names_the_shard_it_cannot_reach(daemon, one_shard):
    tables = [ps.Embedding("emb", rows=100, dim=2)]
    one_shard(tables)  # shard 0 of 2 only: shard 1 was never (re)started
    with pytest.raises(ferry.ServiceNotFound, match="shard 1 of 2: open 'ps-shard-1'"):
        ps.Worker(tables, 2, daemon.socket, timeout=0.5)


def test_a_worker_says_when_no_ferryd_answers_at_a_shards_address(daemon):
    tables = [ps.Embedding("emb", rows=100, dim=2)]
    with socket.socket() as s:  # a port nothing listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        with pytest.raises(ferry.PeerUnreachable, match="shard 0 of 1: open '127.0.0.1:%d/ps-shard-0': "
                           "PeerUnreachable [(]no ferryd answered at that address" % port):
            ps.Worker(tables, 1, daemon.socket, shard_targets=["127.0.0.1:%d/ps-shard-0" % port], timeout=2)


@pytest.fixture
def one_shard(daemon):
    started = []

    def start(tables, **options):
        s = ps.ShardServer(tables, 0, 1, daemon.socket, **options).start()
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


def test_non_integer_keys_are_a_type_error(daemon, one_shard):
    tables = [ps.Embedding("emb", rows=0, dim=2, init=ps.Zeros())]
    one_shard(tables)
    with ps.Worker(tables, 1, daemon.socket) as w:
        for keys in ([1.7, 2.2], np.array([1.0, 2.0]), torch.tensor([1.5]), [True, False], ["1"], [1, 2.5]):
            with pytest.raises(TypeError):
                w.pull("emb", keys)
            with pytest.raises(TypeError):
                w.push("emb", keys, np.zeros((len(keys), 2), np.float32))
        # Integers of every kind still work.
        for keys in ([1, 2], np.array([1, 2], np.uint32), torch.tensor([1, 2]), torch.tensor([3], dtype=torch.int32)):
            assert w.pull("emb", keys).gather().shape == (len(keys), 2)


def test_non_finite_gradients_are_refused(daemon, one_shard):
    tables = [ps.Embedding("emb", rows=100, dim=2, init=ps.Zeros()), ps.Dense("d", 8)]
    server = one_shard(tables)
    with ps.Worker(tables, 1, daemon.socket) as w:
        w.push("emb", [1, 2], np.ones((2, 2), np.float32))
        before = w.pull("emb", [1, 2]).gather().clone()
        for bad in (float("nan"), float("inf"), float("-inf")):
            g = np.ones((2, 2), np.float32)
            g[1, 0] = bad
            with pytest.raises(ferry.BadRequest, match="NonFinite"):
                w.push("emb", [1, 2], g)
            with pytest.raises(ferry.BadRequest, match="NonFinite"):
                w.assign("emb", [1, 2], g)
            with pytest.raises(ferry.BadRequest, match="NonFinite"):
                w.push_dense("d", np.full(8, bad, np.float32))
        assert torch.equal(w.pull("emb", [1, 2]).gather(), before)  # nothing applied
        assert torch.isfinite(w.pull_dense("d")).all()
    server.stop()
    assert server.counters()["non_finite"] == 9


def test_a_push_nobody_waited_for_still_reports_its_failure(daemon, one_shard):
    # wait=False pushes are reaped as later ones start; a failure among them
    # is kept for synchronize(), not dropped with the finished operation.
    tables = [ps.Embedding("emb", rows=100, dim=2, init=ps.Zeros())]
    server = one_shard(tables)
    with ps.Worker(tables, 1, daemon.socket) as w:
        bad = np.ones((2, 2), np.float32)
        bad[0, 1] = float("nan")
        refused = w.push("emb", [1, 2], bad, wait=False)
        deadline = time.monotonic() + 10
        while not refused.done() and time.monotonic() < deadline:  # the refusal arrives
            time.sleep(0.01)
        assert refused.done()
        del refused
        for k in range(20):  # later pushes reap the failed one
            w.push("emb", [3 + k], np.ones((1, 2), np.float32), wait=False)
        with pytest.raises(ferry.BadRequest, match="NonFinite"):
            w.synchronize()
        w.synchronize()  # reported once
        assert w.pull("emb", [3]).gather()[0, 0].item() != 0  # the good pushes were applied
        w.push("emb", [1, 2], bad, wait=False)
        with pytest.raises(ferry.BadRequest, match="NonFinite"):
            w.synchronize()  # and one still in flight at synchronize()
    server.stop()


def test_non_finite_values_pass_when_allowed(daemon, one_shard):
    tables = [ps.Embedding("emb", rows=10, dim=1, init=ps.Zeros())]
    one_shard(tables, allow_non_finite=True)
    with ps.Worker(tables, 1, daemon.socket) as w:
        w.assign("emb", [3], np.array([[float("inf")]], np.float32))
        assert w.pull("emb", [3]).gather()[0, 0].item() == float("inf")


def test_a_pull_of_unseen_keys_creates_no_row(daemon, one_shard):
    tables = [ps.Embedding("emb", rows=0, dim=16, init=ps.Uniform(0.1, seed=4))]
    server = one_shard(tables)
    with ps.Worker(tables, 1, daemon.socket) as w:
        rng = np.random.default_rng(1)
        for _ in range(20):
            keys = rng.integers(0, 1 << 62, size=2000)
            got = w.pull("emb", keys).gather()
            assert torch.equal(got, torch.from_numpy(ps.initial_values(tables, "emb", keys)))
        assert server.usage()["emb"]["rows"] == 0
        w.push("emb", [5, 6], np.ones((2, 16), np.float32))
        assert server.usage()["emb"]["rows"] == 2
        assert server.usage()["emb"]["bytes"] > 0


def test_rows_past_max_rows_are_refused_whole(daemon, one_shard):
    tables = [ps.Embedding("emb", rows=0, dim=2, init=ps.Zeros(), max_rows=10)]
    server = one_shard(tables)
    with ps.Worker(tables, 1, daemon.socket) as w:
        w.push("emb", list(range(8)), np.ones((8, 2), np.float32))
        with pytest.raises(ferry.NoMemory, match="TableFull"):
            w.push("emb", [100, 101, 102], np.ones((3, 2), np.float32))  # 11 rows: refused, none created
        assert server.usage()["emb"]["rows"] == 8
        w.push("emb", [100, 101, 100, 101, 3], np.ones((5, 2), np.float32))  # duplicates: exactly 10
        assert server.usage()["emb"]["rows"] == 10
        w.push("emb", list(range(8)) + [100, 101], np.ones((10, 2), np.float32))  # existing rows: always room
        assert w.pull("emb", [12345]).gather().abs().sum().item() == 0  # pulls of others still answer


def test_access_lists_restrict_who_may_push(daemon, one_shard):
    me = os.getuid()
    tables = [ps.Embedding("open", rows=10, dim=1, init=ps.Zeros()),
              ps.Embedding("mine", rows=10, dim=1, init=ps.Zeros(), access=ps.Access(push=(me,), assign=(me,))),
              ps.Embedding("theirs", rows=10, dim=1, init=ps.Zeros(),
                           access=ps.Access(push=(me + 1, ps.REMOTE), assign=(me + 1,)))]
    server = one_shard(tables)
    one = np.ones((1, 1), np.float32)
    with ps.Worker(tables, 1, daemon.socket) as w:
        w.push("open", [1], one)
        w.push("mine", [1], one)
        w.assign("mine", [2], one)
        with pytest.raises(ferry.PermissionDenied, match="Forbidden"):
            w.push("theirs", [1], one)
        with pytest.raises(ferry.PermissionDenied, match="Forbidden"):
            w.assign("theirs", [1], one)
        assert w.pull("theirs", [1]).gather()[0, 0].item() == 0  # pull is open to all; nothing was written
    server.stop()
    assert server.counters()["forbidden"] == 2
    with pytest.raises(ValueError):
        ps.Embedding("x", rows=1, dim=1, access=ps.Access(push=())).spec(0)
    with pytest.raises(ValueError):
        ps.Embedding("x", rows=1, dim=1, access=ps.Access(push=("alice",))).spec(0)
    # The spec travels to shard processes as JSON, access included.
    t = tables[2]
    assert ps.Table.from_dict(json.loads(json.dumps(t.to_dict()))) == t


@pytest.mark.parametrize("abstract", [False, True])
def test_shard_server_tells_systemd_it_is_ready_and_stopping(daemon, tmp_path, abstract):
    """Type=notify (ferry-ps-shard@.service): READY=1 with a STATUS once it serves, STOPPING=1 on SIGTERM."""
    import socket as _socket
    listener = _socket.socket(_socket.AF_UNIX, _socket.SOCK_DGRAM)
    name = "ferry-notify-%d-%s" % (os.getpid(), tmp_path.name) if abstract else str(tmp_path / "notify")
    listener.bind("\0" + name if abstract else name)
    listener.settimeout(30)
    tj = json.dumps([ps.Embedding("t", rows=10, dim=4).to_dict()])
    env = dict(os.environ, NOTIFY_SOCKET="@" + name if abstract else name)
    p = subprocess.Popen([sys.executable, "-m", "ferry.ps.server", "--socket", daemon.socket, "--tables", tj,
                          "--shard", "0/1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert p.stdout.readline().startswith("ready ")
        assert listener.recv(4096).decode() == "READY=1\nSTATUS=serving ps-shard-0 (shard 0 of 1)"
        p.terminate()
        assert listener.recv(4096).decode() == "STOPPING=1"
        out, err = p.communicate(timeout=30)
        assert p.returncode == 0, err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        listener.close()


def test_shard_server_stops_on_a_signal_whenever_it_comes(daemon):
    """SIGTERM at every call serve()'s loop makes, five times over: each stops.
    Its handler once took the lock Event.wait held, and a shard hung for ever
    on the SIGTERM that came at that moment (about 3 in 100 stops)."""
    p = subprocess.Popen([sys.executable, "-X", "faulthandler", os.path.join(HERE, "helpers.py"), "signalled",
                          daemon.socket, "5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGABRT)  # faulthandler: where it hangs
        out, err = p.communicate()
        pytest.fail("serve() did not stop on SIGTERM:\n" + err[-3000:])
    assert p.returncode == 0 and out == "stopped 5\n", err


def test_shard_server_serves_its_counters_for_prometheus(daemon):
    """--metrics HOST:PORT: counters and table usage at /metrics while it serves; a bad or taken address refused."""
    import urllib.error
    import urllib.request
    from conftest import free_port
    tables = [ps.Embedding("emb", rows=1000, dim=4), ps.Dense("head", size=10)]
    tj = json.dumps([t.to_dict() for t in tables])
    port = free_port(1)
    cmd = [sys.executable, "-m", "ferry.ps.server", "--socket", daemon.socket, "--tables", tj, "--shard", "0/1"]
    p = subprocess.Popen(cmd + ["--metrics", "127.0.0.1:%d" % port], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline().startswith("ready ")
        with ps.Worker(tables, 1, daemon.socket) as w:
            for _ in range(3):
                w.pull("emb", [1, 2, 3])
            w.push("emb", np.arange(40), np.ones((40, 4), np.float32))
            with pytest.raises(ferry.Error):
                w.push("emb", [5], [[float("nan")] * 4])
        url = "http://127.0.0.1:%d/metrics" % port
        with urllib.request.urlopen(url, timeout=10) as r:
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = r.read().decode()
        values = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                values[name] = int(value)
        base = 'service="ps-shard-0",shard="0",shards="1"'
        assert values["ferry_ps_shard_up{%s}" % base] == 1
        assert values["ferry_ps_shard_pulls_total{%s}" % base] == 3
        assert values["ferry_ps_shard_pushes_total{%s}" % base] == 1
        assert values["ferry_ps_shard_non_finite_total{%s}" % base] == 1
        assert values["ferry_ps_shard_rejected_total{%s}" % base] == 1
        assert values['ferry_ps_shard_table_rows{%s,table="emb"}' % base] == 40
        assert values['ferry_ps_shard_table_rows{%s,table="head"}' % base] == 10
        assert "# TYPE ferry_ps_shard_requests_total counter" in text
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen("http://127.0.0.1:%d/other" % port, timeout=10)
        assert e.value.code == 404
        # Its address is taken while it serves: a second one says so in one line.
        r = subprocess.run(cmd + ["--metrics", "127.0.0.1:%d" % port, "--service-prefix", "other-"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and r.stderr.count("\n") == 1 and "--metrics 127.0.0.1:%d" % port in r.stderr
        r = subprocess.run(cmd + ["--metrics", "nowhere"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "--metrics: HOST:PORT" in r.stderr
    finally:
        p.terminate()
        p.communicate(timeout=30)
    assert p.returncode == 0
