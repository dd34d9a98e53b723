"""The planner's programs are the ones recorded in plan_digests.json (see plan_digests.py).

A refactor must leave every plan as it was. The fast subset checks three examples x every
algorithm at 4 KiB, the default run adds a sample of forest and auto plans at 256 MiB, and
``-m heavy`` checks all 766 recorded cases."""

from __future__ import annotations

import json

import pytest

from tests.planner.plan_digests import DIGEST_FILE, cases, digest, key

RECORDED = json.loads(DIGEST_FILE.read_text())
FAST_4K = {"one-slow-nic", "torus-3x3", "dgx-2x8-1nic"}
SAMPLE_256M = {"one-slow-nic", "mesh-4x4-degraded", "host-ring-4x2-slow"} | {
    f"family:{f}:0" for f in ("hybrid_cube_mesh", "mesh2d", "host_ring", "directed_cluster")
}


def _param(name: str, algo: str, size: int) -> object:
    fast = size == 4096 and name in FAST_4K
    sampled = name in SAMPLE_256M and algo in ("forest", "auto") and size > 4096
    marks: list[pytest.MarkDecorator] = []
    if not fast:
        marks.append(pytest.mark.slow)
    if not (fast or sampled):
        marks.append(pytest.mark.heavy)
    return pytest.param(name, algo, size, id=key(name, algo, size), marks=marks)


def test_every_case_is_recorded() -> None:
    assert sorted(key(*c) for c in cases()) == sorted(RECORDED)


@pytest.mark.parametrize(("name", "algo", "size"), [_param(*c) for c in cases()])
def test_plan_is_unchanged(name: str, algo: str, size: int) -> None:
    assert digest(name, algo, size) == RECORDED[key(name, algo, size)]
