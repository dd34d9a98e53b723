"""Markers of tests that build network namespaces: root, iproute2, and the kernel's consent."""

import os
import shutil
from collections.abc import Callable
from typing import Any

import pytest

NETNS = [
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces and tc"),
    pytest.mark.skipif(
        shutil.which("ip") is None or shutil.which("tc") is None, reason="needs iproute2 (ip, tc)"
    ),
    pytest.mark.usefixtures("namespaces_allowed"),
]


def netns(fn: Callable[..., Any]) -> Callable[..., Any]:
    """NETNS for one test function of a module whose other tests need none of it."""
    for mark in reversed(NETNS):
        fn = mark(fn)
    return fn
