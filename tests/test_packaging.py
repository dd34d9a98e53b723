"""One installed name: a wheel built from the repo adds only ``syncplan`` to site-packages, and
pyproject's package list holds every package folder."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_the_package_list_holds_every_package_folder() -> None:
    found = set()
    for name, folder in CONFIG["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            found.add(".".join([name, *init.parent.relative_to(ROOT / folder).parts]))
    assert sorted(found) == sorted(CONFIG["packages"])


@pytest.mark.slow
def test_a_wheel_adds_only_syncplan(tmp_path: Path) -> None:
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    res = subprocess.run(
        [*pip, "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    (wheel,) = tmp_path.glob("syncplan-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"syncplan"}
    for side in ("core", "planner", "api", "agents", "executor"):
        assert f"syncplan/{side}/__init__.py" in names
    assert "syncplan/planner/algorithms/__init__.py" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names[-8:]


AGENT_CHECK = """
import importlib.abc, pkgutil, sys
BLOCKED = {"networkx", "highspy", "scipy", "numpy", "yaml", "torch", "fastapi"}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())
import syncplan.agents
for m in pkgutil.iter_modules(syncplan.agents.__path__):
    if m.name != "record_nvml":
        importlib.import_module("syncplan.agents." + m.name)
from syncplan.cli import main
main(["agent", "--help"])
"""


def test_the_agent_runs_without_the_planners_dependencies() -> None:
    """An agent host installs the `agent` extra only: no solver, numpy, torch or FastAPI."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    agent = " ".join(extras["optional-dependencies"]["agent"] + extras["dependencies"])
    for heavy in ("networkx", "highspy", "scipy", "numpy", "torch", "fastapi", "planner"):
        assert heavy not in agent
    res = subprocess.run(
        [sys.executable, "-c", AGENT_CHECK], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert "usage: syncplan agent" in res.stdout
