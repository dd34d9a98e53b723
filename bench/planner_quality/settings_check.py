"""Every candidate's predicted time on 16 random family members (2 per family, up to 12
ranks) at 1 KiB, 1 MiB and 256 MiB, with the default cost settings and with testbed-like
ones (o = 80 us on 2 cores, x = 40 us, s = 0.3), written as JSON: run it on two checkouts and
compare the files to see what a cost-model change moves.

    PYTHONPATH=. python3 bench/planner_quality/settings_check.py OUT.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from syncplan.core.options import PlanOptions
from syncplan.planner import families as fam
from syncplan.planner.plan import compare
from syncplan.planner.topology import Topology

SETTINGS = {
    "default": PlanOptions(),
    "testbed": PlanOptions(
        min_step_s=50e-6,
        message_overhead_s=80e-6,
        message_cores=2,
        exchange_overhead_s=40e-6,
        switch_overhead=0.3,
    ),
}


def main(out_path: str) -> int:
    out = {}
    for family in fam.FAMILIES:
        for seed in (3, 7):
            topo = Topology.from_dict(fam.random_family(family, seed, 12))
            ranks = topo.endpoints()
            for size in (1024, 1 << 20, 256 << 20):
                for label, options in SETTINGS.items():
                    c = compare(topo, ranks, size, options=options)
                    out[f"{family}/{seed}/{size}/{label}"] = {
                        "best": c.best.algorithm,
                        **{k: v.predicted_time_s for k, v in c.candidates.items()},
                    }
    Path(out_path).write_text(json.dumps(out, indent=1))
    print(f"{len(out)} (member, size, settings) entries -> {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
