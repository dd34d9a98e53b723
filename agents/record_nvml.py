"""Record this machine's NVML answers as a fixture: ``python3 agents/record_nvml.py OUT.json``.

Needs only nvidia-ml-py. Every call GPU discovery makes is recorded, plus every NVLink index
up to NVML's maximum, each with its value or its NVML error code; no NVML error aborts it.
Replay the file with ``syncplan agent --once --print --nvml-fixture OUT.json``.
"""

from __future__ import annotations

import os
import platform
import sys
import time

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import contextlib

from syncplan.agents import nvml as N
from syncplan.agents.gpus import discover_gpus


def record(path: str) -> int:
    """Write the recording to ``path``; exit status 0, or 1 when NVML did not initialise."""
    meta = {
        "host": platform.node(),
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "synthetic": False,
        "platform": platform.platform(),
    }
    try:
        import pynvml

        meta["nvidia_ml_py"] = getattr(pynvml, "__version__", "unknown")
    except ImportError:
        pass
    rec = N.RecordingNVML(N.RealNVML(), meta)
    try:
        rec.init()
    except N.NVMLCallError as exc:
        rec.save(path)
        print(f"NVML did not initialise ({exc.name}); recorded that to {path}", file=sys.stderr)
        return 1
    try:
        inv = None
        try:
            inv = discover_gpus(rec)
        except N.NVMLCallError as exc:
            print(f"GPU discovery stopped early: {exc}", file=sys.stderr)
        count = len(inv.gpus) if inv else 0
        for i in range(count):  # every link index, so replay never guesses
            for link in range(N.NVML_NVLINK_MAX_LINKS):
                for method in (
                    "nvlink_state",
                    "nvlink_version",
                    "nvlink_p2p_supported",
                    "nvlink_remote_pci_bus_id",
                    "nvlink_remote_device_type",
                ):
                    with contextlib.suppress(N.NVMLCallError):
                        getattr(rec, method)(i, link)
        meta["gpus"] = count
    finally:
        with contextlib.suppress(N.NVMLCallError):
            rec.shutdown()
    rec.save(path)
    print(f"recorded {len(rec.calls)} NVML answers for {meta.get('gpus', 0)} GPU(s) to {path}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        sys.exit(2)
    sys.exit(record(sys.argv[1]))
