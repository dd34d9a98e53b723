"""Emulated cluster: hosts as Linux network namespaces, links shaped with ``tc`` tbf.

Modules: ``scenario`` (the scenario file), ``netns`` (running ``ip``/``tc``), ``state``
(the record of created objects), ``emulator`` (up/down/status), ``linkcheck`` and
``throughput`` (measuring shaped links), ``worker`` and ``runner`` (timing all-reduce in every
host namespace), ``plots``, ``cli``.
"""


class TestbedError(Exception):
    """A user-facing testbed failure; the message says what went wrong."""

    __test__ = False  # not a pytest test class
