#!/usr/bin/env python3
"""run_examples.py FERRYD EXAMPLE...: starts a real ferryd (tcp transport, a
private runtime directory), runs each README example against it and checks
that it exits 0 and prints the echoed "hello, ferry". Every wait is bounded."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

EXPECTED = "hello, ferry\n"


def main() -> int:
    if len(sys.argv) < 3:
        print("usage: run_examples.py FERRYD EXAMPLE...", file=sys.stderr)
        return 2
    ferryd, examples = sys.argv[1], sys.argv[2:]
    rt = tempfile.mkdtemp(prefix="ferry-examples-")
    log = open(os.path.join(rt, "ferryd.log"), "w+")
    daemon = subprocess.Popen([ferryd, "--runtime-dir", rt, "--transport", "tcp"],
                              stdout=log, stderr=subprocess.STDOUT)
    failures = 0
    try:
        sock = os.path.join(rt, "ferryd.sock")
        deadline = time.monotonic() + 15
        while not os.path.exists(os.path.join(rt, "control.sock")):
            if daemon.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                print("ferryd did not start:\n" + log.read(), file=sys.stderr)
                return 1
            time.sleep(0.02)
        env = dict(os.environ, FERRY_SOCKET=sock)
        for exe in examples:
            name = os.path.basename(exe)
            try:
                run = subprocess.run([exe], env=env, capture_output=True, text=True, timeout=30)
            except subprocess.TimeoutExpired:
                print(f"FAIL {name}: still running after 30 s", file=sys.stderr)
                failures += 1
                continue
            if run.returncode != 0 or run.stdout != EXPECTED:
                print(f"FAIL {name}: exit {run.returncode}, stdout {run.stdout!r}, "
                      f"stderr {run.stderr!r}, expected {EXPECTED!r}", file=sys.stderr)
                failures += 1
            else:
                print(f"ok {name}: {run.stdout.strip()!r}")
        if daemon.poll() is not None:
            print(f"FAIL ferryd exited ({daemon.returncode}) during the examples", file=sys.stderr)
            failures += 1
    finally:
        if daemon.poll() is None:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(timeout=10)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait(timeout=10)
        if failures:
            log.seek(0)
            print("ferryd log:\n" + log.read(), file=sys.stderr)
        log.close()
        shutil.rmtree(rt, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
