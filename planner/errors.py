"""Semantic exceptions of the planner: bad input versus an infeasible request."""


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
