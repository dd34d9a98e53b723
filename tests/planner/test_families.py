"""Topology families of issue 12: every builder and variant loads, validates and connects
every rank both ways; variants differ from the base in the stated link only; random members
are deterministic per seed; shipped examples match their builders."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest
from syncplan.planner import families as fam
from syncplan.planner.topology import Topology, load_topology

from .conftest import EXAMPLES as EXAMPLE_DIR

BASE_AND_VARIANT: dict[str, tuple[Callable[[], dict], Callable[[], dict]]] = {
    "hybrid_cube_mesh": (fam.hybrid_cube_mesh, lambda: fam.hybrid_cube_mesh(degraded=(1, 5))),
    "hybrid_cube_mesh_gen1_2hosts": (
        lambda: fam.hybrid_cube_mesh(2, 1, nics=2),
        lambda: fam.hybrid_cube_mesh(2, 1, nics=2, degraded=(4, 0)),
    ),
    "full_mesh": (fam.full_mesh, lambda: fam.full_mesh(slow_pair=(0, 7))),
    "mesh2d": (lambda: fam.mesh2d(3, 4), lambda: fam.mesh2d(3, 4, degraded=0)),
    "mesh2d_ports_4gpu": (
        lambda: fam.mesh2d(2, 2, gpus_per_host=4, ports=True),
        lambda: fam.mesh2d(2, 2, gpus_per_host=4, ports=True, degraded=3),
    ),
    "torus": (lambda: fam.torus(3, 3), lambda: fam.torus(3, 3, degraded=17)),
    "torus_2gpu": (
        lambda: fam.torus(2, 3, gpus_per_host=2),
        lambda: fam.torus(2, 3, gpus_per_host=2, degraded=1),
    ),
    "host_ring": (lambda: fam.host_ring(5), lambda: fam.host_ring(5, slow=4)),
    "host_ring_2": (lambda: fam.host_ring(2, 3), lambda: fam.host_ring(2, 3, slow=0)),
    "fat_tree3": (fam.fat_tree3, lambda: fam.fat_tree3(slow_host=7)),
    "fat_tree3_uplink": (
        lambda: fam.fat_tree3(nics_per_host=2),
        lambda: fam.fat_tree3(nics_per_host=2, slow_uplink=3),
    ),
    "directed_cluster": (fam.directed_cluster, lambda: fam.directed_cluster(slow=3)),
}


def _rates(topo: dict[str, Any]) -> dict[tuple[str, str], float]:
    return {(lk["src"], lk["dst"]): lk["bandwidth_GBps"] for lk in topo["links"]}


def _loads_and_connects(data: dict[str, Any]) -> Topology:
    topo = Topology.from_dict(json.loads(json.dumps(data)))
    ranks = topo.endpoints()
    assert len(ranks) >= 2
    topo.check_ranks(ranks)  # every rank reaches rank 0 and back, so all pairs both ways
    assert Topology.from_dict(topo.to_dict()).to_dict() == topo.to_dict()
    return topo


@pytest.mark.parametrize("name", BASE_AND_VARIANT)
def test_base_and_variant_load_and_differ_in_one_link(name: str) -> None:
    base, variant = (make() for make in BASE_AND_VARIANT[name])
    _loads_and_connects(base)
    _loads_and_connects(variant)
    a, b = _rates(base), _rates(variant)
    assert a.keys() == b.keys()
    changed = [k for k in a if a[k] != b[k]]
    assert len(changed) >= 1 and all(b[k] < a[k] for k in changed)
    if not name.startswith("fat_tree3") or "uplink" in name:
        assert len(changed) == 1, changed


def test_cube_mesh_links_per_gpu() -> None:
    for gen, per_gpu in ((2, 6 * 25.0), (1, 4 * 20.0)):
        nv: dict[str, float] = defaultdict(float)
        for lk in fam.hybrid_cube_mesh(nvlink_gen=gen)["links"]:
            if lk["kind"] == "nvlink":
                nv[lk["src"]] += lk["bandwidth_GBps"]
                nv[lk["dst"]] += lk["bandwidth_GBps"]
        assert dict(nv) == {f"h0/gpu{g}": per_gpu for g in range(8)}
    kinds = {n["kind"] for n in fam.hybrid_cube_mesh()["nodes"]}
    assert "nvswitch" not in kinds and {"pcie_switch", "cpu_socket"} <= kinds


def test_full_mesh_has_every_pair() -> None:
    links = fam.full_mesh(6, pcie=False)["links"]
    assert len(links) == 15 and all(lk["kind"] == "xgmi" for lk in links)


def test_directed_cluster_is_asymmetric() -> None:
    topo = Topology.from_dict(fam.directed_cluster(hosts=3, forward_GBps=25.0, reverse_GBps=5.0))
    g = topo.graph
    assert g.edges["h0/nic0", "h1/nic0"]["bw"] == 25e9
    assert g.edges["h1/nic0", "h0/nic0"]["bw"] == 5e9


def test_torus_wraps_and_mesh_does_not() -> None:
    assert len(fam.torus(3, 3)["links"]) == 18
    assert len(fam.mesh2d(3, 3)["links"]) == 12
    assert len(fam.torus(2, 2)["links"]) == len(fam.mesh2d(2, 2)["links"]) == 4


@pytest.mark.parametrize(
    "bad",
    [
        lambda: fam.hybrid_cube_mesh(degraded=(0, 5)),
        lambda: fam.hybrid_cube_mesh(hosts=2),
        lambda: fam.full_mesh(4, slow_pair=(1, 1)),
        lambda: fam.mesh2d(2, 2, degraded=4),
        lambda: fam.torus(3, 3, degraded=0, factor=1.5),
        lambda: fam.host_ring(1),
        lambda: fam.directed_cluster(slow=4),
        lambda: fam.random_family("hypercube", 0),
    ],
)
def test_bad_parameters_name_the_problem(bad: Callable[[], dict]) -> None:
    with pytest.raises(ValueError):
        bad()


@pytest.mark.parametrize("family", fam.FAMILIES)
def test_random_family_members(family: str) -> None:
    seen = set()
    for seed in range(12):
        data = fam.random_family(family, seed, max_ranks=16)
        assert data == fam.random_family(family, seed, max_ranks=16)  # deterministic
        topo = _loads_and_connects(data)
        assert 2 <= len(topo.endpoints()) <= 16
        seen.add(json.dumps(data, sort_keys=True))
    assert len(seen) >= 6  # seeds give different members


def test_random_two_switch_uses_both_switches_and_a_trunk() -> None:
    for seed in range(8):
        links = fam.random_two_switch(seed)["links"]
        ends = {lk["dst"] for lk in links if lk["dst"] in ("sw0", "sw1")}
        assert ends == {"sw0", "sw1"}
        assert any({lk["src"], lk["dst"]} == {"sw0", "sw1"} for lk in links)


@pytest.mark.parametrize("name", fam.FAMILY_EXAMPLES)
def test_shipped_family_examples_match_their_builders(name: str) -> None:
    path = EXAMPLE_DIR / f"{name}.json"
    assert json.loads(path.read_text()) == json.loads(json.dumps(fam.FAMILY_EXAMPLES[name]())), (
        f"examples/{name}.json is stale: run python -m syncplan.planner.examples examples"
    )
    topo = load_topology(path)
    assert len(topo.endpoints()) <= 32
    topo.check_ranks(topo.endpoints())
