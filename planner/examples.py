"""Write the shipped example topologies: ``python -m syncplan.planner.examples OUTDIR``
writes builders.EXAMPLES and families.FAMILY_EXAMPLES as OUTDIR/NAME.json, and the demo."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from syncplan.planner.builders import DEMO, EXAMPLES
from syncplan.planner.families import FAMILY_EXAMPLES


def write_examples(outdir: Path) -> list[Path]:
    """Write EXAMPLES and FAMILY_EXAMPLES as OUTDIR/NAME.json and the demo as demo.json."""
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, make in {**EXAMPLES, **FAMILY_EXAMPLES}.items():
        path = outdir / f"{name}.json"
        path.write_text(json.dumps(make(), indent=1) + "\n")
        written.append(path)
    (outdir / "demo.json").write_text(json.dumps(EXAMPLES[DEMO](), indent=1) + "\n")
    return written


if __name__ == "__main__":
    for p in write_examples(Path(sys.argv[1] if len(sys.argv) > 1 else "examples")):
        print(p)
