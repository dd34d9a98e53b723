"""Pydantic's validation errors as plain messages: ``size_bytes: must be at least 1 byte``.

Pydantic names the branches of a union and the validators it ran in ``loc``
(``function-after[check_size_text(), constrained-str]``) and reports one error per failed
branch. Here ``loc`` keeps only field names and list indices, the errors of one field
collapse into one message naming the field and the rule, and no pydantic type name is left.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import Any

ROOTS = ("body", "query", "path", "header", "cookie")
# the bare type tags pydantic puts in ``loc`` for the branches of a union
_TYPE_TAGS = frozenset(
    {"int", "float", "str", "bool", "bytes", "list", "dict", "none", "tuple", "set", "decimal"}
)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NOUNS = {
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "dict_type": "a JSON object",
    "model_type": "a JSON object",
    "model_attributes_type": "a JSON object",
    "datetime_type": "a date and time",
    "none_required": "null",
}
# fields that take a size: an integer number of bytes or a string such as "256MiB"
_SIZE_FIELDS = frozenset({"size_bytes", "bucket_sizes", "min_bytes", "max_bytes"})


def _clean_loc(loc: Any) -> list[str | int]:
    out: list[str | int] = []
    for part in loc or ():
        if isinstance(part, int):
            out.append(part)
        elif _NAME.match(str(part)) and str(part) not in _TYPE_TAGS:
            out.append(str(part))
    return out


def field_name(loc: list[str | int]) -> str:
    """``["body", "ranks", 0, "gpu"]`` -> ``ranks[0].gpu``; the root alone -> ``body``."""
    parts = loc[1:] if loc and loc[0] in ROOTS else loc
    text = ""
    for p in parts:
        text += f"[{p}]" if isinstance(p, int) else (f".{p}" if text else p)
    return text or (str(loc[0]) if loc else "body")


def _is_size(loc: list[str | int]) -> bool:
    return any(p in _SIZE_FIELDS for p in loc if isinstance(p, str))


def _rule(err: dict[str, Any], loc: list[str | int], fields: Iterable[str] = ()) -> str:
    """What the field must be, for one non-type error (``fields``: the names an unknown
    field may be a misspelling of)."""
    if err.get("type") == "json_invalid":
        loc = list(err.get("loc") or loc)
    kind, ctx = str(err.get("type", "")), err.get("ctx") or {}
    msg = str(err.get("msg", "invalid"))
    if kind == "greater_than" and _is_size(loc) and ctx.get("gt") == 0:
        return "must be at least 1 byte"
    bounds = {
        "greater_than": "must be greater than {gt}",
        "greater_than_equal": "must be at least {ge}",
        "less_than": "must be less than {lt}",
        "less_than_equal": "must be at most {le}",
        "too_short": "must have at least {min_length} item(s)",
        "too_long": "must have at most {max_length} item(s)",
        "string_too_short": "must have at least {min_length} character(s)",
        "string_too_long": "must have at most {max_length} character(s)",
        "string_pattern_mismatch": "must match the pattern {pattern}",
    }
    if kind in bounds:
        try:
            return bounds[kind].format(**ctx)
        except (KeyError, IndexError):
            pass
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        near = difflib.get_close_matches(str(loc[-1]) if loc else "", list(fields), n=1)
        if near:
            return f"unknown field; did you mean {near[0]!r}?"
        return "unknown field (docs/formats.md lists the fields)"
    if kind == "literal_error" and "expected" in ctx:
        return f"{err.get('input')!r} is not allowed; must be {ctx['expected']}"
    if kind == "json_invalid":
        at = f" at character {loc[-1]}" if loc and isinstance(loc[-1], int) else ""
        return f"invalid JSON{at} ({ctx.get('error', msg)})"
    msg = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    msg = re.sub(r" after validation, not \d+", "", msg)
    return re.sub(r"^(Input|String|List|Value|Dictionary|Object) should ", "must ", msg)


def _type_rule(errors: list[dict[str, Any]], loc: list[str | int]) -> str:
    """What the field must be, when every branch refused the value's type."""
    nouns = list(dict.fromkeys(_NOUNS.get(str(e.get("type")), "valid") for e in errors))
    if "a number" in nouns and "a whole number" in nouns:
        nouns.remove("a whole number")
    if _is_size(loc) and "a string" in nouns:
        return 'must be a whole number of bytes or a size string such as "256MiB"'
    return "must be " + (" or ".join(nouns) if len(nouns) < 3 else ", ".join(nouns))


def _is_type_error(err: dict[str, Any]) -> bool:
    kind = str(err.get("type", ""))
    return kind in _NOUNS or kind.endswith("_type")


def plain_items(
    errors: list[Any],
    prefix: list[str | int],
    planner_loc: Any = None,
    fields: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """One ``{"loc", "msg", "type"}`` item per field, its message naming the field and the
    rule. ``planner_loc(msg, loc)`` places a whole-body value error that names its own
    field (``links[3] (a -> b): ...``); an unknown field close to one of ``fields`` gets
    a "did you mean"."""
    fields = list(fields)
    groups: dict[tuple[str | int, ...], list[dict[str, Any]]] = {}
    for err in errors:
        loc = [*prefix, *_clean_loc(err.get("loc"))]
        groups.setdefault(tuple(loc), []).append(err)
    # a type error at a field whose value another branch took further is that branch's
    # business: ``density: [2]`` is about density[0], not about density being a number
    keys = list(groups)
    for key in keys:
        if all(_is_type_error(e) for e in groups[key]) and any(
            len(k) > len(key) and k[: len(key)] == key for k in keys
        ):
            del groups[key]
    out = []
    for key, errs in groups.items():
        loc = list(key)
        if errs[0].get("type") == "json_invalid":  # loc ends with a character position
            loc = [p for p in loc if isinstance(p, str)]
            errs = [{**errs[0], "loc": key}]
        real = [e for e in errs if not _is_type_error(e)]
        kind = str((real or errs)[0].get("type", "invalid"))
        if real:
            rules = list(dict.fromkeys(_rule(e, loc, fields) for e in real))
            rule = "; ".join(rules)
        else:
            rule = _type_rule(errs, loc)
        if kind == "value_error" and planner_loc is not None and len(real) == 1:
            placed = planner_loc(rule, loc)
            if placed != loc:  # the message names its field itself
                out.append({"loc": placed, "msg": rule, "type": kind})
                continue
        out.append({"loc": loc, "msg": f"{field_name(loc)}: {rule}", "type": kind})
    return out
