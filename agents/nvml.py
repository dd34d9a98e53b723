"""A narrow adapter over NVML: the calls GPU discovery makes, by device index.

Three implementations share the :class:`NVML` protocol: :class:`RealNVML` (``import pynvml``
from nvidia-ml-py), :class:`RecordedNVML` (replays a JSON recording, used by tests) and
:class:`RecordingNVML` (wraps another one and records every answer, used by
``agents/record_nvml.py``). This module needs only the standard library; ``pynvml`` is
imported when a :class:`RealNVML` is initialised.

Recording format (``syncplan-nvml-recording/1``)::

    {"format": "syncplan-nvml-recording/1", "meta": {...},
     "calls": {"device_count()": {"value": 8},
               "nvlink_state(0,18)": {"error": 2, "error_name": "NVML_ERROR_INVALID_ARGUMENT"},
               "field_values(0,[90])": {"value": [[0, 26562]]}}}

Each key is a method name with its arguments, each answer a value or an NVML error code.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from syncplan.core.atomic import atomic_write

RECORDING_FORMAT = "syncplan-nvml-recording/1"

# NVML return codes and constants (nvml.h); duplicated so this module does not need pynvml.
NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_UNKNOWN = 999

ERROR_NAMES = {
    NVML_ERROR_UNINITIALIZED: "NVML_ERROR_UNINITIALIZED",
    NVML_ERROR_INVALID_ARGUMENT: "NVML_ERROR_INVALID_ARGUMENT",
    NVML_ERROR_NOT_SUPPORTED: "NVML_ERROR_NOT_SUPPORTED",
    NVML_ERROR_NO_PERMISSION: "NVML_ERROR_NO_PERMISSION",
    NVML_ERROR_NOT_FOUND: "NVML_ERROR_NOT_FOUND",
    NVML_ERROR_DRIVER_NOT_LOADED: "NVML_ERROR_DRIVER_NOT_LOADED",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML_ERROR_LIBRARY_NOT_FOUND",
    NVML_ERROR_FUNCTION_NOT_FOUND: "NVML_ERROR_FUNCTION_NOT_FOUND",
    NVML_ERROR_GPU_IS_LOST: "NVML_ERROR_GPU_IS_LOST",
    NVML_ERROR_UNKNOWN: "NVML_ERROR_UNKNOWN",
}

NVML_NVLINK_MAX_LINKS = 36  # the array bound in current nvml.h (18 used on Hopper)
NVML_NVLINK_CAP_P2P_SUPPORTED = 0
NVML_NVLINK_DEVICE_TYPE_GPU = 0
NVML_NVLINK_DEVICE_TYPE_IBMNPU = 1
NVML_NVLINK_DEVICE_TYPE_SWITCH = 2
NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF

NVML_FI_DEV_NVLINK_SPEED_MBPS_L0_5 = (84, 85, 86, 87, 88, 89)
NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON = 90
NVML_FI_DEV_NVLINK_LINK_COUNT = 91
NVML_FI_DEV_NVLINK_SPEED_MBPS_L6_11 = (132, 133, 134, 135, 136, 137)

NVML_TOPOLOGY_INTERNAL = 0
NVML_TOPOLOGY_SINGLE = 10
NVML_TOPOLOGY_MULTIPLE = 20
NVML_TOPOLOGY_HOSTBRIDGE = 30
NVML_TOPOLOGY_NODE = 40
NVML_TOPOLOGY_SYSTEM = 50


class NVMLCallError(Exception):
    """An NVML call returned an error code (``code`` is the nvmlReturn_t value)."""

    def __init__(self, code: int, call: str = "") -> None:
        self.code = int(code)
        self.call = call
        name = ERROR_NAMES.get(self.code, f"NVML error {self.code}")
        super().__init__(f"{call}: {name}" if call else name)

    @property
    def name(self) -> str:
        return ERROR_NAMES.get(self.code, f"NVML_ERROR_{self.code}")


FieldValue = tuple[int, float | int | None]  # (nvmlReturn of the field, value or None)


@runtime_checkable
class NVML(Protocol):
    """The NVML calls GPU discovery makes; devices are named by their NVML index."""

    def init(self) -> None: ...
    def shutdown(self) -> None: ...
    def driver_version(self) -> str: ...
    def device_count(self) -> int: ...
    def name(self, i: int) -> str: ...
    def uuid(self, i: int) -> str: ...
    def pci_bus_id(self, i: int) -> str: ...
    def numa_node(self, i: int) -> int: ...
    def curr_pcie_gen(self, i: int) -> int: ...
    def curr_pcie_width(self, i: int) -> int: ...
    def max_pcie_gen(self, i: int) -> int: ...
    def max_pcie_width(self, i: int) -> int: ...
    def nvlink_state(self, i: int, link: int) -> int: ...
    def nvlink_version(self, i: int, link: int) -> int: ...
    def nvlink_p2p_supported(self, i: int, link: int) -> int: ...
    def nvlink_remote_pci_bus_id(self, i: int, link: int) -> str: ...
    def nvlink_remote_device_type(self, i: int, link: int) -> int: ...
    def field_values(self, i: int, field_ids: list[int]) -> list[FieldValue]: ...
    def common_ancestor(self, i: int, j: int) -> int: ...


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RealNVML:
    """NVML through nvidia-ml-py (``import pynvml``); errors become :class:`NVMLCallError`."""

    def __init__(self) -> None:
        self._nv: Any = None
        self._handles: dict[int, Any] = {}

    def init(self) -> None:
        try:
            import pynvml
        except ImportError as exc:  # the package is missing: same as no library
            raise NVMLCallError(NVML_ERROR_LIBRARY_NOT_FOUND, "import pynvml") from exc
        self._nv = pynvml
        self._call("init", pynvml.nvmlInit)

    def shutdown(self) -> None:
        if self._nv is not None:
            self._handles.clear()
            self._call("shutdown", self._nv.nvmlShutdown)

    def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except self._nv.NVMLError as exc:
            raise NVMLCallError(getattr(exc, "value", NVML_ERROR_UNKNOWN), what) from None

    def _h(self, i: int) -> Any:
        if i not in self._handles:
            self._handles[i] = self._call("handle", self._nv.nvmlDeviceGetHandleByIndex, i)
        return self._handles[i]

    def driver_version(self) -> str:
        return _text(self._call("driver_version", self._nv.nvmlSystemGetDriverVersion))

    def device_count(self) -> int:
        return int(self._call("device_count", self._nv.nvmlDeviceGetCount))

    def name(self, i: int) -> str:
        return _text(self._call("name", self._nv.nvmlDeviceGetName, self._h(i)))

    def uuid(self, i: int) -> str:
        return _text(self._call("uuid", self._nv.nvmlDeviceGetUUID, self._h(i)))

    def pci_bus_id(self, i: int) -> str:
        info = self._call("pci_bus_id", self._nv.nvmlDeviceGetPciInfo, self._h(i))
        return _text(info.busId)

    def numa_node(self, i: int) -> int:
        return int(self._call("numa_node", self._nv.nvmlDeviceGetNumaNodeId, self._h(i)))

    def curr_pcie_gen(self, i: int) -> int:
        return int(
            self._call("curr_pcie_gen", self._nv.nvmlDeviceGetCurrPcieLinkGeneration, self._h(i))
        )

    def curr_pcie_width(self, i: int) -> int:
        return int(
            self._call("curr_pcie_width", self._nv.nvmlDeviceGetCurrPcieLinkWidth, self._h(i))
        )

    def max_pcie_gen(self, i: int) -> int:
        return int(
            self._call("max_pcie_gen", self._nv.nvmlDeviceGetMaxPcieLinkGeneration, self._h(i))
        )

    def max_pcie_width(self, i: int) -> int:
        return int(self._call("max_pcie_width", self._nv.nvmlDeviceGetMaxPcieLinkWidth, self._h(i)))

    def nvlink_state(self, i: int, link: int) -> int:
        return int(self._call("nvlink_state", self._nv.nvmlDeviceGetNvLinkState, self._h(i), link))

    def nvlink_version(self, i: int, link: int) -> int:
        return int(
            self._call("nvlink_version", self._nv.nvmlDeviceGetNvLinkVersion, self._h(i), link)
        )

    def nvlink_p2p_supported(self, i: int, link: int) -> int:
        return int(
            self._call(
                "nvlink_p2p_supported",
                self._nv.nvmlDeviceGetNvLinkCapability,
                self._h(i),
                link,
                NVML_NVLINK_CAP_P2P_SUPPORTED,
            )
        )

    def nvlink_remote_pci_bus_id(self, i: int, link: int) -> str:
        info = self._call(
            "nvlink_remote_pci_bus_id", self._nv.nvmlDeviceGetNvLinkRemotePciInfo, self._h(i), link
        )
        return _text(info.busId)

    def nvlink_remote_device_type(self, i: int, link: int) -> int:
        return int(
            self._call(
                "nvlink_remote_device_type",
                self._nv.nvmlDeviceGetNvLinkRemoteDeviceType,
                self._h(i),
                link,
            )
        )

    def field_values(self, i: int, field_ids: list[int]) -> list[FieldValue]:
        values = self._call(
            "field_values", self._nv.nvmlDeviceGetFieldValues, self._h(i), list(field_ids)
        )
        out: list[FieldValue] = []
        for v in values:
            ret = int(v.nvmlReturn)
            out.append((ret, _field_value(v) if ret == NVML_SUCCESS else None))
        return out

    def common_ancestor(self, i: int, j: int) -> int:
        return int(
            self._call(
                "common_ancestor",
                self._nv.nvmlDeviceGetTopologyCommonAncestor,
                self._h(i),
                self._h(j),
            )
        )


def _field_value(v: Any) -> float | int:
    """Decode a c_nvmlFieldValue_t union by its valueType (nvmlValueType_t)."""
    kind = int(v.valueType)
    if kind == 0:
        return float(v.value.dVal)
    return int(
        {
            1: v.value.uiVal,
            2: v.value.ulVal,
            3: v.value.ullVal,
            4: v.value.sllVal,
            5: v.value.siVal,
            6: v.value.usVal,
        }.get(kind, v.value.ullVal)
    )


def call_key(method: str, args: tuple[Any, ...]) -> str:
    """The recording key of one call: ``nvlink_state(0,3)``, ``field_values(0,[90])``."""
    return f"{method}({','.join(json.dumps(a, separators=(',', ':')) for a in args)})"


_METHODS = (
    "driver_version",
    "device_count",
    "name",
    "uuid",
    "pci_bus_id",
    "numa_node",
    "curr_pcie_gen",
    "curr_pcie_width",
    "max_pcie_gen",
    "max_pcie_width",
    "nvlink_state",
    "nvlink_version",
    "nvlink_p2p_supported",
    "nvlink_remote_pci_bus_id",
    "nvlink_remote_device_type",
    "field_values",
    "common_ancestor",
)


class RecordedNVML:
    """Replays a recording; a call that was never recorded answers NVML_ERROR_NOT_SUPPORTED."""

    def __init__(self, data: dict[str, Any]) -> None:
        if data.get("format") != RECORDING_FORMAT:
            raise ValueError(
                f"not an NVML recording (format {data.get('format')!r}, "
                f"expected {RECORDING_FORMAT!r})"
            )
        self.meta: dict[str, Any] = dict(data.get("meta", {}))
        self._calls: dict[str, dict[str, Any]] = dict(data.get("calls", {}))
        init = self._calls.get("init()")
        self._init_error = int(init["error"]) if init and "error" in init else None

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> RecordedNVML:
        with open(path, encoding="utf-8") as f:
            return cls(json.load(f))

    def init(self) -> None:
        if self._init_error is not None:
            raise NVMLCallError(self._init_error, "init")

    def shutdown(self) -> None:
        return None

    def _answer(self, method: str, *args: Any) -> Any:
        ans = self._calls.get(call_key(method, args))
        if ans is None:
            raise NVMLCallError(NVML_ERROR_NOT_SUPPORTED, call_key(method, args))
        if "error" in ans:
            raise NVMLCallError(int(ans["error"]), call_key(method, args))
        return ans["value"]

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if method not in _METHODS:
            raise AttributeError(method)

        def call(*args: Any) -> Any:
            value = self._answer(method, *args)
            if method == "field_values":
                return [(int(r), v) for r, v in value]
            return value

        return call


class RecordingNVML:
    """Wraps another NVML and records each answer (or error code) under its call key."""

    def __init__(self, inner: NVML, meta: dict[str, Any] | None = None) -> None:
        self.inner = inner
        self.meta: dict[str, Any] = dict(meta or {})
        self.calls: dict[str, dict[str, Any]] = {}

    def init(self) -> None:
        try:
            self.inner.init()
        except NVMLCallError as exc:
            self.calls["init()"] = {"error": exc.code, "error_name": exc.name}
            raise

    def shutdown(self) -> None:
        self.inner.shutdown()

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if method not in _METHODS:
            raise AttributeError(method)
        fn = getattr(self.inner, method)

        def call(*args: Any) -> Any:
            key = call_key(method, args)
            try:
                value = fn(*args)
            except NVMLCallError as exc:
                self.calls[key] = {"error": exc.code, "error_name": exc.name}
                raise
            self.calls[key] = {
                "value": [list(v) for v in value] if method == "field_values" else value
            }
            return value

        return call

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": RECORDING_FORMAT,
            "meta": self.meta,
            "calls": dict(sorted(self.calls.items(), key=lambda kv: _natural(kv[0]))),
        }

    def save(self, path: str | os.PathLike[str]) -> None:
        atomic_write(path, json.dumps(self.to_dict(), indent=1) + "\n")


def _natural(key: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", key)]
