"""The README's commands and samples against what the code does: a stale sample fails.

`SYNCPLAN_UPDATE_README=1 python3 -m pytest -q tests/test_readme.py` rewrites the samples
from the commands' output."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SAMPLE_INTRO = "`syncplan plan --compare` prints one row per algorithm:\n\n```\n"


def blocks(text: str, lang: str = "bash") -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def extra_closure(name: str, extras: dict[str, list[str]]) -> set[str]:
    """Requirement names an extra pulls in, following syncplan[...] references."""
    out: set[str] = set()
    for req in extras[name]:
        ref = re.fullmatch(r"syncplan\[([\w,]+)\]", req)
        if ref:
            for sub in ref.group(1).split(","):
                out |= extra_closure(sub, extras)
        else:
            out.add(re.split(r"[<>=\[ ;]", req, maxsplit=1)[0].lower())
    return out


def test_first_command_installs_the_service_without_torch() -> None:
    first = blocks(README.read_text())[0].strip()
    assert first == 'pip install -e ".[api]" && syncplan serve --demo'
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = meta["optional-dependencies"]
    light = {
        re.split(r"[<>=\[ ;]", r, maxsplit=1)[0].lower() for r in meta["dependencies"]
    } | extra_closure("api", extras)
    assert not light & {"torch", "nvidia-ml-py", "matplotlib"}, light
    assert "torch" in extra_closure("executor", extras)
    text = (ROOT / "pyproject.toml").read_text()
    executor_notes = text[: text.index("executor = [")].rsplit("\n\n", 1)[-1]
    assert "--index-url https://download.pytorch.org/whl/cpu" in executor_notes
    assert "--index-url https://download.pytorch.org/whl/cpu" in README.read_text()


def test_test_commands_full_and_fast() -> None:
    tests = blocks(README.read_text())[2]
    assert 'pip install -e ".[all,test]" && python3 -m pytest -q' in tests
    # torch's CPU build first: the extras then find torch installed and download no CUDA
    cpu = "pip install torch --index-url https://download.pytorch.org/whl/cpu"
    assert tests.index(cpu) < tests.index('pip install -e ".[all,test]"')
    assert 'python3 -m pytest -q -m "not slow"' in tests
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python3 -m pytest -q" in ci and '"torch==2.13.0"' in ci


def test_curl_asks_the_demo_cluster_and_prints_a_summary(tmp_path: Path) -> None:
    from syncplan.api.models import PlanCreate
    from syncplan.planner.plan import make_plan
    from syncplan.planner.topology import load_topology

    curl = blocks(README.read_text())[1]
    body = json.loads(re.search(r"-d '(\{.*?\})'", curl).group(1))
    PlanCreate.model_validate(body)
    topo = load_topology(ROOT / "examples" / "demo.json")
    doc = make_plan(topo, body["ranks"], body["size_bytes"], "ring")
    code = shlex.split(curl.split("| python3 -c ", 1)[1])[0]
    res = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(doc),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.split()[:2] == [doc["plan_id"], doc["algorithm"]]
    assert len(res.stdout) < 200


def test_top_links_exist() -> None:
    top = README.read_text().split("## See the gain", 1)[0]
    links = re.findall(r"\]\(([^)#]+)\)", top)
    assert {"docs/formats.md", "docs/status.md", "LICENSE", "examples/python_api.py"} <= set(links)
    assert "[development status](docs/status.md)" in top
    for link in links:
        assert (ROOT / link).exists(), link
    assert "Apache License" in (ROOT / "LICENSE").read_text()[:200]
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["license"] == "Apache-2.0"


def _syncplan(cmd: str, cwd: Path) -> str:
    res = subprocess.run(
        [sys.executable, "-m", "syncplan", *shlex.split(cmd)[1:]],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert res.returncode == 0, (cmd, res.stderr)
    return res.stdout


@pytest.mark.slow
def test_quickstart_runs_and_the_compare_sample_is_current(tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    text = README.read_text()
    quick = blocks(text.split("## Plan from a topology file", 1)[1])[0]
    outputs = {}
    for line in quick.strip().splitlines():
        if line.startswith("syncplan "):
            outputs[line] = _syncplan(line, tmp_path)
    compare = next(out for cmd, out in outputs.items() if "--compare" in cmd)
    start = text.index(SAMPLE_INTRO) + len(SAMPLE_INTRO)
    sample = text[start : text.index("```", start)]
    if os.environ.get("SYNCPLAN_UPDATE_README") == "1":
        README.write_text(text[:start] + compare + text[start + len(sample) :])
        return
    assert sample == compare, (
        "README's plan --compare sample is stale; regenerate it with "
        "SYNCPLAN_UPDATE_README=1 python3 -m pytest tests/test_readme.py"
    )
    assert next(out for cmd, out in outputs.items() if "verify" in cmd).startswith("correct")


def test_readme_is_short_and_for_users() -> None:
    text = README.read_text()
    assert len(text.splitlines()) < 250
    history = re.findall(r"\b(?:session|issue) \d+|\bsession\b \d+|until session", text, re.I)
    assert not history, history
