"""How every example's plans fit the MSCCL executor: chunks (exact or quantized), channels,
steps per threadblock, threadblocks per GPU, and what quantizing costs under the cost model
(the verifier's time of the chunked program over its time of the plan, same routing).

    python3 bench/export/msccl_fit.py [--size 256MiB] [--target msccl]

Writes bench/results/msccl_export.json."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from syncplan.planner.algorithms import ALGORITHMS
from syncplan.planner.plan import make_plan
from syncplan.planner.sizes import parse_size
from syncplan.planner.topology import load_topology
from syncplan.planner.verify import verify_plan

from syncplan.export.msccl import chunked_doc, export_msccl
from syncplan.export.msccl_xml import ExportError


def strip_paths(doc: dict) -> dict:
    prog = doc["program"]
    steps = [
        [{k: v for k, v in t.items() if k not in ("path", "route")} for t in s]
        for s in prog["steps"]
    ]
    return {**doc, "program": {"units": prog["units"], "steps": steps}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="256MiB")
    ap.add_argument("--target", default="msccl")
    args = ap.parse_args()
    size = parse_size(args.size)
    rows = []
    for path in sorted(Path("examples").glob("*.json")):
        topo = load_topology(path)
        for alg in ALGORITHMS:
            plan = make_plan(topo, topo.endpoints(), size, alg)
            try:
                algo, info = export_msccl(plan, target=args.target)
            except ExportError as exc:
                rows.append({"example": path.stem, "algorithm": alg, "error": str(exc)})
                continue
            xml_bytes = len(algo.to_xml())
            base = verify_plan(strip_paths(plan), topo).simulated_time_s
            chunked = verify_plan(chunked_doc(plan, info), topo).simulated_time_s
            row = {
                "example": path.stem,
                "algorithm": alg,
                "ranks": len(plan["ranks"]),
                **{k: v for k, v in info.items() if k != "program"},
                "xml_bytes": xml_bytes,
                "time_ratio_chunked_over_plan": round(chunked / base, 4),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    out = Path("bench/results/msccl_export.json")
    out.write_text(
        json.dumps({"size_bytes": size, "target": args.target, "rows": rows}, indent=1) + "\n"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
