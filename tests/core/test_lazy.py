"""core.lazy: a package's names import their module on first use."""

from __future__ import annotations

import sys

import pytest
from syncplan.core.lazy import lazy_getattr


def test_names_resolve_on_first_use_and_others_raise() -> None:
    get = lazy_getattr("pkg", {"dedent": "textwrap", "lazy_getattr": "syncplan.core.lazy"})
    assert get("lazy_getattr") is lazy_getattr
    assert get("dedent") is sys.modules["textwrap"].dedent
    with pytest.raises(AttributeError, match="module 'pkg' has no attribute 'wrap'"):
        get("wrap")
