"""``syncplan verify`` given a topology file where the plan belongs is a usage error (exit 2),
not an incorrect plan (exit 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import EXAMPLES
from .test_cli_errors import cli

DEMO = str(EXAMPLES / "demo.json")


def test_verify_a_topology_file_as_the_plan_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    res = cli(capsys, "verify", DEMO, "-t", DEMO)
    assert res.returncode == 2, res
    assert f"{DEMO} is a topology file, not a plan document" in res.stderr
    assert "INCORRECT" not in res.stderr and res.stderr.strip().count("\n") == 0, res.stderr


@pytest.mark.parametrize("doc", [[1, 2], {"hello": 1}, "text"])
def test_verify_a_document_that_is_no_plan_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, doc: object
) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps(doc))
    res = cli(capsys, "verify", str(path), "-t", DEMO)
    assert res.returncode == 2, res
    assert "is not a plan document" in res.stderr, res.stderr
