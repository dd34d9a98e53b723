"""Pictures of a cluster graph (docs/formats.md topology, or the service's /v1/topology document):
hosts grouped under the switch they hang from, each host's link to it as wide and as
blue as its measured rate (narrow and red when slow), stale hosts dashed red. Above
``AGGREGATE_ABOVE`` hosts each switch's hosts become one box; ``host=`` draws one host's
inside (GPUs, NVSwitch, PCIe switches, NICs)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from syncplan.draw.canvas import Canvas, ramp

AGGREGATE_ABOVE = 48
BOX_W, BOX_H, GAP = 118, 42, 10
PER_ROW = 8
MAX_W = 1800  # pixels; groups wrap into bands below


def _hosts(doc: dict[str, Any]) -> tuple[dict[str, list[dict]], dict[str, list[tuple]]]:
    """host -> its nodes; host -> [(outside node, rate GB/s)] of links leaving it."""
    by_host: dict[str, list[dict]] = defaultdict(list)
    host_of: dict[str, str] = {}
    for n in doc.get("nodes", []):
        if n.get("host"):
            by_host[n["host"]].append(n)
            host_of[n["id"]] = n["host"]
    out: dict[str, list[tuple]] = defaultdict(list)
    for lk in doc.get("links", []):
        a, b = host_of.get(lk["src"]), host_of.get(lk["dst"])
        if a and a != b:
            out[a].append((lk["dst"] if b is None else f"host:{b}", lk["bandwidth_GBps"]))
        if b and a != b:
            out[b].append((lk["src"] if a is None else f"host:{a}", lk["bandwidth_GBps"]))
    return by_host, out


def topology_picture(
    doc: dict[str, Any], host: str | None = None, title: str = "cluster"
) -> Canvas:
    """The picture of ``doc``; with ``host``, that host's inside."""
    if host is not None:
        return host_picture(doc, host)
    by_host, out = _hosts(doc)
    stale = set(doc.get("stale_hosts", []))
    groups: dict[str, list[str]] = defaultdict(list)
    for h in sorted(by_host, key=_natural):
        switches = sorted({o for o, _ in out[h] if not o.startswith("host:")}, key=_natural)
        label = ", ".join(switches) if switches else "(no switch)"
        groups[label if len(label) <= 24 else label[:23] + "…"].append(h)
    for h in sorted(stale - set(by_host), key=_natural):
        groups["(stale: not in the graph)"].append(h)
    rates = [_rate(out[h])[0] for h in by_host if out[h]]
    hi = max(rates, default=1.0)
    lo = min(rates, default=0.0)
    aggregate = len(by_host) + len(stale) > AGGREGATE_ABOVE
    cols = 1 if aggregate else (PER_ROW if len(groups) <= 2 else 4)
    gw = [min(cols, len(hs)) * (BOX_W + GAP) for hs in groups.values()]
    rows = [1 if aggregate else -(-len(hs) // cols) for hs in groups.values()]
    place: list[tuple[int, float]] = []  # (band, x) of each group: bands wrap at MAX_W
    x, band, band_rows, right = 20.0, 0, [0], 640.0
    for w, r in zip(gw, rows, strict=True):
        if x > 20 and x + w > MAX_W:
            band, x = band + 1, 20.0
            band_rows.append(0)
        place.append((band, x))
        band_rows[band] = max(band_rows[band], r)
        x += w + 40
        right = max(right, x)
    band_y = [96.0]
    for r in band_rows:
        band_y.append(band_y[-1] + 84 + r * (BOX_H + GAP) + (30 if aggregate else 0))
    width, height = right, band_y[-1] + 70
    c = Canvas(int(width), int(height))
    ngpu = sum(1 for hs in by_host.values() for n in hs if n["kind"] in ("gpu", "cpu"))
    c.text(
        20,
        26,
        f"{title}: {len(by_host)} hosts, {ngpu} endpoints"
        f"{f', {len(stale)} stale' if stale else ''}",
        16,
        bold=True,
    )
    spines = _spines(doc, set(groups))
    tor_pos: dict[str, tuple[float, float]] = {}
    for (sw, hs), w, (band, x) in zip(groups.items(), gw, place, strict=True):
        cx, top = x + w / 2, band_y[band]
        tor_pos[sw] = (cx, top + 14)
        if not sw.startswith("("):
            c.rect(cx - 60, top, 120, 26, fill="#eef1f5", stroke="#667")
            c.text(cx, top + 18, sw, 12, "middle", bold=True)
        else:
            c.text(cx, top + 18, sw, 11, "middle", "#a33")
        if aggregate:
            _aggregate_box(c, hs, by_host, out, stale, x, top + 74, hi, top + 26)
        else:
            up = (cx, top + 26) if not sw.startswith("(") else None
            for draw_lines in (True, False):  # lines first: boxes paint over them
                for i, h in enumerate(hs):
                    bx = x + (i % cols) * (BOX_W + GAP)
                    by = top + 74 + (i // cols) * (BOX_H + GAP)
                    _host_box(
                        c,
                        h,
                        by_host.get(h, []),
                        out.get(h, []),
                        h in stale,
                        bx,
                        by,
                        hi,
                        up,
                        draw_lines,
                    )
    tops = sorted({n for pair in spines for n in pair if n not in tor_pos}, key=_natural)
    for i, sw in enumerate(tops):
        tor_pos[sw] = ((i + 1) * width / (len(tops) + 1), 60)
    shapes, c.shapes = c.shapes, []
    for (a, b), rate in spines.items():
        (ax, ay), (bx, by) = tor_pos[a], tor_pos[b]
        c.line(
            ax,
            ay,
            bx,
            by,
            ramp(rate / hi),
            1 + 5 * min(1.0, rate / hi),
            title=f"{a} - {b}: {rate:g} GB/s",
        )
        c.text((ax + bx) / 2, (ay + by) / 2 - 8, f"{rate:g} GB/s", 10, "middle", "#555")
    c.shapes.extend(shapes)
    for sw in tops:
        x0, y0 = tor_pos[sw]
        c.rect(x0 - 60, y0 - 13, 120, 26, fill="#eef1f5", stroke="#667")
        c.text(x0, y0 + 5, sw, 12, "middle", bold=True)
    c.legend(20, height - 40, round(lo, 3), round(hi, 3))
    c.text(
        200,
        height - 26,
        "width, colour: a host's rate to its switches; dashed red: stale",
        11,
        color="#555",
    )
    return c


def _spines(doc: dict[str, Any], tors: set[str]) -> dict[tuple[str, str], float]:
    """Links between switches outside any host: between group heads, or up to a spine."""
    hosted = {n["id"] for n in doc.get("nodes", []) if n.get("host")}
    out: dict[tuple[str, str], float] = {}
    for lk in doc.get("links", []):
        a, b = lk["src"], lk["dst"]
        if a not in hosted and b not in hosted and (a in tors or b in tors):
            out[(a, b)] = lk["bandwidth_GBps"]
    return out


def _rate(links: list[tuple]) -> tuple[float, str]:
    """A host's total rate to its switches, and how to print it (``4x25 GB/s``)."""
    rates = [r for o, r in links if not o.startswith("host:")]
    if not rates:
        return 0.0, ""
    if len(rates) > 1 and len(set(rates)) == 1:
        return sum(rates), f"{len(rates)}x{rates[0]:g} GB/s"
    return sum(rates), " + ".join(f"{r:g}" for r in rates) + " GB/s"


def _host_box(
    c: Canvas,
    h: str,
    nodes: list[dict],
    links: list[tuple],
    stale: bool,
    x: float,
    y: float,
    hi: float,
    up: tuple[float, float] | None,
    draw_lines: bool,
) -> None:
    total, label = _rate(links)
    if draw_lines:
        if up is not None and total:
            c.line(
                x + BOX_W / 2,
                y,
                up[0],
                up[1],
                ramp(total / hi),
                1 + 5 * total / hi,
                title=f"{h}: {label}",
            )
        return
    rate = label
    gpus = sum(1 for n in nodes if n["kind"] in ("gpu", "cpu"))
    c.rect(
        x,
        y,
        BOX_W,
        BOX_H,
        fill="#fdecea" if stale else "#f7f7f7",
        stroke="#c62828" if stale else "#555",
        width=2 if stale else 1,
        dash=stale,
        title=f"{h}: {gpus} endpoints" + (f", {rate}" if rate else ""),
    )
    c.text(x + 6, y + 16, h if len(h) <= 16 else h[:15] + "…", 12, bold=True)
    n_gpu = sum(1 for n in nodes if n["kind"] == "gpu")  # a CPU-only host is no "1 GPU"
    what = f"{n_gpu} GPU" if n_gpu else f"{gpus} CPU"
    detail = "STALE" if stale else what + (f" · {rate}" if rate else "")
    c.text(x + 6, y + 33, detail, 11, color="#c62828" if stale else "#333")


def _aggregate_box(
    c: Canvas,
    hs: list[str],
    by_host: dict,
    out: dict,
    stale: set[str],
    x: float,
    y: float,
    hi: float,
    up_y: float,
) -> None:
    rates = [_rate(out[h])[0] for h in hs if out.get(h)]
    n_stale = sum(h in stale for h in hs)
    worst = min(rates, default=None)
    if worst is not None:
        c.line(
            x + BOX_W / 2,
            y,
            x + BOX_W / 2,
            up_y,
            ramp(worst / hi),
            1 + 5 * worst / hi,
            title=f"slowest host: {worst:g} GB/s",
        )
    c.rect(
        x,
        y,
        BOX_W,
        BOX_H + 30,
        fill="#f7f7f7",
        stroke="#c62828" if n_stale else "#555",
        dash=bool(n_stale),
    )
    c.text(x + 6, y + 16, f"{len(hs)} hosts", 12, bold=True)
    if rates:
        c.text(x + 6, y + 33, f"{min(rates):g}-{max(rates):g} GB/s", 11)
    gpus = sum(1 for h in hs for n in by_host.get(h, []) if n["kind"] in ("gpu", "cpu"))
    c.text(x + 6, y + 50, f"{gpus} endpoints", 11)
    if n_stale:
        c.text(x + 6, y + 66, f"{n_stale} stale", 11, color="#c62828", bold=True)


ROW_OF = {"cpu_socket": 0, "pcie_switch": 1, "nic": 2, "cpu": 2, "gpu": 2, "nvswitch": 3}


def host_picture(doc: dict[str, Any], host: str) -> Canvas:
    """One host's inside: NICs on top, PCIe switches and sockets, GPUs, NVSwitch below;
    links coloured and sized by rate (relative to the host's fastest link)."""
    by_host, _ = _hosts(doc)
    if host not in by_host:
        raise ValueError(f"no host {host!r} in the topology")
    ids = {n["id"]: n for n in by_host[host]}
    rows: dict[int, list[str]] = defaultdict(list)
    for nid in sorted(ids, key=_natural):
        rows[ROW_OF.get(ids[nid]["kind"], 1)].append(nid)
    widest = max(len(v) for v in rows.values())
    width = max(560, widest * 96 + 80)
    c = Canvas(int(width), 480)
    c.text(20, 26, f"host {host}", 16, bold=True)
    pos: dict[str, tuple[float, float]] = {}
    for r, nids in rows.items():
        step = (width - 80) / max(1, len(nids))
        for i, nid in enumerate(nids):
            pos[nid] = (40 + step * (i + 0.5), 110 + r * 85)
    inner = [lk for lk in doc.get("links", []) if lk["src"] in ids and lk["dst"] in ids]
    hi = max((lk["bandwidth_GBps"] for lk in inner), default=1.0)
    for lk in inner:
        (x1, y1), (x2, y2) = pos[lk["src"]], pos[lk["dst"]]
        bw = lk["bandwidth_GBps"]
        c.line(
            x1,
            y1,
            x2,
            y2,
            ramp(bw / hi),
            1 + 4 * bw / hi,
            title=f"{lk['src']} - {lk['dst']}: {bw:g} GB/s ({lk.get('kind', '')})",
        )
    leaving = [lk for lk in doc.get("links", []) if (lk["src"] in ids) != (lk["dst"] in ids)]
    for k, lk in enumerate(leaving):
        mine, other = (lk["src"], lk["dst"]) if lk["src"] in ids else (lk["dst"], lk["src"])
        x, y = pos[mine]
        c.line(
            x, y + 14, x, 400 + 0 * k, "#555", 2, title=f"to {other}: {lk['bandwidth_GBps']:g} GB/s"
        )
        right = x > width - 160
        c.text(
            x - 4 if right else x + 4,
            412,
            f"→ {other}: {lk['bandwidth_GBps']:g} GB/s",
            11,
            "end" if right else "start",
        )
    for nid, (x, y) in pos.items():
        c.rect(
            x - 40,
            y - 14,
            80,
            28,
            fill="#eef1f5" if ids[nid]["kind"] != "gpu" else "#e8f5e9",
            stroke="#555",
        )
        c.text(x, y + 4, nid.split("/", 1)[-1], 11, "middle")
    c.legend(20, 450, 0, round(hi, 3), label="link rate")
    return c


def _natural(s: str) -> tuple[Any, ...]:
    import re

    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", s))
