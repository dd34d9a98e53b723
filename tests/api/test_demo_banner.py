"""``syncplan serve --demo`` as a newcomer meets it: the banner names the web page and the
API docs, its curl asks for a 4-rank plan and shows its first lines, the store lives in a
temporary folder (old plans do not reappear), and the demo binds loopback unless told
otherwise (with a warning: its tokens are well known)."""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from pathlib import Path

import httpx
from syncplan.api.settings import DEV_TOKENS
from syncplan.planner.builders import dgx_cluster

from tests.api.helpers import free_port
from tests.api.test_settings_cli import CLI, _clean_env


def _start(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], list[str]]:
    """The demo service, and its banner (the lines up to the curl)."""
    topo = tmp_path / "demo.json"
    topo.write_text(json.dumps(dgx_cluster(2, gpus=4)))
    proc = subprocess.Popen(
        [*CLI, "serve", "--demo", "--demo-topology", str(topo), "--log-level", "warning", *args],
        env=_clean_env(),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    while not any(ln.strip().startswith("curl ") for ln in lines):
        line = proc.stdout.readline()  # bounded by the server's start; it exits on failure
        if not line:
            break
        lines.append(line.rstrip("\n"))
    return proc, lines


def _ready(base: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError("the demo service did not become ready")


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.terminate()
    out, _ = proc.communicate(timeout=30)
    return out


def test_demo_banner_page_docs_curl_and_temporary_store(tmp_path: Path) -> None:
    port = free_port()
    proc, lines = _start(tmp_path, "--port", str(port))
    try:
        text = "\n".join(lines)
        base = f"http://127.0.0.1:{port}"
        assert f"{base}/ui" in text and f"{base}/docs" in text, text
        assert DEV_TOKENS["job"] in text
        store = next(ln for ln in lines if "store" in ln)
        db = Path(store.split("sqlite:///", 1)[1].split()[0])
        assert db.exists() and tmp_path not in db.parents, store
        assert "temporary" in store and "--database-url" in store
        assert not (tmp_path / "syncplan-demo.db").exists()
        curl = lines[-1].strip()
        assert curl.endswith("| python3 -m json.tool | head -20"), curl
        argv = shlex.split(curl.split(" | ")[0])
        assert len(json.loads(argv[argv.index("-d") + 1])["ranks"]) == 4
        _ready(base)
        r = subprocess.run(["bash", "-c", curl], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        shown = r.stdout.splitlines()
        assert 5 <= len(shown) <= 20 and '"plan_id"' in r.stdout and not r.stderr, r
        assert httpx.get(base + "/", follow_redirects=False).headers["location"] == "/ui"
    finally:
        _stop(proc)
    assert not db.exists() and not db.parent.exists()  # removed at exit


def test_demo_binds_loopback_and_warns_when_told_otherwise(tmp_path: Path) -> None:
    proc, lines = _start(tmp_path, "--port", str(free_port()))
    _stop(proc)
    assert not any("warning" in ln for ln in lines), lines
    assert any("http://127.0.0.1:" in ln for ln in lines), lines
    proc, lines = _start(tmp_path, "--port", str(free_port()), "--host", "0.0.0.0")
    _stop(proc)
    warning = [ln for ln in lines if ln.startswith("warning:")]
    assert warning and "0.0.0.0" in warning[0] and "tokens" in warning[0], lines
