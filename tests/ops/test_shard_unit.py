#!/usr/bin/env python3
"""The shard servers' systemd template (ferry-ps-shard@.service):
systemd-analyze verify of an instance with no warnings, the offline
security score, and what the unit must say to run beside ferryd.
usage: test_shard_unit.py UNIT"""
import os
import re
import shutil
import sys
import tempfile

from opslib import Skip, check, main, run

UNIT = os.path.abspath(sys.argv[1])
TEXT = open(UNIT).read()


def instance_copy():
    # verify needs an instance, and the units it names: a ferryd.service beside it.
    d = tempfile.mkdtemp(prefix="ferry-ops-shard-unit-")
    with open(os.path.join(d, "ferry-ps-shard@.service"), "w") as f:
        f.write(TEXT)
    with open(os.path.join(d, "ferryd.service"), "w") as f:
        f.write("[Service]\nExecStart=/bin/true\n")
    return os.path.join(d, "ferry-ps-shard@0.service")


def test_directives():
    for d in ["Type=notify", "NotifyAccess=main", "After=ferryd.service", "Wants=ferryd.service",
              "EnvironmentFile=/etc/ferry/ps-shard-%i.conf", "Restart=on-failure",
              "StateDirectory=ferry-ps/%i", "ProtectSystem=strict", "NoNewPrivileges=yes", "PrivateTmp=yes",
              "WantedBy=multi-user.target"]:
        check(re.search("^" + re.escape(d) + "$", TEXT, re.M), "unit lacks %s" % d)
    # A restart of ferryd must leave the shard, and the rows it holds, running: it attaches again.
    for d in ["Requires=", "PartOf=", "BindsTo="]:
        check(not re.search("^" + re.escape(d), TEXT, re.M), "unit has %s: restarting ferryd would restart the shard" % d)
    m = re.search(r"^ExecStart=(\S+) -m ferry\.ps\.server --socket /run/ferry/ferryd\.sock \$FERRY_PS_SHARD_ARGS$",
                  TEXT, re.M)
    check(m, "ExecStart is not the shard server on ferryd's socket")
    check(os.path.isabs(m.group(1)) and "python" in os.path.basename(m.group(1)),
          "ExecStart's interpreter: %s" % m.group(1))


def test_systemd_analyze_verify():
    if shutil.which("systemd-analyze") is None:
        raise Skip("systemd-analyze not installed")
    r = run(["systemd-analyze", "verify", "--man=no", instance_copy()])
    out = (r.stdout + r.stderr).strip()
    check(r.returncode == 0, "verify failed: " + out)
    check(not out, "verify warnings:\n" + out)


def test_security_exposure():
    if shutil.which("systemd-analyze") is None:
        raise Skip("systemd-analyze not installed")
    r = run(["systemd-analyze", "security", "--offline=true", "--no-pager", "--threshold=40", instance_copy()])
    check(r.returncode == 0, "exposure above 4.0 or analysis failed:\n" + r.stdout[-800:] + r.stderr)


if __name__ == "__main__":
    main([(k, v) for k, v in list(globals().items()) if k.startswith("test_")])
