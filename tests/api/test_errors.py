"""The error model: planner exceptions become 422/409 with the field named; an unreachable
store makes /readyz 503."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from syncplan.api.db import make_engine
from syncplan.api.errors import planner_error, planner_loc
from syncplan.api.main import create_app
from syncplan.api.settings import Settings
from syncplan.core.errors import InfeasibleError, RequestError, TopologyError

from tests.api.helpers import free_port


def test_planner_messages_name_the_field() -> None:
    assert planner_loc("ranks[3]: unknown node 'x'", ["body"]) == ["body", "ranks", 3]
    assert planner_loc("links[2] (a -> b): bandwidth_GBps must be positive", ["body"]) == [
        "body",
        "links",
        2,
    ]
    assert planner_loc("gpus[1].index: GPU index 0 appears twice", ["body"]) == [
        "body",
        "gpus",
        1,
        "index",
    ]
    assert planner_loc("algorithm 'x' is unknown", ["body"]) == ["body", "algorithm"]
    assert planner_loc("no algorithm can serve this request", ["body"]) == ["body"]


def test_planner_errors_map_to_statuses() -> None:
    assert planner_error(RequestError("ranks[0]: bad"), ["body"]).status == 422
    assert planner_error(TopologyError("nodes[1]: bad"), ["body"]).type == "topology"
    infeasible = planner_error(InfeasibleError("ring: needs two ranks"), ["body"])
    assert (infeasible.status, infeasible.type) == (409, "infeasible")


def test_readyz_reports_an_unreachable_store(tmp_path: Path) -> None:
    app = create_app(
        Settings(environment="development", database_url=f"sqlite:///{tmp_path / 'r.db'}")
    )
    with TestClient(app) as c:
        assert c.get("/readyz").status_code == 200
        app.state.engine = make_engine(
            f"postgresql+psycopg://nobody@127.0.0.1:{free_port()}/none?connect_timeout=2"
        )
        r = c.get("/readyz")
        assert r.status_code == 503
        assert r.json()["detail"][0]["type"] == "unavailable"
        assert c.get("/healthz").status_code == 200
