"""The Slurm prolog, task prolog and epilog against a real service, in a faked Slurm
environment (SLURM_* variables and an ``scontrol`` that expands node lists)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.api.helpers import TOKENS, ServerProcess, auth, free_port, host_report

SLURM = Path("deploy/slurm").resolve()
FAKE_SCONTROL = r'''#!/usr/bin/env python3
"""scontrol show hostnames LIST, for node lists like n[1-3,7],gpu01."""
import re, sys
assert sys.argv[1:3] == ["show", "hostnames"], sys.argv
for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?", sys.argv[3]):
    m = re.fullmatch(r"(.*)\[(.*)\]", part)
    if not m:
        print(part)
        continue
    for rng in m.group(2).split(","):
        lo, _, hi = rng.partition("-")
        for i in range(int(lo), int(hi or lo) + 1):
            print(f"{m.group(1)}{i:0{len(lo)}d}")
'''

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed")


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("slurm")
    proc = ServerProcess(
        f"sqlite:///{root / 's.db'}",
        log=root / "server.log",
        env={"SYNCPLAN_STALE_AFTER_S": "86400"},
    ).start()
    with httpx.Client(base_url=proc.url, timeout=30) as c:
        for h in ("n1", "n2", "n3"):
            peers = {p: 12.0 for p in ("n1", "n2", "n3") if p != h}
            assert (
                c.put(
                    f"/v1/agents/{h}/report",
                    headers=auth("agent"),
                    json=host_report(h, 1, gpus=2, peers=peers),
                ).status_code
                == 200
            )
    yield proc
    proc.stop()


def slurm_env(tmp_path: Path, server: str, **extra: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    scontrol = bin_dir / "scontrol"
    scontrol.write_text(FAKE_SCONTROL)
    scontrol.chmod(0o755)
    conf = tmp_path / "slurm.env"
    conf.write_text(f"SYNCPLAN_SERVER={server}\nSYNCPLAN_JOB_TOKEN={TOKENS['job']}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SYNCPLAN_"))}
    return {
        **env,
        "PATH": f"{bin_dir}:{env['PATH']}",
        "SYNCPLAN_SLURM_CONF": str(conf),
        "SLURM_JOB_ID": "4242",
        "SLURM_JOB_NODELIST": "n[1-2]",
        "SLURM_GPUS_PER_NODE": "a100:2",
        **extra,
    }


def run(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SLURM / script)], env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.slow
def test_job_lifecycle(service: ServerProcess, tmp_path: Path) -> None:
    env = slurm_env(tmp_path, service.url)
    pro = run("syncplan-prolog.sh", env)
    assert pro.returncode == 0 and "registered as slurm-4242" in pro.stderr, pro.stderr
    with httpx.Client(base_url=service.url, timeout=60) as c:
        job = c.get("/v1/jobs/slurm-4242", headers=auth("job")).json()
        assert job["ranks"] == ["n1/gpu0", "n1/gpu1", "n2/gpu0", "n2/gpu1"]
        plan = c.get("/v1/jobs/slurm-4242/plan", headers=auth("job"))
        assert plan.status_code == 200 and plan.json()["job_id"] == "slurm-4242"
    task = run("syncplan-task-prolog.sh", env)
    exports = dict(re.findall(r"^export (\w+)=(.*)$", task.stdout, re.M))
    assert exports == {
        "SYNCPLAN_JOB_ID": "slurm-4242",
        "SYNCPLAN_SERVER": service.url,
        "SYNCPLAN_JOB_TOKEN": TOKENS["job"],
    }
    epi = run("syncplan-epilog.sh", env)
    assert epi.returncode == 0 and epi.stderr == ""
    with httpx.Client(base_url=service.url, timeout=30) as c:
        assert c.get("/v1/jobs/slurm-4242", headers=auth("job")).status_code == 404
    assert run("syncplan-epilog.sh", env).stderr == ""  # twice: already gone is fine


def test_refusals_never_fail_the_job_unless_strict(service: ServerProcess, tmp_path: Path) -> None:
    env = slurm_env(tmp_path, service.url, SLURM_JOB_NODELIST="n1,n9")
    pro = run("syncplan-prolog.sh", env)
    assert pro.returncode == 0
    assert "refused the job (HTTP 422)" in pro.stderr and "n9" in pro.stderr
    strict = run("syncplan-prolog.sh", {**env, "SYNCPLAN_STRICT": "1"})
    assert strict.returncode == 1
    down = slurm_env(tmp_path, f"http://127.0.0.1:{free_port()}")
    pro = run("syncplan-prolog.sh", down)
    assert pro.returncode == 0 and "cannot reach" in pro.stderr
    odd = run("syncplan-prolog.sh", {**env, "SLURM_GPUS_PER_NODE": "lots"})
    assert odd.returncode == 0 and "GPUs per node" in odd.stderr
