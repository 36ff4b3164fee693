#!/usr/bin/env python3
"""ferryd configuration: --check-config exit codes and messages, file + flag
precedence, the example file, socket-group and auth-secret-file checks
(mode, type, minimum length).
usage: test_config.py FERRYD EXAMPLE_CONF"""
import grp
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile

from opslib import Daemon, Fail, Skip, check, main, run, wait_until

FERRYD, EXAMPLE = [os.path.abspath(a) for a in sys.argv[1:3]]
TMP = tempfile.mkdtemp(prefix="ferry-ops-config-")


def write(name, text, mode=0o644):
    p = os.path.join(TMP, name)
    with open(p, "w") as f:
        f.write(text)
    os.chmod(p, mode)
    return p


def check_config(*args):
    return run([FERRYD, "--check-config"] + list(args))


def effective(out):
    return dict(l.split(" = ", 1) for l in out.splitlines() if " = " in l and not l.startswith("#"))


def test_defaults_ok():
    r = check_config("--config", write("empty.conf", ""))
    check(r.returncode == 0, "exit %d: %s" % (r.returncode, r.stderr))
    check(r.stdout.startswith("configuration OK\n"), "first line: %r" % r.stdout[:40])
    s = effective(r.stdout)
    check(s["max-clients"] == "256" and s["log-level"] == "info" and s["gid-index"] == "auto", "defaults: %r" % s)


def test_bad_values_name_key_and_range():
    cases = [
        (["--max-clients", "0"], "max-clients", "[1, 4096]"),
        (["--sq-entries", "100"], "sq-entries", "power of two"),
        (["--cq-entries", "131072"], "cq-entries", "[64, 65536]"),
        (["--delivery-timeout-ms", "-5"], "delivery-timeout-ms", "unsigned integer"),
        (["--engine-spin-us", "12abc"], "engine-spin-us", "unsigned integer"),
        (["--tx-arena-bytes", "2g"], "tx-arena-bytes", "in ["),
        (["--transport", "carrier-pigeon"], "transport", "rdma, tcp, auto"),
        (["--log-level", "loud"], "log-level", "trace, debug, info, warn, error"),
        (["--gid-index", "256"], "gid-index", "[0, 255]"),
        (["--listen", "198.18.0.1"], "listen", "HOST:PORT"),
        (["--heartbeat-ms", "1"], "heartbeat-ms", "[10, 60000]"),
        (["--channel-conns", "9"], "channel-conns", "[1, 8]"),
        (["--socket-group", "no-such-group-ferry"], "socket-group", "no such group"),
    ]
    for args, key, text in cases:
        r = check_config(*args)
        check(r.returncode == 2, "%s: exit %d (expected 2)" % (args, r.returncode))
        check(key in r.stderr and text in r.stderr, "%s: message %r lacks %r / %r" % (args, r.stderr, key, text))
        check("configuration OK" not in r.stdout, "%s: printed OK" % args)


def test_bad_values_in_file():
    r = check_config("--config", write("bad.conf", "max-clients = 5000\n"))
    check(r.returncode == 2 and "max-clients" in r.stderr and "[1, 4096]" in r.stderr, "file value: " + r.stderr)
    r = check_config("--config", write("unknown.conf", "max-clientz = 5\n"))
    check(r.returncode == 2 and "max-clientz" in r.stderr, "unknown key: " + r.stderr)
    r = check_config("--config", os.path.join(TMP, "does-not-exist.conf"))
    check(r.returncode == 2 and "does-not-exist.conf" in r.stderr, "missing file: " + r.stderr)


def test_flags_override_file():
    cfg = write("prec.conf", "log-level = debug\nmax-clients = 17\nsq-entries = 256\n")
    s = effective(check_config("--config", cfg, "--log-level", "warn", "--max-clients", "9").stdout)
    check(s["log-level"] == "warn" and s["max-clients"] == "9", "flags did not win: %r" % s)
    check(s["sq-entries"] == "256", "file value lost: %r" % s)
    # And a real daemon runs with it (check-config and start-up share the parser).
    with Daemon(FERRYD, ["--config", cfg, "--max-clients", "9"]) as d:
        d.wait_ready()
        check(d.stop() == 0, "exit")


