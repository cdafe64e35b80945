"""The compiled cores ship where users install: `python -m build` makes a platform wheel carrying every C
accelerator setup.py declares, and once installed in a fresh venv each of them loads and `tidelog serve` says so
in one structured log line. The wheel's dependencies come from this venv's site-packages (a .pth file), so the
install needs no index."""

from __future__ import annotations

import importlib.machinery
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.accelerators import require_built
from tidelog.accelerators import declared_extensions

ROOT = Path(__file__).resolve().parent.parent
SETUP_PY = ROOT / "setup.py"

pytestmark = pytest.mark.slow

# What setup.py's setup() is given, by running it with setup() replaced (the AST reading of tidelog.accelerators
# must agree with it).
_CAPTURE = """
import json, setuptools
captured = {}
setuptools.setup = lambda **kw: captured.update(kw)
exec(compile(open("setup.py").read(), "setup.py", "exec"), {"__name__": "__main__"})
print(json.dumps(sorted(e.name for e in captured["ext_modules"])))
"""


def has_compiler() -> bool:
    cc = (sysconfig.get_config_var("CC") or "cc").split()
    return bool(cc) and shutil.which(cc[0]) is not None


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_built(has_compiler(), "a C compiler for the accelerators")  # skipped without one, but not on CI
    out = tmp_path_factory.mktemp("dist")
    env = dict(os.environ, TIDELOG_REQUIRE_ACCELERATORS="1")  # a compile failure fails the build
    done = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(ROOT)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (found,) = out.glob("tidelog-*.whl")
    return found


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv holding the wheel (no deps); this venv's site-packages supplies the dependencies."""
    home = tmp_path_factory.mktemp("venv") / "v"
    # The environment the test process was started with may name this checkout (PYTHONPATH): pip would then
    # find tidelog already installed in the new venv and skip the wheel.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home)], check=True, timeout=120,
                   env=clean_env())
    python = home / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    "--no-index", str(wheel)], check=True, capture_output=True, timeout=300, env=clean_env())
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True, env=clean_env()).stdout.strip())
    # Appended after the venv's own site-packages: the wheel's tidelog comes first, and the editable checkout
    # that this venv's .pth files name is not reached (a plain path line processes no .pth files).
    (site / "tidelog-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    yield home


def declared() -> list[str]:
    names = declared_extensions(SETUP_PY)
    ran = subprocess.run([sys.executable, "-c", _CAPTURE], cwd=ROOT, check=True, capture_output=True, text=True)
    assert json.loads(ran.stdout) == names  # setup.py's Extensions are all found by reading it
    assert "tidelog.protocol._record_walk" in names and "tidelog.protocol._produce_codec" in names
    return names


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TIDELOG_", "PYTHON"))}
    return env


def test_wheel_is_a_platform_wheel_with_every_accelerator(wheel: Path) -> None:
    assert not wheel.name.endswith("-none-any.whl"), wheel.name
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    for module in declared():
        stem = module.replace(".", "/")
        assert any(n.startswith(stem) and n.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
                   for n in names), f"{module} is not compiled into {wheel.name}"


def test_installed_wheel_loads_every_accelerator(venv: Path, tmp_path: Path) -> None:
    python = str(venv / "bin" / "python")
    checked = subprocess.run([python, "-m", "tidelog.accelerators", "--check", str(SETUP_PY)], cwd=tmp_path,
                             env=clean_env(), capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    status = json.loads(checked.stdout)
    assert status["active"] == declared() and status["failed"] == {}
    where = subprocess.run([python, "-c", "import importlib, json, sys; print(json.dumps("
                            "[importlib.import_module(m).__file__ for m in sys.argv[1:]]))", *declared()],
                           cwd=tmp_path, env=clean_env(), check=True, capture_output=True, text=True)
    for path in json.loads(where.stdout):
        assert Path(path).is_relative_to(venv), path  # the wheel's modules, not the checkout's
    # and the check fails, naming them, when they do not run (what a wheel built without a compiler gives)
    pure = subprocess.run([python, "-m", "tidelog.accelerators", "--check", str(SETUP_PY)], cwd=tmp_path,
                          env=dict(clean_env(), TIDELOG_PURE_PYTHON="1"), capture_output=True, text=True, timeout=120)
    assert pure.returncode == 1 and all(name in pure.stderr for name in declared()), pure.stderr


def serve_log_lines(venv: Path, tmp_path: Path, env: dict[str, str]) -> list[dict[str, object]]:
    """Start the venv's `tidelog serve`, wait until it is ready, stop it (SIGTERM); its JSON log lines."""
    command = [str(venv / "bin" / "tidelog"), "serve", "--host", "127.0.0.1", "--port", "0",
               "--log-dirs", str(tmp_path / "data"), "--log-format", "json"]
    proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()  # blocks until the broker has started (or exited)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert ready.startswith("tidelog ready"), ready + err
    assert proc.returncode == 0, err
    return [json.loads(line) for line in err.splitlines() if line.startswith("{")]


def test_tidelog_serve_logs_its_accelerators_once(venv: Path, tmp_path: Path) -> None:
    lines = serve_log_lines(venv, tmp_path, clean_env())
    accelerators = [line for line in lines if line["event"] == "accelerators"]
    assert len(accelerators) == 1, lines
    assert accelerators[0]["level"] == "info"
    assert accelerators[0]["active"] == declared() and accelerators[0]["failed"] == {}
    assert accelerators[0]["pure_python_forced"] is False


def test_tidelog_serve_warns_when_it_runs_pure_python(venv: Path, tmp_path: Path) -> None:
    lines = serve_log_lines(venv, tmp_path, dict(clean_env(), TIDELOG_PURE_PYTHON="1"))
    (accelerators,) = [line for line in lines if line["event"] == "accelerators"]
    assert accelerators["level"] == "warning"
    assert accelerators["active"] == [] and accelerators["pure_python_forced"] is True
