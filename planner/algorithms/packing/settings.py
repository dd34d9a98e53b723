"""Tuning of the tree-packing family: one frozen settings object, read as ``PACKING``.

Measurements behind the values are in docs/planner.md, "Packing settings"."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PackingSettings:
    """The packing family's tuning constants; each field is read where its doc says."""

    # the fluid packing LP (lp.py)
    max_rounds: int = 40
    """Column-generation rounds per depth limit."""
    tolerance: float = 1e-3
    """Relative reduced cost below which a packing LP (fluid or step-priced) counts as solved."""
    floor_gap: float = 5e-3
    """Relative gap to the floor (a lower bound) at which the fluid LP stops."""
    primal_above: int = 32
    """Ranks above which the master LP is re-solved by the primal simplex."""
    interior_ranks: tuple[int, int] = (17, 32)
    """Rank range in which a long column generation switches to interior-point duals."""
    interior_after: int = 10
    """Rounds after which that switch to interior-point duals happens."""
    keep_idle_rounds: int = 6
    """Rounds without share after which a column leaves the fluid master LP..."""
    prune_above: int = 8
    """...once the master holds more than this many columns per rank."""
    exact_pricing_above: int = 16
    """Ranks above which exact trees are priced where the greedy's end."""
    price_tie: float = 1e-6
    """Relative weight of an arc's physical cost in the prices: ties go to short routes."""
    # shares for the pipeline (balance.py)
    balance_max_rows: int = 8_000
    """Arcs x (2 offsets - 1) above which the fluid shares stand."""
    # the step-priced LP (window.py)
    window_rounds: int = 30
    """Column-generation rounds of a step-priced LP."""
    window_max_rows: int = 40_000
    """Arcs x steps of the step-priced master above which there is no step-priced packing."""
    abandon_after: int = 10
    """Rounds after which a step-priced LP still ``abandon_above`` x slower than the best..."""
    abandon_above: float = 1.15
    """...program stops."""
    window_prune_above: int = 8
    """Pieced LPs: tree columns per root and piece above which idle ones go..."""
    window_keep_idle_rounds: int = 2
    """...after this many solves without share."""
    # the step-priced LP over orbits (orbit.py)
    orbit_share: int = 8
    """Rank orbits at most 1/this of the ranks: the orbit LP is that much smaller."""
    orbit_rounds: int = 40
    """Column-generation rounds of the orbit LP."""
    max_transfers: int = 800_000
    """Transfers of one program at most (~60 MB of JSON with the route table)."""
    # pieced step-priced LPs (pieced.py)
    pieces: tuple[int, ...] = (2, 4, 8, 16, 32, 64)
    """Piece counts of the pieced LP, tried in order."""
    pieces_budget: float = 5e8
    """Simplex iterations x master nonzeros, summed over one plan's pieced LPs."""
    pieces_gain: float = 3e-3
    """A piece count whose program gains less than this stops the doubling."""
    pieces_max_columns: int = 2_000
    """Tree columns above which a pieced LP stops adding trees (and is not doubled)."""
    pieces_floor_gap: float = 2e-3
    """Relative gap to the fluid floor at which a pieced LP stops."""
    # lockstep pairs (schedule.py)
    min_share: float = 2e-3
    """Pairs below this share of the buffer are dropped (shares re-solved)."""
    # the packing LPs of the any-topology forest (sets.py)
    slacks: tuple[int | None, ...] = (0, 1, 2, None)
    """Depth over each rank's hop distance from the root; None: any."""
    unlimited_max_ranks: int = 32
    """Ranks above which: fewer rounds, a stall rule, no unlimited short routes."""
    slacks_large: tuple[int | None, ...] = (0, 1, 2, None)
    """Slacks above ``unlimited_max_ranks``, in order until one meets the floor."""
    floor_above: int = 16
    """Ranks above which the cut floor ends a packing LP."""
    unlimited_gap: float = 0.03
    """Above ``unlimited_max_ranks``: gap to the floor below which no unlimited packing."""
    rounds_large: int = 15
    """Column-generation rounds per packing above ``unlimited_max_ranks``."""
    stall_rounds: int = 6
    """Above ``unlimited_max_ranks``: rounds in a row under ``tolerance`` that stop a packing."""
    stall_mid: int = 12
    """The same from ``floor_above`` to ``unlimited_max_ranks`` ranks."""
    # automorphism search (symmetry.py)
    order_per_rank: int = 2
    """Group elements kept at most, per rank."""
    max_branch: int = 64
    """Search nodes per map tried before giving up."""
    work_per_rank: int = 12
    """Colour refinements per rank at most, over the whole search."""
    max_arc_visits: int = 3_000_000
    """Arcs visited by all refinements at most."""
    failed_closures: int = 4
    """Targets with no map that keeps the group within the cap after which none are tried."""
    maps_tried: int = 8
    """Maps from a rank to a target looked at for one that commutes."""


PACKING = PackingSettings()