def test_example_documents_every_key_with_its_default():
    text = open(EXAMPLE).read()
    keys = effective(check_config("--config", write("e.conf", "")).stdout)
    for k in keys:
        check(re.search(r"^#%s =" % re.escape(k), text, re.M), "example config lacks key %s" % k)
    # Uncommenting every key must give exactly the defaults.
    uncommented = write("uncommented.conf", re.sub(r"^#([a-z])", r"\1", text, flags=re.M))
    r = check_config("--config", uncommented)
    check(r.returncode == 0, "uncommented example rejected: " + r.stderr)
    check(effective(r.stdout) == keys, "example defaults differ from ferryd's:\n%s\nvs\n%s" % (r.stdout, keys))


def test_check_config_output_is_a_config_file():
    r = check_config("--config", write("o.conf", "max-clients = 33\nlog-level = warn\n"))
    again = write("again.conf", r.stdout.split("\n", 1)[1])
    r2 = check_config("--config", again)
    check(r2.returncode == 0 and effective(r2.stdout) == effective(r.stdout), "round trip: " + r2.stderr)


def test_auth_secret_file_permissions():
    loose = write("secret-loose", "s3cret\n", 0o644)
    r = check_config("--auth-secret-file", loose)
    check(r.returncode == 2 and "auth-secret-file" in r.stderr and "0644" in r.stderr, "0644 accepted: " + r.stderr)
    tight = write("secret-tight", "s3cret-s3cret-s3cret-s3cret\n", 0o600)
    r = check_config("--auth-secret-file", tight)
    check(r.returncode == 0, "0600 rejected: " + r.stderr)
    # Too short to be a secret (6 bytes after the newline is trimmed); the
    # error names the key and never echoes the contents.
    short = write("secret-short", "s3cret\n", 0o600)
    r = check_config("--auth-secret-file", short)
    check(r.returncode == 2 and "auth-secret-file" in r.stderr and "at least 16" in r.stderr
          and "s3cret" not in r.stderr.replace(short, ""), "short secret accepted: " + r.stderr)
    r = check_config("--auth-secret-file", TMP)
    check(r.returncode == 2 and "not a regular file" in r.stderr, "directory accepted: " + r.stderr)


def test_socket_group_applied():
    try:
        g = grp.getgrnam("daemon")
    except KeyError:
        raise Skip("no 'daemon' group")
    with Daemon(FERRYD, ["--socket-group", "daemon"]) as d:
        d.wait_ready()
        for p in (d.socket, d.control):
            st = os.lstat(p)
            check(st.st_gid == g.gr_gid, "%s group %d, expected %d" % (p, st.st_gid, g.gr_gid))
            check(stat.S_IMODE(st.st_mode) == 0o660, "%s mode %o" % (p, stat.S_IMODE(st.st_mode)))
        check(d.stop() == 0, "exit")


def test_config_must_be_a_small_regular_file():
    # A directory used to read as an empty file, /dev/zero hung --check-config.
    r = check_config("--config", TMP)
    check(r.returncode == 2 and "is a directory" in r.stderr, "directory as config: %d %s" % (r.returncode, r.stderr))
    try:
        r = run([FERRYD, "--check-config", "--config", "/dev/zero"], timeout=5)
    except subprocess.TimeoutExpired:
        raise AssertionError("--check-config --config /dev/zero did not finish within 5 s")
    check(r.returncode == 2 and "is a device" in r.stderr, "/dev/zero as config: %d %s" % (r.returncode, r.stderr))
    fifo = os.path.join(TMP, "config.fifo")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    try:
        r = run([FERRYD, "--check-config", "--config", fifo], timeout=5)
    except subprocess.TimeoutExpired:
        raise AssertionError("--check-config --config FIFO waited for a writer")
    check(r.returncode == 2 and "is a FIFO" in r.stderr, "FIFO as config: %d %s" % (r.returncode, r.stderr))
    big = write("big.conf", "# padding\n" * 200000)  # 2 MB
    r = check_config("--config", big)
    check(r.returncode == 2 and "at most" in r.stderr, "2 MB config accepted: " + r.stderr)


