"""A read-only web page (``/ui``): the cluster with each host's freshness, the jobs with
their plans (predicted time, bound, picture), and the plans made most recently. Rendered
on the server as HTML with inline SVG; no script, no build step, no token (like
``GET /v1/topology``: it shows names and rates, never a secret)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from html import escape
from typing import Annotated, Any

from anyio.to_thread import run_sync
from fastapi import APIRouter, Path
from fastapi.responses import HTMLResponse, RedirectResponse
from sqlalchemy import func, select
from syncplan.api.db import JobRow, PlanRow
from syncplan.api.deps import ClusterDep, JobsDep, SettingsDep, SnapshotDep
from syncplan.api.errors import APIError
from syncplan.api.models import HostName, JobId
from syncplan.api.state import Snapshot
from syncplan.core.lru import LRU

router = APIRouter(prefix="/ui", include_in_schema=False)
root = APIRouter(include_in_schema=False)


@root.get("/")
async def to_the_page() -> RedirectResponse:
    """``/`` is the web page (a browser pointed at the service lands there)."""
    return RedirectResponse("/ui", status_code=307)


JOBS_SHOWN = 20
_pictures: LRU[str, str] = LRU(32)  # plan_id -> SVG, the most recent 32

CSS = """body{font-family:DejaVu Sans,Arial,sans-serif;margin:24px;color:#222;max-width:1800px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:26px 0 8px}
table{border-collapse:collapse;font-size:13px}td,th{padding:4px 10px;border-bottom:1px solid #ddd;
text-align:left}th{background:#f3f4f6}.stale{color:#c62828;font-weight:bold}.fresh{color:#2e7d32}
.muted{color:#666;font-size:13px}a{color:#1f4e99}svg{max-width:100%;height:auto}
.pic{border:1px solid #ddd;padding:6px;display:inline-block;background:#fff}"""


def _page(title: str, body: str) -> HTMLResponse:
    return HTMLResponse(
        f"<!doctype html><html><head><meta charset='utf-8'><title>"
        f"{escape(title)}</title><style>{CSS}</style></head><body>{body}"
        "</body></html>"
    )


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def _ms(x: Any) -> str:
    return f"{x * 1e3:.2f} ms" if isinstance(x, int | float) else "-"


def _graph_doc(snapshot: Snapshot) -> dict[str, Any]:
    return {
        "nodes": snapshot.graph.get("nodes", []),
        "links": snapshot.graph.get("links", []),
        "stale_hosts": sorted(snapshot.stale),
    }


def _jobs_and_replans(cluster: Any) -> tuple[list[tuple[str, dict, float]], list[dict]]:
    """The most recently updated jobs, and the plans made most recently (head of each
    stored document only: documents can be tens of MB)."""
    with cluster.sessions() as s:
        jobs = [
            (r.job_id, json.loads(r.spec), r.updated_at)
            for r in s.execute(
                select(JobRow).order_by(JobRow.updated_at.desc()).limit(JOBS_SHOWN)
            ).scalars()
        ]
        rows = s.execute(
            select(
                PlanRow.plan_id,
                PlanRow.topology_version,
                PlanRow.created_at,
                func.substr(PlanRow.document, 1, 4096),
            )
            .order_by(PlanRow.created_at.desc())
            .limit(10)
        ).all()
    plans = []
    for plan_id, version, created, head in rows:
        alg = re.search(r'"algorithm":\s*"([^"]+)"', head)
        n = re.search(r'"ranks":\s*\[([^\]]*)', head)
        plans.append(
            {
                "plan_id": plan_id,
                "version": version,
                "created_at": created,
                "algorithm": alg.group(1) if alg else "?",
                "ranks": n.group(1).count(",") + 1 if n else None,
            }
        )
    return jobs, plans


async def _job_plan(jobs: Any, job_id: str, snapshot: Snapshot) -> dict[str, Any] | str:
    """The job's first plan document if it was made for this graph, or why there is none:
    the page shows plans, it never starts a solve (api/jobs.py, JobService.peek)."""
    try:
        return await jobs.peek(job_id, snapshot)
    except APIError as exc:
        return exc.msg


def _endpoints(snapshot: Snapshot, host: str) -> str:
    """``8 GPUs``, ``1 CPU``: the host's endpoints by kind."""
    kinds: dict[str, int] = {}
    for n in snapshot.graph.get("nodes", []):
        if n.get("host") == host and n.get("kind") in ("gpu", "cpu"):
            kinds[n["kind"]] = kinds.get(n["kind"], 0) + 1
    parts = [
        f"{k} {kind.upper()}{'s' if k != 1 else ''}"
        for kind, k in sorted(kinds.items(), reverse=True)
    ]
    return ", ".join(parts) or "-"


def _host_table(snapshot: Snapshot, stale_after: float) -> str:
    now = time.time()
    rows = []
    for h, st in sorted(snapshot.hosts.items()):
        age = now - st.last_report_at.timestamp()
        state = (
            "<span class='stale'>stale</span>" if st.stale else "<span class='fresh'>fresh</span>"
        )
        rate = f"{st.measured_GBps:g} GB/s" if st.measured_GBps else "-"
        rows.append(
            f"<tr><td><a href='/ui/hosts/{escape(h)}'>{escape(h)}</a></td>"
            f"<td>{state}</td><td>{_age(age)}</td>"
            f"<td>{escape(_endpoints(snapshot, h))}</td><td>{rate}</td></tr>"
        )
    if not rows:
        return "<p class='muted'>No agent has reported yet.</p>"
    return (
        f"<p class='muted'>A host is stale when its last report is older than "
        f"{stale_after:g} s; stale hosts leave the graph.</p><table><tr><th>host</th>"
        "<th>state</th><th>last report</th><th>endpoints</th>"
        "<th>measured rate</th></tr>" + "".join(rows) + "</table>"
    )


@router.get("", response_class=HTMLResponse)
async def cluster_page(
    snapshot: SnapshotDep, cluster: ClusterDep, jobs: JobsDep, settings: SettingsDep
) -> HTMLResponse:
    from syncplan.draw.topology import topology_picture

    doc = _graph_doc(snapshot)
    picture = (
        await run_sync(lambda: topology_picture(doc, title="cluster").to_svg())
        if doc["nodes"]
        else "<p class='muted'>The graph is empty.</p>"
    )
    job_rows, replans = await run_sync(_jobs_and_replans, cluster)
    plans = await asyncio.gather(*(_job_plan(jobs, j, snapshot) for j, _, _ in job_rows))
    jrows = []
    for (job_id, spec, _), plan in zip(job_rows, plans, strict=True):
        link = f"<a href='/ui/jobs/{escape(job_id)}'>{escape(job_id)}</a>"
        sizes = spec.get("bucket_sizes") or [spec.get("size_bytes")]
        if isinstance(plan, str):
            jrows.append(
                f"<tr><td>{link}</td><td>{len(spec['ranks'])}</td><td>{len(sizes)}"
                f"</td><td colspan='4' class='muted'>{escape(plan)}</td></tr>"
            )
            continue
        pred, bound = plan.get("predicted_time_s"), plan.get("lower_bound_time_s")
        ratio = f"{pred / bound:.3f}x" if pred and bound else "-"
        jrows.append(
            f"<tr><td>{link}</td><td>{len(plan['ranks'])}</td><td>{len(sizes)}</td>"
            f"<td>{escape(str(plan.get('algorithm')))}</td><td>{_ms(pred)}</td>"
            f"<td>{_ms(bound)}</td><td>{ratio}</td></tr>"
        )
    jobs_html = (
        (
            "<table><tr><th>job</th><th>ranks</th><th>buckets</th><th>algorithm</th>"
            "<th>predicted</th><th>bound</th><th>predicted / bound</th></tr>"
            + "".join(jrows)
            + "</table>"
        )
        if jrows
        else "<p class='muted'>No jobs.</p>"
    )
    now = time.time()
    rrows = "".join(
        f"<tr><td><code>{escape(p['plan_id'])}</code></td>"
        f"<td>{escape(p['algorithm'])}</td><td>{p['ranks'] or '-'}</td>"
        f"<td><code>{escape(p['version'])}</code></td>"
        f"<td>{_age(now - p['created_at'])}</td></tr>"
        for p in replans
    )
    replans_html = (
        (
            "<table><tr><th>plan</th><th>algorithm</th><th>ranks</th><th>graph "
            "version</th><th>made</th></tr>" + rrows + "</table>"
        )
        if rrows
        else "<p class='muted'>No plans yet.</p>"
    )
    body = (
        f"<h1>syncplan</h1><p class='muted'>graph version <code>"
        f"{escape(snapshot.version)}</code> · {len(snapshot.hosts)} hosts reporting, "
        f"{len(snapshot.stale)} stale</p><h2>Cluster</h2><div class='pic'>{picture}</div>"
        f"<h2>Hosts</h2>{_host_table(snapshot, settings.stale_after_s)}"
        f"<h2>Jobs</h2>{jobs_html}<h2>Last plans (a new graph version replans)</h2>"
        f"{replans_html}"
    )
    return _page("syncplan cluster", body)


@router.get("/jobs/{job_id}", response_class=HTMLResponse)
async def job_page(
    job_id: Annotated[JobId, Path()], snapshot: SnapshotDep, jobs: JobsDep
) -> HTMLResponse:
    from syncplan.draw.plan import plan_picture

    plan = await _job_plan(jobs, job_id, snapshot)
    if isinstance(plan, str):
        if plan.startswith("no job"):
            raise APIError(404, plan, ["path", "job_id"], "not_found")
        return _page(f"job {job_id}", f"<h1>job {escape(job_id)}</h1><p>{escape(plan)}</p>")
    pid = str(plan.get("plan_id"))
    svg = _pictures.get(pid)
    if svg is None:
        doc = _graph_doc(snapshot)
        svg = await run_sync(lambda: plan_picture(plan, doc).to_svg())
        _pictures.put(pid, svg)
    pred, bound = plan.get("predicted_time_s"), plan.get("lower_bound_time_s")
    body = (
        f"<p><a href='/ui'>cluster</a></p><h1>job {escape(job_id)}</h1>"
        f"<p>plan <code>{escape(pid)}</code>: {escape(str(plan.get('algorithm')))}, "
        f"{len(plan['ranks'])} ranks, {plan.get('size_bytes', 0) / 2**20:g} MiB, "
        f"predicted {_ms(pred)}, bound {_ms(bound)} "
        f"({escape(str(plan.get('lower_bound_family', '')))}), graph version "
        f"<code>{escape(str(plan.get('topology_version', snapshot.version)))}</code></p>"
        f"<p class='muted'>MSCCL XML: <code>GET /v1/plans/{escape(pid)}/export?format="
        f"msccl</code> (job token)</p><div class='pic'>{svg}</div>"
    )
    return _page(f"job {job_id}", body)


@router.get("/hosts/{host}", response_class=HTMLResponse)
async def host_page(host: Annotated[HostName, Path()], snapshot: SnapshotDep) -> HTMLResponse:
    from syncplan.draw.topology import host_picture

    if not any(n.get("host") == host for n in snapshot.graph.get("nodes", [])):
        raise APIError(404, f"no host {host!r} in the graph", ["path", "host"], "not_found")
    svg = await run_sync(lambda: host_picture(_graph_doc(snapshot), host).to_svg())
    return _page(
        f"host {host}",
        f"<p><a href='/ui'>cluster</a></p><h1>host {escape(host)}"
        f"</h1><p class='muted'>NCCL topology file: <code>GET /v1/topology/export?"
        f"format=nccl&amp;host={escape(host)}</code></p><div class='pic'>{svg}</div>",
    )
