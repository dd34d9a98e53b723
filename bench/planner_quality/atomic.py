"""Atomic writes for the planner-quality benches: a reader never sees half a file."""

from __future__ import annotations

import json
import os
from pathlib import Path


def write_json(path: Path, data: object) -> None:
    """``data`` as indented JSON at ``path``, written to a side file and renamed."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


def save_figure(fig, path: Path, dpi: int = 110) -> None:
    """``fig`` laid out and saved as ``path`` (PNG) via a side file, then closed."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=dpi)
    os.replace(tmp, path)
    plt.close(fig)
