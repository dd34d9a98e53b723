"""The loop's cost-model settings (no testbed needed)."""

from __future__ import annotations

import os

import pytest

from syncplan.testbed import TestbedError
from syncplan.testbed.loop import MESSAGE_OVERHEAD_US, MIN_STEP_US, LoopConfig


def test_the_loop_prices_messages_over_this_machines_cores_by_default() -> None:
    cfg = LoopConfig(sizes=[4096])
    assert cfg.message_overhead_us == MESSAGE_OVERHEAD_US > 0
    assert cfg.min_step_us == MIN_STEP_US
    assert cfg.message_cores == (os.cpu_count() or 1)
    off = LoopConfig(sizes=[4096], message_overhead_us=0.0, message_cores=0)
    assert (off.message_overhead_us, off.message_cores) == (0.0, 0)


@pytest.mark.parametrize(
    "kw",
    [
        {"message_overhead_us": -1.0},
        {"message_overhead_us": 2e6},
        {"message_cores": -1},
        {"message_cores": 1.5},
        {"message_cores": True},
    ],
)
def test_bad_message_settings_are_refused(kw: dict) -> None:
    with pytest.raises(TestbedError, match="message"):
        LoopConfig(sizes=[4096], **kw)


def _loop_args(*argv: str) -> dict:
    import argparse

    from syncplan.testbed.loop_options import add_cost_model_args, cost_model_kwargs

    p = argparse.ArgumentParser()
    add_cost_model_args(p)
    return cost_model_kwargs(p.parse_args(list(argv)))


def test_loop_calibrates_unless_told_the_overhead_or_told_not_to() -> None:
    assert _loop_args() == {
        "calibrate": True,
        "calibration_reps": 9,
        "calibrate_min_step": False,
        "calibrate_exchange": True,
        "calibrate_switch": True,
    }
    assert _loop_args("--message-overhead-us", "121")["calibrate"] is False
    assert _loop_args("--message-overhead-us", "121", "--calibrate")["calibrate"] is True
    assert _loop_args("--no-calibrate")["calibrate"] is False
    kw = _loop_args("--min-step-us", "80", "--calibrate-min-step", "--message-cores", "4")
    assert (kw["calibrate"], kw["min_step_us"], kw["calibrate_min_step"], kw["message_cores"]) == (
        True,
        80.0,
        True,
        4,
    )
    LoopConfig(sizes=[4096], **kw)  # valid settings
    kw = _loop_args(
        "--no-calibrate",
        "--message-overhead-us",
        "90",
        "--exchange-overhead-us",
        "70",
        "--no-calibrate-exchange",
    )
    assert (kw["exchange_overhead_us"], kw["calibrate_exchange"]) == (70.0, False)
    assert LoopConfig(sizes=[4096], **kw).exchange_overhead_us == 70.0
    with pytest.raises(TestbedError, match="exchange"):
        LoopConfig(sizes=[4096], exchange_overhead_us=-1.0)
    kw = _loop_args("--switch-overhead", "0.4", "--no-calibrate-switch")
    assert (kw["switch_overhead"], kw["calibrate_switch"]) == (0.4, False)
    assert LoopConfig(sizes=[4096], **kw).switch_overhead == 0.4
    with pytest.raises(TestbedError, match="switch"):
        LoopConfig(sizes=[4096], switch_overhead=-0.1)
