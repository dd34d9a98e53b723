"""Tree packings on any topology: the packing LPs, their step-priced and pieced forms, and
the lockstep programs of their trees.

This front is the family's one import point for the rest of the planner."""

from syncplan.planner.algorithms.packing.arborescence import min_arborescence, shallow_trees
from syncplan.planner.algorithms.packing.balance import balanced_packing
from syncplan.planner.algorithms.packing.lp import (
    Packing,
    PackingLP,
    TreeColumn,
    fluid_lower_bound,
)
from syncplan.planner.algorithms.packing.master import quiet_highs
from syncplan.planner.algorithms.packing.orbit import (
    OrbitWindowLP,
    best_orbit_packing,
    strong_group,
)
from syncplan.planner.algorithms.packing.pieced import (
    WindowProgram,
    pieced_window,
    window_program,
)
from syncplan.planner.algorithms.packing.reversal import ReversedLP, reverse_arcs
from syncplan.planner.algorithms.packing.routes import QuickRoutes, RankRoutes, hop_distances
from syncplan.planner.algorithms.packing.schedule import Pair, PairSchedule, pair_trees
from syncplan.planner.algorithms.packing.sets import (
    packings,
    start_any,
    stop_any,
)
from syncplan.planner.algorithms.packing.settings import PACKING, PackingSettings
from syncplan.planner.algorithms.packing.symmetry import Group, automorphisms
from syncplan.planner.algorithms.packing.window import Budget, WindowLP

__all__ = [
    "PACKING",
    "Budget",
    "Group",
    "OrbitWindowLP",
    "Packing",
    "PackingLP",
    "PackingSettings",
    "Pair",
    "PairSchedule",
    "QuickRoutes",
    "RankRoutes",
    "ReversedLP",
    "TreeColumn",
    "WindowLP",
    "WindowProgram",
    "automorphisms",
    "balanced_packing",
    "best_orbit_packing",
    "fluid_lower_bound",
    "hop_distances",
    "min_arborescence",
    "packings",
    "pair_trees",
    "pieced_window",
    "quiet_highs",
    "reverse_arcs",
    "shallow_trees",
    "start_any",
    "stop_any",
    "strong_group",
    "window_program",
]
