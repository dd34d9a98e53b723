"""The host-path forest: trees rooted at different ranks, reduce and broadcast pipelined
together; host-structured where the topology has hosts, tree packings on any topology.

This front is the family's one import point for the rest of the planner."""

from syncplan.planner.algorithms.forest.general import forest_any
from syncplan.planner.algorithms.forest.host import forest
from syncplan.planner.algorithms.forest.settings import EFFORT_PRESETS, FOREST, ForestSettings

__all__ = ["EFFORT_PRESETS", "FOREST", "ForestSettings", "forest", "forest_any"]
