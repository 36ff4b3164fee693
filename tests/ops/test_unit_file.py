#!/usr/bin/env python3
"""The systemd unit: systemd-analyze verify with no warnings, the offline
security score, and the directives the brief requires.
usage: test_unit_file.py UNIT FERRYD"""
import os
import re
import shutil
import sys
import tempfile

from opslib import Skip, check, main, run

UNIT, FERRYD = [os.path.abspath(a) for a in sys.argv[1:3]]
TEXT = open(UNIT).read()


def verifiable_copy():
    # verify insists that ExecStart exists: point it at the built ferryd.
    d = tempfile.mkdtemp(prefix="ferry-ops-unit-")
    p = os.path.join(d, "ferryd.service")
    with open(p, "w") as f:
        f.write(re.sub(r"^ExecStart=\S+", "ExecStart=" + FERRYD, TEXT, flags=re.M))
    return p


def test_directives():
    for d in ["Type=notify", "NotifyAccess=main", "RuntimeDirectory=ferry", "LimitMEMLOCK=infinity",
              "Restart=on-failure", "ExecReload=/bin/kill -HUP $MAINPID", "ProtectSystem=strict", "ProtectHome=yes",
              "NoNewPrivileges=yes", "PrivateTmp=yes", "ProtectKernelTunables=yes", "ProtectControlGroups=yes",
              "DeviceAllow=char-infiniband_verbs rw", "DeviceAllow=/dev/infiniband/rdma_cm rw",
              "WantedBy=multi-user.target"]:
        check(re.search("^" + re.escape(d) + "$", TEXT, re.M), "unit lacks %s" % d)
    fam = re.search(r"^RestrictAddressFamilies=(.*)$", TEXT, re.M)
    check(fam and set(fam.group(1).split()) == {"AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK", "AF_IB"},
          "RestrictAddressFamilies: %r" % (fam and fam.group(1)))
    check(not re.search(r"^PrivateDevices=yes", TEXT, re.M), "PrivateDevices=yes would hide /dev/infiniband")
    exe = re.search(r"^ExecStart=(\S+)", TEXT, re.M).group(1)
    check(exe.endswith("/sbin/ferryd"), "ExecStart not the sbin ferryd: " + exe)


def test_systemd_analyze_verify():
    if shutil.which("systemd-analyze") is None:
        raise Skip("systemd-analyze not installed")
    r = run(["systemd-analyze", "verify", "--man=no", verifiable_copy()])
    check(r.returncode == 0, "verify failed: " + r.stdout + r.stderr)
    # verify only warns about unknown keys or bad values: any output is a defect.
    check(not (r.stdout + r.stderr).strip(), "verify warnings:\n" + r.stdout + r.stderr)


def test_security_exposure():
    if shutil.which("systemd-analyze") is None:
        raise Skip("systemd-analyze not installed")
    r = run(["systemd-analyze", "security", "--offline=true", "--no-pager", "--threshold=50", verifiable_copy()])
    check(r.returncode == 0, "exposure above 5.0 or analysis failed:\n" + r.stdout[-600:] + r.stderr)
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", r.stdout)
    check(m and float(m.group(1)) <= 5.0, "exposure: %r" % (m and m.group(0)))


if __name__ == "__main__":
    main([(k, v) for k, v in list(globals().items()) if k.startswith("test_")])
