"""A compact, lossless encoding of a plan document's ``program`` (docs/formats.md, Plan document).

The service sends it only when asked (``?format=compact``), under the key
``program_compact`` instead of ``program``, so no reader of the contract form mistakes it
for a program. ``expand_document`` turns such a document back into the contract form; the
program it gives equals the one that was encoded.

Form (``"encoding": "columns/1"``)::

    {"encoding": "columns/1", "units": U,
     "paths": [[node, ...], ...],          # the distinct transfer paths
     "routes": [[src, dst, p], ...],       # pair (src, dst) always uses paths[p] (-1: none)
     "steps": [{"src": [...], "dst": [...], "lo": [...], "hi": [...], "reduce": [0|1, ...]}]}

Transfer i of step s is ``{"src": src[i], "dst": dst[i], "chunk": [lo[i], hi[i]],
"reduce": bool(reduce[i])}`` plus ``"path"`` when its route has one. A program that lists its
paths once in ``routes`` (planner.program.program_to_doc) is encoded with ``"route_table":
true`` and ``paths`` equal to that table; its transfers expand with ``"route"`` indices.
When some pair uses more than one path, ``routes`` is absent and every step has a ``"path"``
column of indices instead. A program whose transfers carry fields other than these is not encoded.
"""

from __future__ import annotations

from typing import Any

ENCODING = "columns/1"
COMPACT_KEY = "program_compact"
_FIELDS = frozenset({"src", "dst", "chunk", "reduce", "path", "route"})


class CompactError(ValueError):
    """A program that cannot be encoded losslessly, or a malformed compact program."""


def compact_program(program: dict[str, Any]) -> dict[str, Any]:
    """The compact form of a contract ``program``; raises CompactError when it would lose
    something (unknown fields, a malformed transfer)."""
    keys = list(program)
    if keys not in (["units", "steps"], ["units", "routes", "steps"]):
        raise CompactError(f"program has fields {keys}, not units and steps (and routes)")
    table = program.get("routes")
    if table is not None and not (
        isinstance(table, list)
        and all(isinstance(p, list) and all(isinstance(n, str) for n in p) for p in table)
    ):
        raise CompactError("program.routes is not a list of paths")
    paths: dict[tuple[str, ...], int] = {}
    for k, path in enumerate(table or ()):
        if paths.setdefault(tuple(path), k) != k:
            raise CompactError(f"program.routes[{k}] repeats an earlier route")
    routes: dict[tuple[int, int], int] = {}
    per_pair = True
    steps: list[dict[str, list[int]]] = []
    for s, step in enumerate(program["steps"]):
        cols: dict[str, list[int]] = {
            "src": [],
            "dst": [],
            "lo": [],
            "hi": [],
            "reduce": [],
            "path": [],
        }
        for i, t in enumerate(step):
            if not isinstance(t, dict) or not set(t) <= _FIELDS or len(t) < 4:
                raise CompactError(f"steps[{s}][{i}]: not a plain transfer")
            src, dst, chunk, reduce = t["src"], t["dst"], t["chunk"], t["reduce"]
            if not (
                _is_int(src)
                and _is_int(dst)
                and isinstance(chunk, list)
                and len(chunk) == 2
                and _is_int(chunk[0])
                and _is_int(chunk[1])
                and isinstance(reduce, bool)
            ):
                raise CompactError(f"steps[{s}][{i}]: not a plain transfer")
            path = t.get("path")
            if "path" in t and not (
                isinstance(path, list) and all(isinstance(n, str) for n in path)
            ):
                raise CompactError(f"steps[{s}][{i}]: path is not a list of node ids")
            if (table is not None) != ("route" in t) and ("path" in t or "route" in t):
                raise CompactError(f"steps[{s}][{i}]: routes and inline paths mixed")
            if "route" in t:
                p = t["route"]
                if not _is_int(p) or not 0 <= p < len(table or ()):
                    raise CompactError(f"steps[{s}][{i}]: route is not an index of routes")
            else:
                p = -1 if path is None else paths.setdefault(tuple(path), len(paths))
            if routes.setdefault((src, dst), p) != p:
                per_pair = False
            cols["src"].append(src)
            cols["dst"].append(dst)
            cols["lo"].append(chunk[0])
            cols["hi"].append(chunk[1])
            cols["reduce"].append(int(reduce))
            cols["path"].append(p)
        steps.append(cols)
    out: dict[str, Any] = {
        "encoding": ENCODING,
        "units": program["units"],
        "paths": [list(p) for p in paths],
    }
    if table is not None:
        out["route_table"] = True
    if per_pair:
        out["routes"] = [[a, b, p] for (a, b), p in routes.items()]
        for cols in steps:
            del cols["path"]
    out["steps"] = steps
    return out


