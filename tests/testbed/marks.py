"""Markers of tests that build network namespaces: root, iproute2, and the kernel's consent."""

import os
import shutil

import pytest

NETNS = [
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces and tc"),
    pytest.mark.skipif(shutil.which("ip") is None or shutil.which("tc") is None,
                       reason="needs iproute2 (ip, tc)"),
    pytest.mark.usefixtures("namespaces_allowed"),
]
