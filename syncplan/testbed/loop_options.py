"""``syncplan testbed loop``'s options for the service's cost model and its calibration
(kept apart from loop.py so the CLI registers them without importing the loop)."""

from __future__ import annotations

import argparse
from typing import Any


def add_cost_model_args(p: argparse.ArgumentParser) -> None:
    """``loop``'s options for the service's cost model and its calibration."""
    p.add_argument(
        "--calibrate",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="time reference plans on the testbed before planning and fit the "
        "message overhead to them (default: on, unless "
        "--message-overhead-us is given)",
    )
    p.add_argument(
        "--calibrate-min-step",
        action="store_true",
        help="fit the step floor too (default: only the message overhead, the "
        "floor kept at --min-step-us or 50 us)",
    )
    p.add_argument(
        "--calibrate-exchange",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="fit the per-exchange overhead too (default: on; off: only the "
        "message overhead, as before session 8)",
    )
    p.add_argument(
        "--calibrate-switch",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="fit the switch overhead too, on the 1 MiB ring and halving-doubling "
        "(default: on; off: as before session 9)",
    )
    p.add_argument(
        "--calibration-reps",
        type=int,
        default=9,
        help="timed repetitions per reference plan (default %(default)s)",
    )
    p.add_argument(
        "--min-step-us",
        type=float,
        default=None,
        help="the service's least step time in the cost model (default: 50 us, "
        "fitted offline, see docs/testbed.md; calibrated with "
        "--calibrate-min-step)",
    )
    p.add_argument(
        "--message-overhead-us",
        type=float,
        default=None,
        help="the service's per-message overhead o (default: calibrated; without "
        "calibration the value fitted offline, see docs/testbed.md; 0 turns "
        "the term off)",
    )
    p.add_argument(
        "--exchange-overhead-us",
        type=float,
        default=None,
        help="the service's overhead per message end of a step's exchanged "
        "transfers (default: calibrated; 0 without calibration)",
    )
    p.add_argument(
        "--switch-overhead",
        type=float,
        default=None,
        help="the service's switch overhead, a fraction of a switched transfer's "
        "wire time (default: calibrated; 0 without calibration)",
    )
    p.add_argument(
        "--message-cores",
        type=int,
        default=None,
        help="the CPU cores the ranks share for their message overhead (default: "
        "this machine's, os.cpu_count(); 0: a CPU per rank)",
    )


def cost_model_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """LoopConfig settings from ``add_cost_model_args``'s options: calibration is on unless
    the message overhead is given."""
    kw: dict[str, Any] = {
        "calibrate": (
            args.message_overhead_us is None if args.calibrate is None else args.calibrate
        ),
        "calibration_reps": args.calibration_reps,
        "calibrate_min_step": args.calibrate_min_step,
        "calibrate_exchange": args.calibrate_exchange,
        "calibrate_switch": args.calibrate_switch,
    }
    for name in (
        "min_step_us",
        "message_overhead_us",
        "message_cores",
        "exchange_overhead_us",
        "switch_overhead",
    ):
        if getattr(args, name) is not None:
            kw[name] = getattr(args, name)
    return kw
