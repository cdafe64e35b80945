"""Packaging: a wheel installs exactly one top-level package, `tidelog`, so it cannot shadow (or be shadowed
by) a user's own `config`, `storage`, `broker`... packages, and the pytest plugin works in such a project."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow

USER_TEST = '''
from kafka import KafkaAdminClient

import config


def test_users_config_and_tidelog_fixture(tidelog_bootstrap):
    assert config.USERS_OWN == "yes"
    admin = KafkaAdminClient(bootstrap_servers=tidelog_bootstrap)
    try:
        assert admin.list_topics() == []
    finally:
        admin.close()
'''


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT)],
                   check=True, capture_output=True, timeout=600)
    (found,) = out.glob("tidelog-*.whl")
    return found


def test_wheel_has_one_top_level_package(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    top = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert top == {"tidelog"}
    for sub in ("broker", "protocol", "storage", "cleaner", "config", "coordinator", "pipeline"):
        assert f"tidelog/{sub}/__init__.py" in names


def test_plugin_runs_in_a_project_with_its_own_config_package(wheel: Path, tmp_path: Path) -> None:
    """The user's `config` package comes first on sys.path; tidelog (installed from the wheel) must not
    import it in place of its own."""
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    project = tmp_path / "project"
    (project / "config").mkdir(parents=True)
    (project / "config" / "__init__.py").write_text('USERS_OWN = "yes"\n')
    (project / "test_app.py").write_text(USER_TEST)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(project), str(site)]))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(project)],
                         cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 passed" in out.stdout
    # and it really was the wheel's tidelog that served the fixture
    where = subprocess.run([sys.executable, "-c", "import tidelog; print(tidelog.__file__)"], cwd=project,
                           env=env, capture_output=True, text=True, timeout=60)
    assert where.stdout.strip().startswith(str(site))
