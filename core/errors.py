"""Semantic exceptions every side raises: bad input, an infeasible request, a wrong program."""


class PlannerError(Exception):
    """Base class of every error the planner raises on purpose."""


class TopologyError(PlannerError, ValueError):
    """The topology file is malformed or inconsistent; the message names the offender."""


class RequestError(PlannerError, ValueError):
    """The plan request is malformed (unknown rank, bad size, unknown algorithm...)."""


class InfeasibleError(PlannerError):
    """The request is well formed but this algorithm cannot serve it on this topology."""


class VerificationError(PlannerError):
    """A program is not a correct all-reduce; ``str()`` describes the first error."""


class CLIError(Exception):
    """A user-facing error of a ``syncplan`` subcommand: printed as one line, exit status 2."""
