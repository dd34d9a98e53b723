"""syncplan.core: what every side shares and that imports no side.

The formats other programs rely on (docs/formats.md), the error types, the plan options and
small utilities (atomic writes). planner, api, agents, executor and the CLI shell import from
here; nothing here imports them (tests/test_layering.py).
"""
