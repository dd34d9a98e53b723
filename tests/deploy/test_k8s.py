"""Kubernetes manifests: every overlay rendered and validated with kubernetes-validate
--strict (offline: the schemas ship with the package), and checked for what the issue asks:
agent on GPU nodes with host networking and /sys read-only, service with 2+ replicas,
probes on endpoints the service has, secrets by reference."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.deploy.kustomize import build

kv = pytest.importorskip(
    "kubernetes_validate", reason="pip install kubernetes-validate (in the test extra)"
)
K8S = Path("deploy/k8s")
OVERLAYS = ["base", "overlays/production", "overlays/cpu-nodes"]


def by_kind(objs: list[dict]) -> dict[str, dict]:
    return {o["kind"]: o for o in objs}


@pytest.mark.parametrize("where", OVERLAYS)
def test_strict_validation(where: str) -> None:
    objs = build(K8S / where)
    assert {o["kind"] for o in objs} == {
        "Namespace",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "DaemonSet",
    }
    for o in objs:
        kv.validate(o, kv.utils.latest_version(), strict=True)


@pytest.mark.slow
def test_cli_strict_on_every_manifest(tmp_path: Path) -> None:
    """``kubernetes-validate --strict`` (the command) on each base file as it is on disk, the
    secrets example, and every rendered overlay."""
    files = [
        str(p) for p in sorted((K8S / "base").glob("*.yaml")) if p.name != "kustomization.yaml"
    ]
    for where in OVERLAYS:
        out = tmp_path / f"{where.replace('/', '-')}.yaml"
        out.write_text(yaml.safe_dump_all(build(K8S / where)))
        files.append(str(out))
    run = subprocess.run(
        [sys.executable, "-m", "kubernetes_validate", "--strict", *files],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    docs = sum(1 for f in files for d in yaml.safe_load_all(Path(f).read_text()) if d)
    assert run.stdout.count(" passed for resource ") == docs


def test_the_validator_rejects_a_typo(tmp_path: Path) -> None:
    doc = yaml.safe_load((K8S / "base/service-pdb.yaml").read_text())
    doc["spec"]["minAvailible"] = 1
    with pytest.raises(kv.ValidationError):
        kv.validate(doc, kv.utils.latest_version(), strict=True)


def test_base_has_what_operators_need() -> None:
    from syncplan.api.routes import health

    objs = by_kind(build(K8S / "base"))
    dep, ds = objs["Deployment"], objs["DaemonSet"]
    assert dep["spec"]["replicas"] >= 2
    svc = dep["spec"]["template"]["spec"]["containers"][0]
    assert svc["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert svc["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert svc["ports"][0]["containerPort"] == 8080 and "8080" in svc["args"]
    env = {e["name"]: e for e in svc["env"]}
    for name in (
        "SYNCPLAN_DATABASE_URL",
        "SYNCPLAN_ADMIN_TOKEN",
        "SYNCPLAN_AGENT_TOKEN",
        "SYNCPLAN_JOB_TOKEN",
    ):
        assert "secretKeyRef" in env[name]["valueFrom"], name
    assert dep["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    assert {"/readyz", "/healthz"} <= {r.path for r in health.router.routes}
    pod = ds["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["runtimeClassName"] == "nvidia"
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod[
        "tolerations"
    ]
    sys_mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "sys")
    assert sys_mount["readOnly"] is True
    assert next(v for v in pod["volumes"] if v["name"] == "sys")["hostPath"]["path"] == "/sys"
    agent_args = " ".join(pod["containers"][0]["args"])
    assert "--server=http://syncplan.syncplan.svc:8080" in agent_args
    assert objs["Service"]["metadata"]["name"] == "syncplan"
    assert objs["Service"]["spec"]["ports"][0]["port"] == 8080
    labels = dep["spec"]["template"]["metadata"]["labels"]
    for sel in (
        objs["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"],
        objs["Service"]["spec"]["selector"],
    ):
        assert sel.items() <= labels.items()


def test_overlays() -> None:
    prod = by_kind(build(K8S / "overlays/production"))
    replicas = prod["Deployment"]["spec"]["replicas"]
    assert replicas == 3 and prod["PodDisruptionBudget"]["spec"]["minAvailable"] == 2
    env = {
        e["name"] for e in prod["Deployment"]["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert {"SYNCPLAN_SOLVER_THREADS", "SYNCPLAN_DATABASE_URL"} <= env  # merged, not replaced
    cpu = by_kind(build(K8S / "overlays/cpu-nodes"))["DaemonSet"]["spec"]["template"]["spec"]
    assert "runtimeClassName" not in cpu and "tolerations" not in cpu
    assert cpu["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert not any(e["name"].startswith("NVIDIA") for e in cpu["containers"][0]["env"])
    assert cpu["hostNetwork"] is True


def test_dockerfiles() -> None:
    for name, cmd in (
        ("service", '"serve", "--host", "0.0.0.0", "--port", "8080"'),
        ("agent", '"agent"'),
    ):
        text = (Path("deploy/docker") / f"{name}.Dockerfile").read_text()
        assert "USER 10001" in text and cmd in text
        for line in text.splitlines():
            if line.startswith("COPY ") and "--from" not in line:
                for src in line.split()[1:-1]:
                    assert Path(src).exists(), src