def test_file_keys_are_checked():
    cases = [
        ("help = 1\n", "command-line option"),
        ("check-config = 1\n", "command-line option"),
        ("config = /etc/other.conf\n", "command-line option"),
        ("max-clients = 9\nmax-clients = 10\n", "set twice"),
        ("[section]\nmax-clients = 9\n", "sections"),
        ("max-clients 9\n", "key = value"),
    ]
    for text, want in cases:
        r = check_config("--config", write("keys.conf", text))
        check(r.returncode == 2 and want in r.stderr and "keys.conf:" in r.stderr,
              "%r: exit %d, %r lacks %r" % (text, r.returncode, r.stderr, want))


def test_check_config_agrees_with_start_up():
    # A name where start-up needs a numeric address: --check-config said OK.
    r = check_config("--listen", "localhost:7000")
    check(r.returncode == 2 and "listen" in r.stderr and "numeric" in r.stderr, "localhost accepted: " + r.stderr)
    check(check_config("--listen", "127.0.0.1:7000").returncode == 0, "numeric IPv4 refused")
    check(check_config("--listen", "[::1]:7000").returncode == 0, "numeric IPv6 refused")
    # Cross-field: a peer timeout shorter than the heartbeat kills every channel.
    r = check_config("--heartbeat-ms", "60000", "--peer-timeout-ms", "20")
    check(r.returncode == 2 and "peer-timeout-ms" in r.stderr and "heartbeat-ms" in r.stderr,
          "heartbeat 60000 / peer timeout 20 accepted: " + r.stderr)
    check(check_config("--heartbeat-ms", "100", "--peer-timeout-ms", "300").returncode == 0, "3 x heartbeat refused")
    r = check_config("--max-memory-bytes-per-uid", "32m")
    check(r.returncode == 2 and "no client of the default size" in r.stderr, "quota below one client: " + r.stderr)


def test_a_daemon_no_peer_could_open_a_channel_to_is_cautioned():
    # Two slots on tcp lanes keep one for dials and admit one connection not
    # yet taken by a channel: a peer's bootstrap and lane arrive together,
    # so no peer could ever open a channel here. It still dials, so it runs.
    args = ["--transport", "tcp", "--peer-max-connections", "2", "--channel-conns", "1"]
    r = check_config(*args)
    lines = r.stdout.splitlines()
    check(r.returncode == 0 and lines[0] == "configuration OK", "exit %d: %r" % (r.returncode, r.stdout[:200]))
    check(len(lines) > 1 and lines[1].startswith("caution: peer-max-connections 2 keeps 1 slots")
          and "no peer could open one here" in lines[1], "no caution: %r" % lines[:3])
    check(effective(r.stdout)["peer-max-connections"] == "2", "the settings still follow the caution")
    good = check_config("--transport", "tcp", "--peer-max-connections", "3", "--channel-conns", "1")
    check(good.returncode == 0 and "caution:" not in good.stdout, "3 slots cautioned: %r" % good.stdout[:300])
    with Daemon(FERRYD, args[2:]) as d:  # Daemon names --transport tcp itself
        d.wait_ready()
        log = d.log_text()
        check("[warning] peer-max-connections 2 keeps 1 slots" in log, "start-up did not warn:\n" + log)
        check(d.stop() == 0, "exit")


def _hold_the_port_after_a_free_one():
    # A socket listening on BASE+1 where BASE was free when probed.
    for _ in range(50):
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        base = probe.getsockname()[1]
        probe.close()
        holder = socket.socket()
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            holder.bind(("127.0.0.1", base + 1))
        except OSError:
            holder.close()
            continue
        holder.listen(1)
        return base, holder
    raise Skip("no two free consecutive ports")


