"""sysfs/procfs edge cases: unreadable attributes, odd values, virtual NICs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from syncplan.agents.nics import discover_nics, net_speed_GBps, parse_ib_rate, parse_ib_state
from syncplan.agents.procfs import ProcFS
from syncplan.agents.sysfs import SysFS, normalize_bdf, parse_gts


def make_if(
    root: Path,
    name: str,
    *,
    speed: str | None = "1000",
    operstate: str = "up",
    physical: bool = True,
    bdf: str = "0000:05:00.0",
) -> None:
    base = (
        root / f"devices/pci0000:00/0000:00:02.0/{bdf}/net/{name}"
        if physical
        else root / f"devices/virtual/net/{name}"
    )
    base.mkdir(parents=True)
    if speed is not None:
        (base / "speed").write_text(speed + "\n")
    (base / "operstate").write_text(operstate + "\n")
    if physical:
        os.symlink("../..", base / "device")
    (root / "class/net").mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(base, root / "class/net"), root / "class/net" / name)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("-1", None),
        ("4294967295", None),
        ("0", None),
        ("garbage", None),
        ("", None),
        ("25000", 3.125),
        ("100", 0.0125),
    ],
)
def test_speed_values(tmp_path: Path, text: str, expected: float | None) -> None:
    make_if(tmp_path, "eth0", speed=text)
    assert net_speed_GBps(SysFS(tmp_path), "eth0") == expected


def test_speed_read_error_and_missing(tmp_path: Path) -> None:
    make_if(tmp_path, "eth0", speed=None)
    assert net_speed_GBps(SysFS(tmp_path), "eth0") is None  # missing file
    speed = tmp_path / "class/net/eth0/speed"
    speed.mkdir()  # reading a directory fails with an OSError, like EINVAL on a virtual NIC
    assert net_speed_GBps(SysFS(tmp_path), "eth0") is None


def test_real_einval_speed_if_present() -> None:
    sysfs = SysFS("/sys")
    for ifname in sysfs.listdir("class/net"):
        try:
            Path(f"/sys/class/net/{ifname}/speed").read_text()
        except OSError:
            assert net_speed_GBps(sysfs, ifname) is None
            return
    pytest.skip("no interface on this machine fails to read its speed")


def test_missing_trees(tmp_path: Path) -> None:
    sysfs = SysFS(tmp_path / "nothing")
    assert discover_nics(sysfs) == []
    assert sysfs.pci_location("0000:01:00.0") is None
    assert sysfs.pci_numa_node("0000:01:00.0") is None
    assert sysfs.pci_link_GBps("0000:01:00.0") is None
    assert ProcFS(tmp_path / "nothing").ipv4_by_interface() == {}


def test_physical_nics_win_over_virtual(tmp_path: Path) -> None:
    make_if(tmp_path, "eno1", speed="10000")
    make_if(tmp_path, "veth0", physical=False)
    make_if(tmp_path, "eno2", speed="-1", operstate="down", bdf="0000:05:00.1")
    nics = discover_nics(SysFS(tmp_path), {"veth0": "10.0.0.1"})
    assert [n.name for n in nics] == ["eno1"]


def test_virtual_nic_with_address_is_used_when_nothing_physical(tmp_path: Path) -> None:
    make_if(tmp_path, "veth0", physical=False, speed="10000")
    make_if(tmp_path, "veth1", physical=False)  # no address: not usable
    make_if(tmp_path, "lo", physical=False, operstate="unknown")
    nics = discover_nics(SysFS(tmp_path), {"veth0": "10.0.0.1", "lo": "127.0.0.1"})
    assert [(n.name, n.address, n.physical) for n in nics] == [("veth0", "10.0.0.1", False)]


def test_parsers() -> None:
    assert parse_ib_rate("200 Gb/sec (4X HDR)") == 25.0
    assert parse_ib_rate("2.5 Gb/sec (1X SDR)") == 0.3125
    assert parse_ib_rate("") is None and parse_ib_rate("fast") is None
    assert parse_ib_state("4: ACTIVE") == "up"
    assert parse_ib_state("1: DOWN") == "down"
    assert parse_ib_state("2: INIT") == "init"
    assert parse_gts("16.0 GT/s PCIe") == 16.0 and parse_gts("8 GT/s") == 8.0
    assert parse_gts("Unknown") is None
    assert normalize_bdf("00000000:9A:00.0") == "0000:9a:00.0"
    assert normalize_bdf("0000:18:00.0") == "0000:18:00.0"


def test_procfs_addresses_of_this_machine() -> None:
    addrs = ProcFS().ipv4_by_interface()
    assert "lo" not in addrs  # 127.0.0.1 lives in the local table, not in net/route
    for ip in addrs.values():
        assert ip.count(".") == 3
