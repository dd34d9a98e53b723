"""Parse and format byte sizes and durations for the CLI and reports."""

from __future__ import annotations

import re

from syncplan.core.errors import RequestError

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "kib": 1024,
    "m": 1000**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "g": 1000**3,
    "gb": 1000**3,
    "gib": 1024**3,
    "t": 1000**4,
    "tb": 1000**4,
    "tib": 1024**4,
}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?(?:[eE]\+?\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str | int) -> int:
    """``"256MiB"`` -> 268435456, ``"1e6"`` -> 1000000; plain integers are bytes.
    Raise RequestError when invalid."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        match = _SIZE_RE.match(str(text))
        unit = match.group(2).lower() if match else None
        if not match or unit not in _UNITS:
            raise RequestError(
                f"size {text!r}: expected a number of bytes, optionally with a "
                "unit such as KiB, MiB, GiB, KB, MB, GB"
            )
        number = float(match.group(1)) * _UNITS[unit]
        if number > 1 << 62:
            raise RequestError(f"size {text!r} is too large")
        if number != int(number):
            raise RequestError(f"size {text!r} is not a whole number of bytes")
        value = int(number)
    if value <= 0:
        raise RequestError(f"size {text!r} must be positive")
    return value


def format_size(n: float) -> str:
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= factor:
            return f"{n / factor:g} {unit}"
    return f"{n:g} B"


def format_time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.1f} us"
