"""Validation of the admin fabric (docs/formats.md, Topology file; links may name agents' nodes)."""

from __future__ import annotations

import re
from typing import Any

from syncplan.api.errors import APIError, planner_error
from syncplan.api.models import FabricCreate
from syncplan.core.errors import TopologyError
from syncplan.planner.topology import Topology

_AGENT_NODE = re.compile(r"^[A-Za-z0-9_.:-]+/[A-Za-z0-9_.:-]+$")


def normalize_fabric(fabric: FabricCreate) -> dict[str, Any]:
    """The fabric as plain data; 422 naming the field when it cannot be part of a graph."""
    ids: dict[str, int] = {}
    for i, n in enumerate(fabric.nodes):
        if n.id in ids:
            raise APIError(
                422,
                f"node id {n.id!r} already used by nodes[{ids[n.id]}]",
                ["body", "nodes", i, "id"],
                "duplicate",
            )
        ids[n.id] = i
    external: set[str] = set()
    for i, lk in enumerate(fabric.links):
        for end in ("src", "dst"):
            nid = getattr(lk, end)
            if nid in ids:
                continue
            if not _AGENT_NODE.match(nid):
                raise APIError(
                    422,
                    f"unknown node {nid!r}: declare it in 'nodes' or name an "
                    "agent's node as '{host}/{local_id}'",
                    ["body", "links", i, end],
                    "unknown_node",
                )
            external.add(nid)
    data = fabric.model_dump(mode="json", exclude_none=True)
    for lk in data["links"]:
        if not lk.get("directed"):
            lk.pop("directed", None)
    placeholders = [
        {"id": nid, "kind": "nic", "host": nid.split("/", 1)[0]} for nid in sorted(external)
    ]
    if data["nodes"] or placeholders:
        try:
            Topology.from_dict({"nodes": data["nodes"] + placeholders, "links": data["links"]})
        except TopologyError as exc:
            raise planner_error(exc, ["body"]) from None
    return data
