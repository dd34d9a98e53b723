"""MSCCL export: every example and every algorithm, parsed back and checked against the
plan, then simulated as an all-reduce by tests/export/msccl_sim.py."""

from __future__ import annotations

import copy
import functools
import re
from collections import Counter
from pathlib import Path

import pytest
from syncplan.core.errors import InfeasibleError
from syncplan.planner.algorithms import ALGORITHMS
from syncplan.planner.plan import make_plan
from syncplan.planner.topology import load_topology
from syncplan.planner.verify import verify_plan

from syncplan.export.msccl import TARGETS, chunked_doc, export_msccl
from syncplan.export.msccl_xml import ExportError, parse_msccl_xml
from tests.export.msccl_sim import SimError, simulate

EXAMPLES = sorted(Path("examples").glob("*.json"))
FAST = {"demo", "dgx-1x8", "star-one-slow", "dgx-2x8-1nic"}


@functools.cache
def plan_of(example: str, algorithm: str) -> dict:
    topo = load_topology(f"examples/{example}.json")
    return make_plan(topo, topo.endpoints(), 256 << 20, algorithm)


def cases() -> list:
    out = []
    for path in EXAMPLES:
        for alg in ALGORITHMS:
            slow = path.stem not in FAST or alg == "forest"
            out.append(
                pytest.param(
                    path.stem,
                    alg,
                    id=f"{path.stem}-{alg}",
                    marks=[pytest.mark.slow] if slow else [],
                )
            )
    return out


def unit_coverage(program: dict, scale: float) -> Counter:
    """(step, src, dst, reduce, unit) of every unit a transfer moves, units scaled."""
    got: Counter = Counter()
    for k, step in enumerate(program["steps"]):
        for t in step:
            a, b = t["chunk"]
            for u in range(round(a * scale), round(b * scale)):
                got[(k, t["src"], t["dst"], t["reduce"], u)] += 1
    return got


def check_export(plan: dict, topo_file: str, **kw) -> dict:
    algo, info = export_msccl(plan, **kw)
    xml = algo.to_xml()
    back = parse_msccl_xml(xml)
    assert back.to_xml() == xml
    assert back.ngpus == len(plan["ranks"]) and back.coll == "allreduce"
    assert 0 < back.minBytes <= plan["size_bytes"] <= back.maxBytes
    limits = TARGETS[kw.get("target", "msccl")]
    # every transfer of the chunked program is one send and one matching receive, in order
    sends: dict[tuple[int, int, int], list] = {}
    recvs: dict[tuple[int, int, int], list] = {}
    for gpu in back.gpus:
        assert len(gpu.tbs) <= limits.max_tbs
        for tb in gpu.tbs:
            assert len(tb.steps) <= limits.max_steps_per_tb
            for st in tb.steps:
                if st.type == "s":
                    sends.setdefault((gpu.id, tb.send, tb.chan), []).append((st.srcoff, st.cnt))
                elif st.type in ("r", "rrc"):
                    recvs.setdefault((tb.recv, gpu.id, tb.chan), []).append(
                        (st.dstoff, st.cnt, st.type == "rrc")
                    )
    assert {k: [v[:2] for v in vs] for k, vs in recvs.items()} == sends
    moved = Counter()
    for (src, dst, _), vs in recvs.items():
        for off, cnt, red in vs:
            for c in range(off, off + cnt):
                moved[(src, dst, red, c)] += 1
    want = Counter()
    for step in info["program"]:
        for src, dst, a, b, red in step:
            for c in range(a, b):
                want[(src, dst, red, c)] += 1
    assert moved == want
    # the chunked program is a correct all-reduce (independent verifier) ...
    topo = load_topology(topo_file)
    doc = chunked_doc(plan, info)
    assert verify_plan(doc, topo).ok
    # ... and, when exact, moves exactly the plan's units in the plan's steps
    if info["exact"]:
        scale = plan["program"]["units"] / info["chunks"]
        assert unit_coverage(doc["program"], scale) == unit_coverage(plan["program"], 1)
    # vector clocks cost O(threadblocks) per step: race checks on the smaller exports only
    small = sum(len(g.tbs) for g in back.gpus) <= 400
    for seed in (0, 1) if small else (0,):
        simulate(
            xml,
            seed=seed,
            races=small,
            max_steps=limits.max_steps_per_tb,
            max_per_chan=limits.max_tbs_per_channel,
        )
    return info


