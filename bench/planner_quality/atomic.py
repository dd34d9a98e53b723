"""Atomic writes for the planner-quality benches (syncplan.core.atomic): a reader never sees
half a file."""

from __future__ import annotations

from pathlib import Path

from syncplan.core.atomic import AtomicFile, atomic_write_json


def write_json(path: Path, data: object) -> None:
    """``data`` as indented JSON at ``path``, written atomically."""
    atomic_write_json(path, data, indent=1)


def save_figure(fig, path: Path, dpi: int = 110) -> None:
    """``fig`` laid out and saved as ``path`` (PNG) atomically, then closed."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    with AtomicFile(path) as f:
        fig.savefig(f.tmp, dpi=dpi)
    plt.close(fig)
