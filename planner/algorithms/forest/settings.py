"""Tuning of the forest family: one frozen settings object, with the efforts as presets.

``FOREST`` is effort "fast"; ``EFFORT_PRESETS`` maps every effort to its settings.
Measurements behind the values are in docs/planner.md, "Forest settings"."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class ForestSettings:
    """The forest family's tuning constants; each field is read where its doc says."""

    # the host-structured forest (host.py)
    intra_groups: tuple[int, ...] = (1, 2, 4)
    """Pieces one merged intra-host transfer may cover."""
    hub_max_hosts: int = 8
    """Stars plus hub trees up to this many hosts."""
    fan_in_configs: int = 256
    """Near-best configurations whose per-step fan-in is counted."""
    fan_in_tolerance: float = 0.02
    """Model time traded for less fan-in."""
    build_margin: float = 0.005
    """The packing's estimate over the host forest's time that skips its build."""
    speculate_above: float = 1.005
    """Host trees' least fluid time over the floor from which forest_any starts at once."""
    max_units: int = 1 << 20
    """Units a buffer is cut into at most (piece sizes are whole units)."""
    piece_choices: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
    """Piece counts the host forest prices."""
    stagger_widths: tuple[int, ...] = (1, 2, 3, 4, 6, 8)
    """Stagger widths the host forest prices."""
    ramps: tuple[int, ...] = (0, 1, 2, 3)
    """Ramp lengths of ramped pieces."""
    min_pieces: int = 4
    """Fewest pieces of a pipelined host forest."""
    balance_max_crossings: int = 100_000
    """Arc crossings per piece above which the fluid LP's shares stand."""
    lp_configs: int = 2
    """Best (trees, stagger) configurations whose piece sizes an LP refines."""
    spread_rounds: int = 3
    """Re-spreads of routes with the LP's shares."""
    give_up: float = 1.5
    """Host trees' least fluid time over the floor at which they stop."""
    lp_pieces_below: int = 3
    """Piece counts below the best equal/ramped one tried with LP sizes."""
    host_lp_max_rows: int = 10_000
    """Arcs x steps of a host piece-size LP above which it is not refined."""
    mix_configs: int = 2
    """Best configurations given per-piece mixes."""
    mix_pieces: int = 2
    """Piece counts per configuration given mixes: the largest up to its own, down to half."""
    # lanes, trees and routes (lanes.py, trees.py, routes.py)
    max_lanes: int = 16
    """Lanes at most."""
    few_trees_above: int = 64
    """Hosts above which fewer tree counts are built."""
    route_tie: float = 1e-9
    """Relative: routes this close to the router's latency count as no longer."""
    hop_s: float = 1e-12
    """Seconds added per hop: among routes of equal latency, the fewest hops."""
    # per-piece mixes (mix.py)
    mix_budget: int = 6_000_000
    """Interior-point work of one plan's mix LPs: the sum of each LP's columns squared."""
    mix_max_columns: int = 1_600
    """Columns of one mix LP at most."""
    mix_max_ranks: int = 32
    """Ranks above which there are no mixes."""
    mix_ipm_iterations: int = 400
    """Interior-point iterations of one mix LP solve."""
    # the any-topology forest (general.py)
    general_max_ranks: int = 64
    """Ranks above which the host-structured forest runs alone."""
    balance_packings: int = 2
    """Best packings whose shares are re-solved for the pipeline."""
    window_packings: int = 3
    """Best packings (and the unlimited one) that seed a step-priced packing..."""
    window_max_ranks: int = 32
    """...up to this many ranks."""
    window_pieced_max_ranks: int = 16
    """Full pieced LPs up to this many ranks (above, by symmetry only)."""
    window_budget: float = 3e8
    """Simplex work that the one-piece step-priced LPs of a plan share."""
    window_unlimited_max_ranks: int = 16
    """The unlimited packing seeds a step-priced one up to this many ranks."""
    window_min_bytes: int = 1 << 20
    """Buffer size from which step-priced packings compete."""
    window_pieced: int = 2
    """Best step-priced packings (by their one-piece time) given pieces."""
    window_margin: float = 0.005
    """Margin by which a step-priced program must beat the best estimate."""
    mix_share: float = 2 / 3
    """Mixes at up to this share of the pipelined program's piece count."""
    mix_ends: int = 2
    """Pieces that mix freely at each end of the pipeline, per phase offset."""
    build_check: float = 0.01
    """A mix this close to the pipelined estimate is checked on the built program."""
    mix_reach: float = 1.1
    """Mixes only where the pipelined program is within this of what must be beaten."""
    # pipelined pairs (pipelined.py)
    few_pairs: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    """The largest pairs priced alone: fewer transfers, more pieces."""
    pipeline_pieces: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
    """Piece counts a packing's pairs are priced at."""
    lp_max_rows: int = 20_000
    """Arcs x steps of a pairs' piece-size LP above which there is none..."""
    lp_max_rows_large: int = 10_000
    """...the same above the packing's ``unlimited_max_ranks``."""
    # effort (effort.py)
    thorough: bool = False
    """Whether the thorough pieced LPs run after the others."""
    thorough_budget: float = 2e10
    """Simplex iterations x master nonzeros the thorough LPs of one plan spend together."""
    thorough_rounds: int = 8
    """Thorough rounds per piece count."""
    thorough_round_cap: int = 256
    """New columns per thorough round at most (the most negative)."""
    thorough_max_columns: int = 16_000
    """Tree columns of a thorough pieced LP at most."""
    thorough_wall_s: float = 600
    """Seconds after which no thorough LP round starts."""
    thorough_pieced: int = 2
    """Packings given thorough pieces."""


FOREST = ForestSettings()
EFFORT_PRESETS: dict[str, ForestSettings] = {
    "fast": FOREST,
    "thorough": replace(FOREST, thorough=True),
}
