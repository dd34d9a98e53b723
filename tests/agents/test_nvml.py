"""The NVML adapter: replay, recording round trip, error handling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from syncplan.agents import nvml as N
from syncplan.agents.gpus import discover_gpus

from .conftest import FIXTURES


def test_recorded_replays_values_and_errors() -> None:
    nv = N.RecordedNVML.load(FIXTURES / "hgx8" / "nvml.json")
    nv.init()
    assert nv.device_count() == 8
    assert nv.pci_bus_id(4) == "00000000:9A:00.0"
    assert nv.nvlink_remote_device_type(0, 0) == N.NVML_NVLINK_DEVICE_TYPE_SWITCH
    with pytest.raises(N.NVMLCallError) as exc:
        nv.nvlink_state(0, 18)
    assert exc.value.code == N.NVML_ERROR_INVALID_ARGUMENT
    with pytest.raises(N.NVMLCallError) as exc:
        nv.common_ancestor(0, 99)  # never recorded
    assert exc.value.code == N.NVML_ERROR_NOT_SUPPORTED
    with pytest.raises(AttributeError):
        nv.nvmlDeviceSetPowerLimit  # noqa: B018  # not part of the adapter


def test_rejects_other_formats() -> None:
    with pytest.raises(ValueError, match="not an NVML recording"):
        N.RecordedNVML({"format": "something-else"})


@pytest.mark.parametrize("name", ["hgx8", "pcie4"])
def test_recording_round_trip(tmp_path: Path, name: str) -> None:
    source = N.RecordedNVML.load(FIXTURES / name / "nvml.json")
    rec = N.RecordingNVML(source, {"host": name})
    rec.init()
    first = discover_gpus(rec)
    out = tmp_path / "rec.json"
    rec.save(out)
    data = json.loads(out.read_text())
    assert data["format"] == N.RECORDING_FORMAT
    assert any("error" in v for v in data["calls"].values())  # errors are recorded too
    again = discover_gpus(N.RecordedNVML.load(out))
    assert again == first


def test_real_nvml_without_driver_raises_call_error() -> None:
    nv = N.RealNVML()
    try:
        nv.init()
    except N.NVMLCallError as exc:
        assert exc.code in (
            N.NVML_ERROR_LIBRARY_NOT_FOUND,
            N.NVML_ERROR_DRIVER_NOT_LOADED,
            N.NVML_ERROR_NO_PERMISSION,
            N.NVML_ERROR_UNKNOWN,
        )
        return
    try:
        assert nv.device_count() >= 0
    finally:
        nv.shutdown()


def test_recorder_script_without_driver(tmp_path: Path) -> None:
    import subprocess
    import sys

    out = tmp_path / "rec.json"
    script = Path(__file__).parents[2] / "agents" / "record_nvml.py"
    proc = subprocess.run(
        [sys.executable, str(script), str(out)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert "Traceback" not in proc.stderr
    data = json.loads(out.read_text())
    assert data["format"] == N.RECORDING_FORMAT
    if proc.returncode == 1:  # no driver here: the failure itself is recorded
        assert "error" in data["calls"]["init()"]
    else:
        assert proc.returncode == 0 and data["calls"]["device_count()"]["value"] >= 0
