"""The /ui pages on a real service, and a real headless browser loading them."""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx
import pytest

from syncplan.draw.browser import find_browser, screenshot
from tests.api.helpers import ServerProcess, auth


def planned(c: httpx.Client) -> dict:
    """Wait (bounded) until the job's plan is made; the page then shows it."""
    deadline = time.monotonic() + 120
    while True:
        r = c.get("/v1/jobs/train/plan", headers=auth("job"))
        if r.status_code == 200 or time.monotonic() > deadline:
            assert r.status_code == 200, r.text
            return r.json()
        time.sleep(0.5)


def test_pages(cluster: ServerProcess) -> None:
    with httpx.Client(base_url=cluster.url, timeout=120) as c:
        plan = planned(c)
        page = c.get("/ui")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        html = page.text
        for host in ("n1", "n2", "n3"):
            assert f"/ui/hosts/{host}'>{host}</a>" in html
        assert html.count("class='fresh'>fresh") == 3 and "<svg" in html
        assert "older than 86400 s" in html
        assert f"{plan['predicted_time_s'] * 1e3:.2f} ms" in html
        assert plan["plan_id"] in html  # among the last plans
        job = c.get("/ui/jobs/train").text
        assert "stages:" in job and "busiest links" in job
        assert f"plan <code>{plan['plan_id']}</code>" in job
        host = c.get("/ui/hosts/n2").text
        assert "gpu0" in host and "nccl" in host
        assert c.get("/ui/jobs/nope").status_code == 404
        assert c.get("/ui/hosts/nope").status_code == 404
        assert "/ui" not in c.get("/openapi.json").json()["paths"]


@pytest.mark.slow
def test_browser_screenshot(cluster: ServerProcess, tmp_path: Path) -> None:
    if find_browser() is None:
        pytest.skip(
            "no headless browser: apt-get install chromium (listed in "
            ".ci/apt-packages.txt) to run this test"
        )
    from PIL import Image

    with httpx.Client(base_url=cluster.url, timeout=120) as c:
        planned(c)
    for path in ("/ui", "/ui/jobs/train", "/ui/hosts/n1"):
        name = re.sub(r"\W", "_", path) + ".png"
        out = screenshot(cluster.url + path, tmp_path / name)
        img = Image.open(out)
        assert img.size == (1400, 1700)
        assert len(img.convert("RGB").getcolors(1 << 20)) > 20  # drawn, not blank
