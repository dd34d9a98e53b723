"""A small kustomize renderer for the tests: ``resources`` (files and directories),
strategic-merge ``patches`` (by kind and name; ``null`` deletes a field, ``$patch: delete``
drops a named list item, lists of named objects merge by name), ``images``, ``namespace``
and ``labels``. The real ``kustomize build`` is used instead when it is installed."""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

CLUSTER_SCOPED = {"Namespace", "PriorityClass", "RuntimeClass", "ClusterRole", "ClusterRoleBinding"}


def build(directory: str | Path) -> list[dict[str, Any]]:
    """The objects ``kustomize build directory`` would print."""
    exe = shutil.which("kustomize")
    if exe:
        out = subprocess.run(
            [exe, "build", str(directory)], capture_output=True, text=True, check=True
        ).stdout
        return [d for d in yaml.safe_load_all(out) if d]
    return _build(Path(directory))


def _build(root: Path) -> list[dict[str, Any]]:
    k = yaml.safe_load((root / "kustomization.yaml").read_text())
    objs: list[dict[str, Any]] = []
    for res in k.get("resources", []):
        path = root / res
        if path.is_dir():
            objs.extend(_build(path))
        else:
            objs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    for patch in k.get("patches", []):
        body = yaml.safe_load((root / patch["path"]).read_text())
        target = patch.get("target") or {"kind": body["kind"], "name": body["metadata"]["name"]}
        hits = [
            o
            for o in objs
            if o["kind"] == target["kind"] and o["metadata"]["name"] == target["name"]
        ]
        assert hits, f"patch {patch['path']} matches nothing"
        for o in hits:
            merged = merge(o, {k2: v for k2, v in body.items() if k2 not in ("apiVersion", "kind")})
            o.clear()
            o.update(merged)
    for img in k.get("images", []):
        for o in objs:
            for c in _containers(o):
                name, _, tag = c["image"].partition(":")
                if name == img["name"]:
                    c["image"] = f"{img.get('newName', name)}:{img.get('newTag', tag or 'latest')}"
    for o in objs:
        if "namespace" in k and o["kind"] not in CLUSTER_SCOPED:
            o["metadata"]["namespace"] = k["namespace"]
        for lab in k.get("labels", []):
            o["metadata"].setdefault("labels", {}).update(lab["pairs"])
    return objs


def _containers(o: dict[str, Any]) -> list[dict[str, Any]]:
    spec = o.get("spec", {}).get("template", {}).get("spec", {})
    return spec.get("containers", []) + spec.get("initContainers", [])


def merge(base: Any, patch: Any) -> Any:
    """Strategic merge of ``patch`` into a copy of ``base``."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = copy.deepcopy(base)
        for key, value in patch.items():
            if value is None:
                out.pop(key, None)
            elif key in out:
                out[key] = merge(out[key], value)
            else:
                out[key] = copy.deepcopy(value)
        return out
    if (
        isinstance(base, list)
        and isinstance(patch, list)
        and patch
        and all(isinstance(p, dict) and "name" in p for p in patch)
        and all(isinstance(b, dict) and "name" in b for b in base)
    ):
        out = copy.deepcopy(base)
        for p in patch:
            idx = next((i for i, b in enumerate(out) if b["name"] == p["name"]), None)
            if p.get("$patch") == "delete":
                if idx is not None:
                    del out[idx]
            elif idx is None:
                out.append(copy.deepcopy(p))
            else:
                out[idx] = merge(out[idx], p)
        return out
    return copy.deepcopy(patch)
