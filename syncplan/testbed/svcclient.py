"""One HTTP request to the planning service, run inside a testbed namespace.

The testbed's addresses exist only inside its namespaces, so the loop driver (in the root
namespace) talks to the service through this helper: ``ip netns exec P-svc python -m
syncplan.testbed.svcclient METHOD URL [--token T] [--body FILE] --out FILE``. It writes
``{"status": int, "body": <JSON or text>}`` to ``--out`` (atomically) and exits 0 whenever
an HTTP answer came back, 3 when the service could not be reached.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


def request(
    method: str, url: str, token: str | None, body: bytes | None, timeout_s: float
) -> tuple[int, Any]:
    """(status, parsed JSON body or text) of one request."""
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if body is not None:
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m syncplan.testbed.svcclient")
    ap.add_argument("method", choices=["GET", "PUT", "POST", "DELETE"])
    ap.add_argument("url")
    ap.add_argument("--token")
    ap.add_argument("--body", type=Path, help="JSON request body file")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    from syncplan.core.atomic import atomic_write_json

    body = args.body.read_bytes() if args.body else None
    try:
        status, data = request(args.method, args.url, args.token, body, args.timeout)
    except (OSError, urllib.error.URLError) as exc:
        print(f"svcclient: {args.method} {args.url}: {exc}", file=sys.stderr)
        return 3
    atomic_write_json(args.out, {"status": status, "body": data})
    return 0


if __name__ == "__main__":
    sys.exit(main())
