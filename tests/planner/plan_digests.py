"""Program digests of the planner's output, to show a refactor changes no plan.

``python3 -m tests.planner.plan_digests --write`` records, for every example x algorithm at
256 MiB and 4 KiB and for 64 family members (``auto`` at 256 MiB and 4 KiB), a SHA-1 of the
chosen algorithm, its program and its predicted time; ``tests/planner/test_plan_digests.py``
plans the same cases and compares. The file is rewritten only when a change of plans is meant.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DIGEST_FILE = Path(__file__).with_name("plan_digests.json")
SIZES = (256 << 20, 4 << 10)
FAMILY_SEEDS = 8  # x 8 families = 64 members


def _load(name: str) -> tuple[Any, list[str]]:
    from syncplan.planner.topology import Topology

    if name.startswith("family:"):
        from syncplan.planner.families import random_family

        _, fam, seed = name.split(":")
        topo = Topology.from_dict(random_family(fam, int(seed)))
    else:
        topo = Topology.from_dict(json.loads((EXAMPLES / f"{name}.json").read_text()))
    return topo, topo.endpoints()


def cases() -> Iterator[tuple[str, str, int]]:
    """(topology name, algorithm, size) for every recorded case."""
    from syncplan.planner.algorithms import ALGORITHMS
    from syncplan.planner.families import FAMILIES

    for path in sorted(EXAMPLES.glob("*.json")):
        for algo in ALGORITHMS:
            for size in SIZES:
                yield path.stem, algo, size
    for fam in FAMILIES:
        for seed in range(FAMILY_SEEDS):
            for size in SIZES:
                yield f"family:{fam}:{seed}", "auto", size


def digest(name: str, algo: str, size: int) -> str:
    """The digest of one case's plan, or of the error that refused it."""
    from syncplan.core.errors import PlannerError
    from syncplan.planner.plan import make_plan

    topo, ranks = _load(name)
    try:
        doc = make_plan(topo, ranks, size, algo)
    except PlannerError as exc:
        return "error:" + type(exc).__name__
    body = json.dumps(
        {
            "algorithm": doc["algorithm"],
            "program": doc["program"],
            "predicted": f"{doc['predicted_time_s']:.9g}",
        },
        sort_keys=True,
    )
    return hashlib.sha1(body.encode()).hexdigest()


def key(name: str, algo: str, size: int) -> str:
    return f"{name}|{algo}|{size}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--write", action="store_true", help="rewrite the digest file")
    ap.add_argument("--check", action="store_true", help="compare with the digest file")
    ap.add_argument("--only", default="", help="substring a case key must contain")
    args = ap.parse_args(argv)
    want = json.loads(DIGEST_FILE.read_text()) if DIGEST_FILE.exists() else {}
    got: dict[str, str] = {}
    bad = 0
    todo = [c for c in cases() if args.only in key(*c)]
    for i, case in enumerate(todo, 1):
        t0 = time.perf_counter()
        got[key(*case)] = d = digest(*case)
        ok = want.get(key(*case)) == d
        bad += not ok
        print(
            f"[{i}/{len(todo)}] {key(*case)} {d[:12]} {time.perf_counter() - t0:.1f}s"
            f"{'' if ok or not args.check else ' DIFFERS'}",
            flush=True,
        )
    if args.write:
        DIGEST_FILE.write_text(json.dumps({**want, **got}, indent=0, sort_keys=True) + "\n")
    if args.check and bad:
        print(f"{bad} of {len(todo)} digests differ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
