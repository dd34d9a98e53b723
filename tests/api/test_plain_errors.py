"""Every 422 reads as a plain message naming the field and the rule, without pydantic's
internal type names; the fabric is validated as strictly as a topology file."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from syncplan.api.main import create_app
from syncplan.api.settings import DEV_TOKENS, Settings

H = {"Authorization": f"Bearer {DEV_TOKENS['admin']}"}
# what must never reach a user: pydantic's validator and type names
INTERNAL = re.compile(
    r"function-(after|before|wrap|plain)|constrained-|union\[|list\[|functools|<function|"
    r"Value error|Input should|Field required|Extra inputs|_type\b|\[_"
)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    db = tmp_path_factory.mktemp("plain") / "s.db"
    app = create_app(Settings(environment="development", database_url=f"sqlite:///{db}"))
    with TestClient(app) as c:
        yield c


BAD_BODIES: list[tuple[Any, str, str]] = [
    ({"ranks": ["a", "b"], "size_bytes": 0}, "size_bytes", "size_bytes: must be at least 1 byte"),
    ({"ranks": ["a", "b"], "size_bytes": -5}, "size_bytes", "size_bytes: must be at least 1"),
    ({"ranks": ["a", "b"], "size_bytes": "0"}, "size_bytes", "must be positive"),
    ({"ranks": ["a", "b"], "size_bytes": "12 parsecs"}, "size_bytes", "unit such as"),
    ({"ranks": ["a", "b"], "size_bytes": 1.5}, "size_bytes", "size_bytes: must be a whole"),
    ({"ranks": ["a", "b"], "size_bytes": True}, "size_bytes", "size_bytes: must be a whole"),
    ({"ranks": "a", "size_bytes": 10}, "ranks", "ranks: must be a list"),
    ({"ranks": [], "size_bytes": 10}, "ranks", "ranks: must have at least 1 item"),
    ({"ranks": ["a"], "size_bytes": 10, "collective": "bcast"}, "collective", "collective: "),
    ({"ranks": ["a"], "size_bytes": 10, "bogus": 1}, "bogus", "bogus: unknown field"),
    ({"ranks": ["a"], "size_bytes": 10, "density": 2}, "density", "density: must be at most 1"),
    ({"ranks": ["a"], "size_bytes": 10, "density": "x"}, "density", "density: must be a number"),
    ({"size_bytes": 10}, "ranks", "ranks: is required"),
    (
        {"ranks": ["a"], "size_byte": 10},
        "size_byte",
        "size_byte: unknown field; did you mean 'size_bytes'?",
    ),
    ([1, 2], "body", "body: must be a JSON object"),
]


def _check(detail: list[dict[str, Any]], field: str, message: str) -> None:
    assert detail, detail
    for d in detail:
        assert set(d) == {"loc", "msg", "type"}
        assert not INTERNAL.search(d["msg"]), d
        assert all(isinstance(p, int) or re.fullmatch(r"[a-z_A-Z]+", p) for p in d["loc"]), d
    assert any(message in d["msg"] for d in detail), detail
    assert any(field in d["loc"] or field == "body" for d in detail), detail
    # a union's failed branches collapse into one message per field
    locs = [tuple(d["loc"]) for d in detail]
    assert len(locs) == len(set(locs)), detail


@pytest.mark.parametrize(("body", "field", "message"), BAD_BODIES)
def test_plan_request_errors_are_plain(
    client: TestClient, body: Any, field: str, message: str
) -> None:
    r = client.post("/v1/plans", json=body, headers=H)
    assert r.status_code == 422, r.text
    _check(r.json()["detail"], field, message)


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [b for b in BAD_BODIES if b[1] != "density"]
    + [
        ({"ranks": [{"host": "h", "gpu": -1}], "size_bytes": 1}, "gpu", "gpu: must be at least 0"),
        ({"ranks": [{"host": "h"}], "size_bytes": 1}, "ranks", "exactly one of 'gpu'"),
        ({"ranks": ["a"], "bucket_sizes": [0]}, "bucket_sizes", "bucket_sizes[0]: must be at"),
        ({"ranks": ["a"], "size_bytes": 1, "density": 0.5}, "density", "density: unknown field"),
    ],
)
def test_job_errors_are_plain(client: TestClient, body: Any, field: str, message: str) -> None:
    r = client.put("/v1/jobs/j1", json=body, headers=H)
    assert r.status_code == 422, r.text
    _check(r.json()["detail"], field, message)


def test_fabric_with_a_capitalised_kind_is_refused_naming_it(client: TestClient) -> None:
    # Before: stored as given, and the node silently became a forwarder.
    body = {"nodes": [{"id": "tor0", "kind": "Switch"}], "links": []}
    r = client.put("/v1/fabric", json=body, headers=H)
    assert r.status_code == 422, r.text
    msg = r.json()["detail"][0]["msg"]
    assert "nodes[0] (tor0): unknown kind 'Switch'" in msg and "allowed kinds" in msg, msg
    assert r.json()["detail"][0]["loc"] == ["body", "nodes", 0]


def test_fabric_with_a_misspelt_key_is_refused_naming_it(client: TestClient) -> None:
    body = {
        "nodes": [{"id": "tor0", "kind": "switch"}],
        "links": [{"src": "h0/nic0", "dst": "tor0", "bandwidth_Gbps": 12.5}],
    }
    r = client.put("/v1/fabric", json=body, headers=H)
    assert r.status_code == 422, r.text
    msgs = [d["msg"] for d in r.json()["detail"]]
    assert any(
        "links[0] (h0/nic0 -> tor0): unknown key 'bandwidth_Gbps'; did you mean "
        "'bandwidth_GBps'?" in m
        for m in msgs
    ), msgs
    assert client.get("/v1/fabric", headers=H).status_code == 404  # nothing stored


def test_the_demo_cluster_is_still_a_valid_fabric(client: TestClient) -> None:
    import json

    demo = json.loads((Path(__file__).resolve().parents[2] / "examples" / "demo.json").read_text())
    r = client.put("/v1/fabric", json=demo, headers=H)
    assert r.status_code == 200, r.text[:300]
    back = client.get("/v1/fabric", headers=H).json()  # GET's answer goes back as it is
    assert client.put("/v1/fabric", json=back, headers=H).status_code == 200
    r = client.put("/v1/fabric", json={**demo, "comment": "x"}, headers=H)
    assert r.status_code == 422 and "unknown key 'comment'" in r.json()["detail"][0]["msg"]
    assert client.delete("/v1/fabric", headers=H).status_code == 204


def test_invalid_json_names_the_body_and_the_position(client: TestClient) -> None:
    r = client.post(
        "/v1/plans", content=b"{not json", headers={**H, "Content-Type": "application/json"}
    )
    assert r.status_code == 422, r.text
    (item,) = r.json()["detail"]
    assert item["loc"] == ["body"] and item["msg"].startswith("body: invalid JSON at character")
