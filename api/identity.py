"""Per-host agent credentials.

A host token is bound to one host name: ``spa1.<hex HMAC-SHA256(secret, host)>.<host>``,
the secret being ``SYNCPLAN_AGENT_SECRET``. The service recomputes the MAC from the host
named in the token, so it stores nothing per host, and a token reports only for its own
host (``PUT /v1/agents/{host}/report``); it also reads (``GET /v1/agents``, the agent's
peers and its stored ``seq``). ``syncplan token agent HOST`` and the admin endpoint
``POST /v1/agents/{host}/token`` issue them. Changing the secret revokes every host token.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import re

PREFIX = "spa1"
_HOST = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
_CONTEXT = b"syncplan agent host token v1\0"


def _mac(secret: str, host: str) -> str:
    return hmac.new(secret.encode(), _CONTEXT + host.encode(), hashlib.sha256).hexdigest()


def host_token(secret: str, host: str) -> str:
    """The token that lets an agent report as ``host`` (ValueError for a bad host name)."""
    if not _HOST.match(host):
        raise ValueError(f"host name {host!r} must be 1-128 characters of [A-Za-z0-9_.:-]")
    return f"{PREFIX}.{_mac(secret, host)}.{host}"


def token_host(secret: str | None, token: str) -> str | None:
    """The host ``token`` is bound to, or None when it is not a valid host token."""
    if secret is None or not token.startswith(PREFIX + "."):
        return None
    _, mac, host = [*token.split(".", 2), "", ""][:3]
    if len(mac) != 64 or not _HOST.match(host):
        return None
    return host if hmac.compare_digest(mac, _mac(secret, host)) else None


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``syncplan token agent HOST``: print a host token from $SYNCPLAN_AGENT_SECRET."""
    p = subparsers.add_parser(
        "token",
        help="issue credentials (agent host tokens)",
        description="Issue a host-bound agent token from SYNCPLAN_AGENT_SECRET (the "
        "service's secret); the agent on HOST sends it as its --token.",
    )
    sub = p.add_subparsers(dest="kind", metavar="KIND", required=True)
    a = sub.add_parser("agent", help="the token of the agent on HOST")
    a.add_argument("host", metavar="HOST")
    a.set_defaults(func=_issue)


def _issue(args: argparse.Namespace) -> int:
    import os

    from syncplan.core.errors import CLIError

    secret = os.environ.get("SYNCPLAN_AGENT_SECRET")
    if not secret:
        raise CLIError("SYNCPLAN_AGENT_SECRET is not set (the service's agent secret)")
    try:
        print(host_token(secret, args.host))
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    return 0


def scopes_of(token_scopes: dict[str, frozenset[str]], given: str) -> frozenset[str] | None:
    """The scopes ``given`` grants (None: not a token of this service); every token is
    compared, in constant time."""
    granted: frozenset[str] | None = None
    raw = given.encode()
    for token, scopes in token_scopes.items():
        if hmac.compare_digest(raw, token.encode()):
            granted = scopes
    return granted
