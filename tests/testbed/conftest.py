"""Shared fixtures of the testbed tests."""

from __future__ import annotations

import os
import subprocess

import pytest


@pytest.fixture(scope="module")
def namespaces_allowed() -> None:
    """Skip (with the kernel's reason) where root may not create network namespaces."""
    probe = f"sptprobe{os.getpid()}-x"
    res = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        pytest.skip(f"cannot create network namespaces here: {res.stderr.strip()}")
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=30)
