"""Errors every ``syncplan`` subcommand may raise."""


class CLIError(Exception):
    """A user-facing error: printed as one line, exit status 2."""