@pytest.mark.parametrize(("example", "algorithm"), cases())
def test_every_example_and_algorithm(example: str, algorithm: str) -> None:
    try:
        plan = plan_of(example, algorithm)
    except InfeasibleError as exc:  # e.g. a two-level algorithm on a single host
        pytest.skip(f"{algorithm} does not apply to {example}: {exc}")
    check_export(plan, f"examples/{example}.json")


def test_forest_quantized_is_still_correct() -> None:
    info = check_export(plan_of("dgx-1x8", "forest"), "examples/dgx-1x8.json", chunks=24)
    assert info["chunks"] == 24 and not info["exact"]


@pytest.mark.slow
def test_forest_quantized_on_the_demo() -> None:
    info = check_export(plan_of("demo", "forest"), "examples/demo.json", chunks=64)
    assert info["chunks"] == 64 and not info["exact"]


def test_rccl_target_and_channels() -> None:
    info = check_export(
        plan_of("dgx-2x8-1nic", "ring"), "examples/dgx-2x8-1nic.json", target="rccl", channels=2
    )
    assert info["channels"] == 2


def test_missing_dependency_is_caught() -> None:
    algo, _ = export_msccl(plan_of("demo", "ring"))
    xml = algo.to_xml()
    simulate(xml)
    dep = re.search(r'depid="(\d+)" deps="(\d+)"', xml)
    assert dep is not None
    broken = xml.replace(dep.group(0), 'depid="-1" deps="-1"', 1)
    target = parse_msccl_xml(broken)  # still well formed; hasdep now wrong or a race
    assert target.ngpus == 16
    with pytest.raises(SimError):
        simulate(broken)


def test_limits_give_a_clear_error() -> None:
    steps = [[{"src": 0, "dst": 1, "chunk": [0, 1], "reduce": False}] for _ in range(100)]
    plan = {
        "ranks": ["a", "b"],
        "size_bytes": 1 << 20,
        "collective": "allreduce",
        "program": {"units": 1, "steps": steps},
    }
    with pytest.raises(
        ExportError,
        match=r"rccl executor's limits .*64 steps per "
        r"threadblock.*need 100 steps",
    ):
        export_msccl(plan, target="rccl", channels=1)
    _, info = export_msccl(plan, target="rccl")  # two channels hold it
    assert info["channels"] == 2 and info["max_steps_per_tb"] <= 64


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"collective": "allgather"}, "only allreduce"),
        ({"program": None}, "has no program"),
        ({"ranks": []}, "no ranks"),
    ],
)
def test_bad_plans(change: dict, message: str) -> None:
    plan = copy.deepcopy(plan_of("dgx-1x8", "ring"))
    plan.update(change)
    with pytest.raises(ExportError, match=message):
        export_msccl(plan)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"channels": 0}, "channels must be"),
        ({"chunks": 0}, "chunks must be"),
        ({"target": "nccl"}, "target 'nccl' is unknown"),
        ({"min_bytes": 10, "max_bytes": 5}, "min_bytes <= max_bytes"),
    ],
)
def test_bad_options(kw: dict, message: str) -> None:
    with pytest.raises(ExportError, match=message):
        export_msccl(plan_of("dgx-1x8", "ring"), **kw)


def test_reader_names_what_is_wrong() -> None:
    with pytest.raises(ExportError, match="missing attribute 'maxBytes'"):
        parse_msccl_xml(
            '<algo name="x" proto="Simple" nchannels="1" nchunksperloop="1" '
            'ngpus="1" coll="allreduce" inplace="1" outofplace="0" '
            'minBytes="0"/>'
        )
    with pytest.raises(ExportError, match="not well-formed"):
        parse_msccl_xml("<algo")


def test_cli(tmp_path) -> None:
    import json
    import subprocess
    import sys

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(plan_of("dgx-1x8", "hierarchical")))
    out = tmp_path / "algo.xml"
    run = [sys.executable, "-m", "syncplan", "export", "msccl"]
    ok = subprocess.run(
        [*run, str(plan), "-o", str(out), "--target", "rccl"], capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr
    assert "8 GPUs, 8 chunks (exact)" in ok.stderr
    simulate(out.read_text())
    plan.write_text("{}")
    bad = subprocess.run([*run, str(plan)], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "has no program" in bad.stderr
