"""What every plan document shares, whichever collective: the format version, the tie
tolerance of auto, the routes pinned on its transfers and its id."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from syncplan.core.program import Program, Transfer
from syncplan.planner.routing import Router
from syncplan.planner.topology import Topology

PLAN_FORMAT_VERSION = 1
# auto: candidates predicted within this fraction of the fastest count as tied, and the tie
# goes to the simplest (first in ALGORITHMS: ring, hierarchical, the latency-oriented ones,
# forest). On the testbed a 0.02 % edge of a one-step direct exchange over the ring cost
# 3-15 % (docs/testbed.md). So auto is never more than this above any candidate.
TIE_TOLERANCE = 0.01


def with_routes(program: Program, ranks: list[str], router: Router) -> Program:
    """Pin every transfer without a path to the route the cost model priced it on."""
    if all(t.path is not None for step in program.steps for t in step):
        return program  # forest programs pin every path already (700,000 transfers at 64)
    steps = [
        [
            t
            if t.path is not None
            else Transfer(
                t.src, t.dst, t.lo, t.hi, t.reduce, router.path(ranks[t.src], ranks[t.dst])
            )
            for t in step
        ]
        for step in program.steps
    ]
    return Program(program.units, steps)


def plan_id(topo: Topology, doc: dict[str, Any]) -> str:
    """A stable id from the topology, the request and the chosen algorithm."""
    key = json.dumps(
        {
            "topology": topo.to_dict(),
            "ranks": doc["ranks"],
            "size_bytes": doc["size_bytes"],
            "algorithm": doc["algorithm"],
            "requested": doc["requested_algorithm"],
            "version": PLAN_FORMAT_VERSION,
            **({"overhead": doc["min_step_s"]} if doc.get("min_step_s") else {}),
            **(
                {"message_overhead": doc["message_overhead_s"]}
                if doc.get("message_overhead_s")
                else {}
            ),
            **({"message_cores": doc["message_cores"]} if doc.get("message_cores") else {}),
            **(
                {"exchange_overhead": doc["exchange_overhead_s"]}
                if doc.get("exchange_overhead_s")
                else {}
            ),
            **({"switch_overhead": doc["switch_overhead"]} if doc.get("switch_overhead") else {}),
            **({"effort": doc["effort"]} if doc.get("effort") else {}),
            **(
                {
                    "sparse": {
                        k: doc["sparse"][k] for k in ("density", "density_overlap", "block_elems")
                    }
                }
                if doc.get("sparse")
                else {}
            ),
        },
        sort_keys=True,
    )
    return hashlib.sha256(key.encode()).hexdigest()[:20]
