"""The public Python API: what planner/ and executor/ export, the runnable example, and the
light install (the service and the planner never import torch)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_planner_exports_the_documented_names() -> None:
    from syncplan import planner

    for name in planner.__all__:
        assert getattr(planner, name) is not None, name
    from syncplan.planner import ALGORITHMS, load_topology, make_plan, verify_plan

    topo = load_topology(ROOT / "examples" / "star-one-slow.json")
    plan = make_plan(topo, topo.endpoints(), 1 << 20)
    assert plan["algorithm"] in ALGORITHMS and verify_plan(plan, topo).ok


def test_docstring_paths_exist() -> None:
    from syncplan import executor, planner

    for module in (planner, executor):
        for path in re.findall(r"(?:examples|docs)/[\w./-]+\.(?:json|md|py)", module.__doc__):
            assert (ROOT / path).exists(), (module.__name__, path)


def test_executor_exports_its_entry_points() -> None:
    pytest.importorskip("torch")
    from syncplan import executor

    for name in executor.__all__:
        assert getattr(executor, name) is not None, name
    with pytest.raises(AttributeError):
        executor.nothing_here  # noqa: B018


def test_service_and_planner_do_not_import_torch() -> None:
    code = (
        "import sys, syncplan.api.main, syncplan.planner, syncplan.planner.plan, "
        "syncplan.planner.verify, syncplan.executor, "
        "syncplan.cli; syncplan.cli.build_parser(); "
        "syncplan.api.main.create_app; print(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('torch', 'nvidia')))"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


def test_readme_executor_snippet_imports_what_it_uses() -> None:
    text = (ROOT / "README.md").read_text()
    snippet = text.split("## The executor", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    assert "from syncplan.executor import" in snippet
    from syncplan import executor

    for name in ("PlanComm", "PlanExecutor", "plan_allreduce_hook", "fused_allreduce"):
        assert name in snippet and name in executor.__all__


@pytest.mark.slow
def test_python_api_example_runs() -> None:
    pytest.importorskip("torch")
    res = subprocess.run(
        [sys.executable, "examples/python_api.py"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert "verified" in res.stdout and "max difference from torch's all_reduce" in res.stdout
