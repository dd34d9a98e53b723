"""Discovery on the fixture hosts and on this machine."""

from __future__ import annotations

import logging

from syncplan.agents import nvml as N
from syncplan.agents.discovery import Discoverer
from syncplan.core.report import HostReport

from .conftest import FIXTURES


def links_between(rep: HostReport, a: str, b: str) -> list:
    return [ln for ln in rep.links if {ln.src, ln.dst} == {a, b}]


def test_hgx8_gpus(hgx8: HostReport) -> None:
    assert hgx8.endpoint_kind == "gpu"
    assert [g.index for g in hgx8.gpus] == list(range(8))
    g0 = hgx8.gpus[0]
    assert g0.name == "NVIDIA H100 80GB HBM3"
    assert g0.pci_bus_id == "0000:18:00.0"
    assert g0.uuid.startswith("GPU-")
    assert [g.numa_node for g in hgx8.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert all(g.nvlink_count == 18 for g in hgx8.gpus)
    assert g0.pcie_gen == 5 and g0.pcie_width == 16
    assert abs(g0.pcie_bandwidth_GBps - 63.0) < 0.1


def test_hgx8_nvswitch_links(hgx8: HostReport) -> None:
    switches = sorted(n.id for n in hgx8.nodes if n.kind == "nvswitch")
    assert switches == ["nvswitch0", "nvswitch1", "nvswitch2", "nvswitch3"]
    for g in range(8):
        bws = [links_between(hgx8, f"gpu{g}", s)[0].bandwidth_GBps for s in switches]
        # 18 links at 26.562 GB/s split 5/4/4/5 over the four NVSwitches
        assert [round(b / 26.562) for b in bws] == [5, 4, 4, 5]
        assert abs(sum(bws) - 18 * 26.562) < 0.01
    assert not [
        ln
        for ln in hgx8.links
        if ln.kind == "nvlink" and ln.src.startswith("gpu") and ln.dst.startswith("gpu")
    ]


def test_hgx8_pcie_and_nic_placement(hgx8: HostReport) -> None:
    names = [n.name for n in hgx8.nics]
    assert names == ["eno1", "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]  # docker0/lo/IPoIB not NICs
    ib = {n.name: n for n in hgx8.nics}
    assert ib["mlx5_0"].kind == "infiniband" and ib["mlx5_0"].speed_GBps == 50.0
    assert ib["mlx5_0"].address == "10.10.0.21"  # from its IPoIB netdev
    assert ib["eno1"].speed_GBps == 3.125 and ib["eno1"].address == "192.168.10.21"
    # closest NIC per GPU: the ConnectX port on the GPU's PCIe switch
    assert [ib[f"mlx5_{k}"].closest_gpus for k in range(4)] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert ib["eno1"].closest_gpus == []
    # gpu0, gpu1 and nic1 (mlx5_0) share pcie_switch0, which hangs off socket 0
    for node in ("gpu0", "gpu1", "nic1"):
        assert links_between(hgx8, node, "pcie_switch0"), node
    assert links_between(hgx8, "pcie_switch0", "cpu_socket0")
    assert links_between(hgx8, "pcie_switch3", "cpu_socket1")
    assert links_between(hgx8, "nic0", "cpu_socket0")  # eno1 on a root port
    assert links_between(hgx8, "cpu_socket0", "cpu_socket1")[0].kind == "smp"


def test_pcie4_host(pcie4: HostReport) -> None:
    assert [g.name for g in pcie4.gpus] == ["NVIDIA L40S"] * 4
    assert all(g.nvlink_count == 0 for g in pcie4.gpus)
    assert not [ln for ln in pcie4.links if ln.kind == "nvlink"]
    assert not [n for n in pcie4.nodes if n.kind == "nvswitch"]
    # GPUs 2-3 idle at Gen1 but the nominal link is their maximum, Gen4 x16
    assert all(g.pcie_gen == 4 and abs(g.pcie_bandwidth_GBps - 31.5) < 0.1 for g in pcie4.gpus)
    nics = {n.name: n for n in pcie4.nics}
    assert list(nics) == ["eno1", "mlx5_0"]  # eno2 is down, veth and lo are virtual
    assert nics["mlx5_0"].kind == "roce" and nics["mlx5_0"].speed_GBps == 12.5
    assert nics["mlx5_0"].address == "10.20.0.7"
    assert nics["eno1"].speed_GBps == 1.25
    assert nics["mlx5_0"].closest_gpus == [0, 1, 2, 3]  # PIX for 0-1, ties SYS for 2-3
    assert nics["eno1"].closest_gpus == [2, 3]
    assert links_between(pcie4, "gpu0", "pcie_switch0")
    assert links_between(pcie4, "nic1", "pcie_switch0")
    assert links_between(pcie4, "gpu2", "cpu_socket1")
    assert links_between(pcie4, "gpu3", "cpu_socket1")


def test_reports_validate_and_link_known_nodes(hgx8: HostReport, pcie4: HostReport) -> None:
    for rep in (hgx8, pcie4):
        again = HostReport.model_validate_json(rep.model_dump_json())
        assert again == rep
        ids = {n.id for n in rep.nodes}
        assert len(ids) == len(rep.nodes)
        for ln in rep.links:
            assert ln.src in ids and ln.dst in ids, ln


def test_cpu_only_on_this_machine(caplog) -> None:  # type: ignore[no-untyped-def]
    def no_driver() -> N.NVML:
        return N.RecordedNVML(
            {
                "format": N.RECORDING_FORMAT,
                "calls": {"init()": {"error": N.NVML_ERROR_DRIVER_NOT_LOADED}},
            }
        )

    d = Discoverer("this-host", nvml_factory=no_driver)
    with caplog.at_level(logging.WARNING, logger="syncplan.agent.discovery"):
        first = d.discover()
        second = d.discover()
    assert first.endpoint_kind == second.endpoint_kind == "cpu"
    assert first.gpus == []
    assert next(n.id for n in first.nodes) == "cpu0"
    assert all(ln.src == "cpu0" for ln in first.links)
    msgs = [r for r in caplog.records if "CPU-only" in r.getMessage()]
    assert len(msgs) == 1 and msgs[0].exc_info is None


def test_real_nvml_on_this_machine_does_not_crash() -> None:
    rep = Discoverer("this-host").discover()  # the real driver path: absent here, present on GPU
    assert rep.endpoint_kind in ("cpu", "gpu")
    if rep.endpoint_kind == "gpu":
        assert rep.gpus


def test_gpu_missing_from_sysfs_falls_back_to_nvml_ancestors(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from syncplan.agents.procfs import ProcFS
    from syncplan.agents.sysfs import SysFS

    base = FIXTURES / "hgx8"
    d = Discoverer(
        "x", SysFS(tmp_path), ProcFS(base / "proc"), lambda: N.RecordedNVML.load(base / "nvml.json")
    )
    rep = d.discover()
    assert rep.nics == []  # an empty sysfs has no NICs
    switches = [n.id for n in rep.nodes if n.kind == "pcie_switch"]
    assert len(switches) == 4  # NVML says gpu pairs (0,1), (2,3)... share a switch
    parents = {ln.src: ln.dst for ln in rep.links if ln.dst.startswith("pcie_switch")}
    assert parents["gpu0"] == parents["gpu1"] != parents["gpu2"]


def test_fixture_generator_is_in_sync(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import filecmp
    import importlib.util
    import os

    spec = importlib.util.spec_from_file_location("mkfx", FIXTURES / "make_fixtures.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "HERE", tmp_path)
    mod.make_hgx8()
    mod.make_pcie4()
    for name in ("hgx8", "pcie4"):
        for root, _dirs, files in os.walk(tmp_path / name):
            for f in files:
                rel = os.path.relpath(os.path.join(root, f), tmp_path)
                assert filecmp.cmp(tmp_path / rel, FIXTURES / rel, shallow=False), rel
