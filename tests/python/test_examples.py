"""The examples a user pastes (client/python/examples/) run as they are, against a real ferryd."""

import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "client", "python", "examples")


def test_quickstart_runs_and_learns(daemon):
    path = os.path.join(EXAMPLES, "quickstart.py")
    with open(path) as f:
        assert len(f.read().rstrip("\n").splitlines()) <= 20  # the README's budget
    env = dict(os.environ, FERRY_SOCKET=daemon.socket)
    p = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=120, env=env)
    print(p.stdout, p.stderr[-2000:])
    assert p.returncode == 0
    losses = [float(x) for x in re.findall(r"loss ([0-9.]+)", p.stdout)]
    assert len(losses) == 5
    assert losses[-1] < 0.5 * losses[0], losses  # it learned, through the parameter server


def test_meson_install_puts_the_package_on_debian_pythons_path():
    """`meson install` puts ferry/ where /usr/bin/python3 looks for the configured prefix."""
    import json
    build = os.environ["FERRY_BUILD_ROOT"]
    with open(os.path.join(build, "meson-info", "intro-installed.json")) as f:
        installed = json.load(f)
    ext = [dst for src, dst in installed.items() if os.path.basename(src).startswith("_ferry.")]
    init = [dst for src, dst in installed.items() if src.endswith(os.path.join("ferry", "ps", "__init__.py"))]
    assert len(ext) == 1 and len(init) == 1
    site = os.path.dirname(os.path.dirname(ext[0]))
    assert os.path.dirname(os.path.dirname(init[0])) == os.path.join(site, "ferry")
    with open(os.path.join(build, "meson-info", "intro-buildoptions.json")) as f:
        prefix = next(o["value"] for o in json.load(f) if o["name"] == "prefix")
    if prefix in ("/usr", "/usr/local"):
        out = subprocess.run(["/usr/bin/python3", "-c", "import sys; print('\\n'.join(sys.path))"],
                             capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin"}).stdout
        assert site in out.split("\n"), (site, out)


def test_ps_bench_entry_finds_its_examples_after_meson_install(tmp_path):
    """`python3 -m ferry.ps.bench` keeps its contract after `meson install`: the
    thin entry in the package finds examples/python/bench.py under PREFIX/share."""
    import json
    build = os.environ["FERRY_BUILD_ROOT"]
    dest = tmp_path / "dest"
    p = subprocess.run(["meson", "install", "-C", build, "--destdir", str(dest), "--no-rebuild", "--quiet"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    with open(os.path.join(build, "meson-info", "intro-installed.json")) as f:
        installed = json.load(f)
    init = next(dst for src, dst in installed.items() if src.endswith(os.path.join("ferry", "ps", "bench.py")))
    site = os.path.dirname(os.path.dirname(os.path.dirname(init)))
    bench = [dst for src, dst in installed.items() if src.endswith(os.path.join("examples", "python", "bench.py"))]
    assert len(bench) == 1 and "/share/ferry/examples/python/" in bench[0]
    libs = sorted({os.path.dirname(dst) for dst in installed.values() if os.path.basename(dst).startswith("libferry")})
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(dest) + site,
           "LD_LIBRARY_PATH": ":".join(str(dest) + d for d in libs)}
    out = subprocess.run([sys.executable, "-c", "import ferry.ps.bench as b; print(b.examples_dir())"],
                         capture_output=True, text=True, timeout=60, env=env, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(dest) + os.path.dirname(bench[0])
    h = subprocess.run([sys.executable, "-m", "ferry.ps.bench", "--help"], capture_output=True, text=True, timeout=60,
                       env=env, cwd=str(tmp_path))
    assert h.returncode == 0 and "--baseline" in h.stdout and "--server-socket" in h.stdout, h.stderr
