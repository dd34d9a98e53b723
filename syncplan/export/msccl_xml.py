"""The MSCCL algorithm XML format: an in-memory model, its writer and a strict reader.

The elements and attributes are those the MSCCL executor (and RCCL's copy of it) reads:
``<algo name proto nchannels nchunksperloop ngpus coll inplace outofplace minBytes
maxBytes>`` holding one ``<gpu id i_chunks o_chunks s_chunks>`` per rank, each holding
threadblocks ``<tb id send recv chan>`` (one send peer and one receive peer, -1 for none),
each a list of ``<step s type srcbuf srcoff dstbuf dstoff cnt depid deps hasdep>``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

STEP_TYPES = frozenset({"s", "r", "rrc", "rrs", "rrcs", "rcs", "cpy", "re", "nop"})
BUFFERS = frozenset({"i", "o", "s"})


class ExportError(ValueError):
    """An export cannot be made or read; the message says what is wrong."""


@dataclass
class MscclStep:
    s: int
    type: str
    srcbuf: str = "i"
    srcoff: int = -1
    dstbuf: str = "i"
    dstoff: int = -1
    cnt: int = 0
    depid: int = -1
    deps: int = -1
    hasdep: int = 0


@dataclass
class MscclTB:
    id: int
    send: int
    recv: int
    chan: int
    steps: list[MscclStep] = field(default_factory=list)


@dataclass
class MscclGPU:
    id: int
    i_chunks: int
    o_chunks: int
    s_chunks: int
    tbs: list[MscclTB] = field(default_factory=list)


@dataclass
class MscclAlgo:
    name: str
    proto: str
    nchannels: int
    nchunksperloop: int
    ngpus: int
    coll: str
    inplace: int
    outofplace: int
    minBytes: int
    maxBytes: int
    gpus: list[MscclGPU] = field(default_factory=list)

    def to_xml(self) -> str:
        """The XML document (UTF-8 text, two-space indentation)."""
        root = ET.Element("algo", {k: str(getattr(self, k)) for k in _ALGO_ATTRS})
        for gpu in self.gpus:
            g = ET.SubElement(root, "gpu", {k: str(getattr(gpu, k)) for k in _GPU_ATTRS})
            for tb in gpu.tbs:
                t = ET.SubElement(g, "tb", {k: str(getattr(tb, k)) for k in _TB_ATTRS})
                for st in tb.steps:
                    ET.SubElement(t, "step", {k: str(getattr(st, k)) for k in _STEP_ATTRS})
        ET.indent(root, "  ")
        return ET.tostring(root, encoding="unicode") + "\n"


_ALGO_ATTRS = (
    "name",
    "proto",
    "nchannels",
    "nchunksperloop",
    "ngpus",
    "coll",
    "inplace",
    "outofplace",
    "minBytes",
    "maxBytes",
)
_GPU_ATTRS = ("id", "i_chunks", "o_chunks", "s_chunks")
_TB_ATTRS = ("id", "send", "recv", "chan")
_STEP_ATTRS = (
    "s",
    "type",
    "srcbuf",
    "srcoff",
    "dstbuf",
    "dstoff",
    "cnt",
    "depid",
    "deps",
    "hasdep",
)
_STR_ATTRS = frozenset({"name", "proto", "coll", "type", "srcbuf", "dstbuf"})


def _attrs(el: ET.Element, names: tuple[str, ...], where: str) -> dict[str, int | str]:
    out: dict[str, int | str] = {}
    for k in names:
        v = el.get(k)
        if v is None:
            raise ExportError(f"{where}: missing attribute {k!r}")
        if k in _STR_ATTRS:
            out[k] = v
            continue
        try:
            out[k] = int(v)
        except ValueError:
            raise ExportError(f"{where}: attribute {k}={v!r} is not an integer") from None
    return out


def parse_msccl_xml(text: str) -> MscclAlgo:
    """Read an MSCCL algorithm XML; ExportError names the first malformed element."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ExportError(f"not well-formed XML: {exc}") from None
    if root.tag != "algo":
        raise ExportError(f"root element is <{root.tag}>, expected <algo>")
    algo = MscclAlgo(**_attrs(root, _ALGO_ATTRS, "<algo>"))  # type: ignore[arg-type]
    for gel in root:
        if gel.tag != "gpu":
            raise ExportError(f"<algo> holds <{gel.tag}>, expected <gpu>")
        gpu = MscclGPU(**_attrs(gel, _GPU_ATTRS, "<gpu>"))  # type: ignore[arg-type]
        for tel in gel:
            where = f"gpu {gpu.id}"
            if tel.tag != "tb":
                raise ExportError(f"{where} holds <{tel.tag}>, expected <tb>")
            tb = MscclTB(**_attrs(tel, _TB_ATTRS, f"{where} <tb>"))  # type: ignore[arg-type]
            for sel in tel:
                w = f"gpu {gpu.id} tb {tb.id}"
                if sel.tag != "step":
                    raise ExportError(f"{w} holds <{sel.tag}>, expected <step>")
                st = MscclStep(**_attrs(sel, _STEP_ATTRS, f"{w} <step>"))  # type: ignore[arg-type]
                if st.type not in STEP_TYPES:
                    raise ExportError(f"{w} step {st.s}: unknown type {st.type!r}")
                if st.srcbuf not in BUFFERS or st.dstbuf not in BUFFERS:
                    raise ExportError(f"{w} step {st.s}: buffers must be i, o or s")
                tb.steps.append(st)
            gpu.tbs.append(tb)
        algo.gpus.append(gpu)
    return algo
