"""Algorithm table: name -> function from a PlanContext to a Candidate.

The order is the order of simplicity ``auto`` prefers among candidates it counts as tied.
"""

from syncplan.planner.algorithms.base import Algorithm, Candidate, PlanContext
from syncplan.planner.algorithms.dbtree import dbtree
from syncplan.planner.algorithms.direct import direct, direct_2level, direct_2step
from syncplan.planner.algorithms.forest import forest
from syncplan.planner.algorithms.hierarchical import hierarchical
from syncplan.planner.algorithms.recursive import halving_doubling, recursive_doubling
from syncplan.planner.algorithms.ring import ring
from syncplan.planner.algorithms.star import star, two_level_star

ALGORITHMS: dict[str, Algorithm] = {
    "ring": ring,
    "hierarchical": hierarchical,
    "star": star,
    "two-level-star": two_level_star,
    "direct": direct,
    "direct-2level": direct_2level,
    "direct-2step": direct_2step,
    "recursive-doubling": recursive_doubling,
    "halving-doubling": halving_doubling,
    "dbtree": dbtree,
    "forest": forest,
}

# Programs in which some rank forms the sum without it having been reduced to one root
# first: outside the family of planner/bound.py's lower bound (planner/bound_any.py covers
# them).
OUTSIDE_REDUCE_BROADCAST = frozenset({"direct", "direct-2level", "recursive-doubling"})

__all__ = ["ALGORITHMS", "OUTSIDE_REDUCE_BROADCAST", "Algorithm", "Candidate", "PlanContext"]
