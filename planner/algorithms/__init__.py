"""Algorithm table: name -> function from a PlanContext to a Candidate."""

from planner.algorithms.base import Algorithm, Candidate, PlanContext
from planner.algorithms.forest import forest
from planner.algorithms.hierarchical import hierarchical
from planner.algorithms.ring import ring

ALGORITHMS: dict[str, Algorithm] = {
    "ring": ring,
    "hierarchical": hierarchical,
    "forest": forest,
}

__all__ = ["ALGORITHMS", "Algorithm", "Candidate", "PlanContext"]