def test_a_port_taken_from_an_engines_range_is_named():
    # Engine i listens on PORT+i: a port in the range that something else
    # holds (often another ferryd's engine) stops start-up with the range.
    # Another test may take BASE itself between the probe and ferryd's bind
    # (engine 0 is then the one refused): that try is drawn again.
    for _ in range(5):
        base, holder = _hold_the_port_after_a_free_one()
        try:
            with Daemon(FERRYD, ["--engines", "2", "--listen", "127.0.0.1:%d" % base]) as d:
                rc = d.proc.wait(10)
                log = d.log_text()
        finally:
            holder.close()
        check(rc != 0, "ferryd started with engine 1's port taken")
        if "(engine 0 of 2): Busy" in log:
            continue
        want = "cannot listen for peers on 127.0.0.1:%d (engine 1 of 2): Busy" % (base + 1)
        check(want in log, "no %r in:\n%s" % (want, log))
        check("2 engines need ports %d to %d free" % (base, base + 1) in log, "range not named:\n" + log)
        return
    raise Fail("the probed free port was taken before ferryd bound it, five times running")


def test_reload_of_a_broken_file_keeps_the_running_configuration():
    cfg = write("reload.conf", "log-level = debug\nmax-clients = 9\n")
    with Daemon(FERRYD, ["--config", cfg]) as d:
        d.wait_ready()
        os.remove(cfg)
        os.mkdir(cfg)  # the path now names a directory
        try:
            d.proc.send_signal(signal.SIGHUP)
            wait_until(lambda: "reload rejected" in d.log_text(), 10, "reload rejected")
            log = d.log_text()
            check("is a directory" in log, "reason not logged:\n" + log)
            check("log-level changed" not in log, "a reload from a directory applied defaults:\n" + log)
        finally:
            os.rmdir(cfg)
        check(d.stop() == 0, "exit")


def test_help_and_describe_come_from_one_table():
    keys = effective(check_config("--config", write("d.conf", "")).stdout)
    r = run([FERRYD, "--describe"])
    check(r.returncode == 0, "--describe: " + r.stderr)
    table = {k["name"]: k for k in json.loads(r.stdout)}
    for k, v in keys.items():
        check(k in table, "--describe lacks %s" % k)
        check(table[k]["default"] == v, "%s: --describe default %r, effective %r" % (k, table[k]["default"], v))
    for k in ("help", "config", "check-config", "describe", "version"):
        check(table[k]["scope"] == "command-line", "%s should be command-line only: %r" % (k, table[k]))
    helptext = run([FERRYD, "--help"]).stdout
    for k in table:
        check("--" + k in helptext, "--help lacks --%s" % k)
    v = run([FERRYD, "--version"])
    check(v.returncode == 0 and v.stdout.startswith("ferryd ") and "fault injection:" in v.stdout, v.stdout)


def test_default_config_path():
    # /etc/ferry/ferryd.conf is read when --config is absent. Prove it in a
    # private mount namespace so the host's /etc is never touched.
    if shutil.which("unshare") is None or os.geteuid() != 0:
        raise Skip("needs root and unshare")
    etc = os.path.join(TMP, "etc-ferry")
    os.makedirs(etc, exist_ok=True)
    with open(os.path.join(etc, "ferryd.conf"), "w") as f:
        f.write("max-clients = 77\n")
    # An overlay on /etc inside the namespace: /etc/ferry appears only there.
    upper, work = os.path.join(TMP, "upper"), os.path.join(TMP, "work")
    os.makedirs(os.path.join(upper, "ferry"), exist_ok=True)
    os.makedirs(work, exist_ok=True)
    shutil.copy(os.path.join(etc, "ferryd.conf"), os.path.join(upper, "ferry", "ferryd.conf"))
    script = ("mount -t overlay overlay -o lowerdir=/etc,upperdir=%s,workdir=%s /etc && exec %s --check-config"
              % (upper, work, FERRYD))
    r = run(["unshare", "-m", "--propagation", "private", "sh", "-c", script])
    if r.returncode != 0 and ("unshare" in r.stderr or "mount" in r.stderr):
        raise Skip("private overlay of /etc not possible here: " + r.stderr.strip())
    check(r.returncode == 0, "exit %d: %s" % (r.returncode, r.stderr))
    s = effective(r.stdout)
    check(s["max-clients"] == "77" and "/etc/ferry/ferryd.conf" in r.stdout, "default file not read: " + r.stdout)


if __name__ == "__main__":
    main([(k, v) for k, v in list(globals().items()) if k.startswith("test_")])
