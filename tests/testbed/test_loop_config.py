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


@pytest.mark.parametrize("kw", [{"message_overhead_us": -1.0}, {"message_overhead_us": 2e6},
                                {"message_cores": -1}, {"message_cores": 1.5},
                                {"message_cores": True}])
def test_bad_message_settings_are_refused(kw: dict) -> None:
    with pytest.raises(TestbedError, match="message"):
        LoopConfig(sizes=[4096], **kw)