def expand_program(compact: Any) -> dict[str, Any]:
    """The contract ``program`` of a compact one; raises CompactError naming the first
    malformed field (the program itself is checked by its reader afterwards)."""
    if not isinstance(compact, dict) or compact.get("encoding") != ENCODING:
        got = compact.get("encoding") if isinstance(compact, dict) else type(compact).__name__
        raise CompactError(f"{COMPACT_KEY}: unknown encoding {got!r} (expected {ENCODING!r})")
    paths = compact.get("paths")
    if not isinstance(paths, list) or not all(isinstance(p, list) for p in paths):
        raise CompactError(f"{COMPACT_KEY}.paths must be a list of paths")
    raw_steps = compact.get("steps")
    if not isinstance(raw_steps, list):
        raise CompactError(f"{COMPACT_KEY}.steps must be a list")

    def path_of(p: Any, where: str) -> list[str] | None:
        if p == -1 and _is_int(p):
            return None
        if not _is_int(p) or not 0 <= p < len(paths):
            raise CompactError(f"{where}: path index {p!r} out of range")
        return paths[p]

    route: dict[tuple[int, int], list[str] | None] | None = None
    if "routes" in compact:
        try:
            triples = [(a, b, p) for a, b, p in compact["routes"]]
        except (TypeError, ValueError):
            raise CompactError(f"{COMPACT_KEY}.routes must be [src, dst, path] triples") from None
        route = {
            (a, b): path_of(p, f"{COMPACT_KEY}.routes[{i}]") for i, (a, b, p) in enumerate(triples)
        }
    table = compact.get("route_table") is True  # the program lists its paths in routes
    index_of = {id(p): k for k, p in enumerate(paths)}
    steps: list[list[dict[str, Any]]] = []
    names = ("src", "dst", "lo", "hi", "reduce") + (() if route is not None else ("path",))
    for s, cols in enumerate(raw_steps):
        where = f"{COMPACT_KEY}.steps[{s}]"
        if not isinstance(cols, dict) or not all(isinstance(cols.get(k), list) for k in names):
            raise CompactError(f"{where} must hold the columns {', '.join(names)}")
        n = len(cols["src"])
        if any(len(cols[k]) != n for k in names):
            raise CompactError(f"{where}: columns of different lengths")
        if route is None:
            pcol = [path_of(p, f"{where}.path[{i}]") for i, p in enumerate(cols["path"])]
        else:
            pcol = []
            for i, k in enumerate(zip(cols["src"], cols["dst"], strict=True)):
                try:
                    pcol.append(route[k])
                except (KeyError, TypeError):
                    raise CompactError(f"{where}[{i}]: no route for {k[0]!r} -> {k[1]!r}") from None
        step: list[dict[str, Any]] = []
        for src, dst, lo, hi, red, path in zip(
            cols["src"], cols["dst"], cols["lo"], cols["hi"], cols["reduce"], pcol, strict=True
        ):
            t: dict[str, Any] = {"src": src, "dst": dst, "chunk": [lo, hi], "reduce": bool(red)}
            if path is not None:
                if table:
                    t["route"] = index_of[id(path)]
                else:
                    t["path"] = path.copy()
            step.append(t)
        steps.append(step)
    if table:
        return {"units": compact.get("units"), "routes": [p.copy() for p in paths], "steps": steps}
    return {"units": compact.get("units"), "steps": steps}


def compact_document(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with ``program`` replaced by ``program_compact`` (same key position)."""
    return {
        (COMPACT_KEY if k == "program" else k): (compact_program(v) if k == "program" else v)
        for k, v in doc.items()
    }


def expand_document(doc: dict[str, Any]) -> dict[str, Any]:
    """The contract form of a document that may carry ``program_compact``; others as they
    are. Raises CompactError for a malformed compact program."""
    if COMPACT_KEY not in doc:
        return doc
    if "program" in doc:
        raise CompactError(f"document has both program and {COMPACT_KEY}")
    return {
        ("program" if k == COMPACT_KEY else k): (expand_program(v) if k == COMPACT_KEY else v)
        for k, v in doc.items()
    }


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)
