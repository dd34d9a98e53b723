"""An independent simulator of MSCCL algorithm XML, for tests.

It reads the XML with ElementTree (not the exporter's reader), checks the static rules of
the MSCCL executor, then runs every GPU's threadblocks under a random schedule: a step runs
once its dependency is done, a send once its connection (src, dst, channel) holds fewer than
``capacity`` messages, a receive once a message is waiting. Values are random residues, so a
missing or doubled input shows as a wrong sum. With ``races=True`` it also checks that every
two accesses of one chunk on one GPU, one of them a write, are ordered by happens-before
(threadblock order, dependencies, send before its receive): a missing dependency is found
whatever the schedule.
"""

from __future__ import annotations

import random
import xml.etree.ElementTree as ET
from collections import defaultdict, deque
from dataclasses import dataclass

P = (1 << 61) - 1


class SimError(AssertionError):
    pass


@dataclass
class Tb:
    gpu: int
    id: int
    send: int
    recv: int
    chan: int
    steps: list[dict]
    gid: int = 0


def _int(el: ET.Element, k: str) -> int:
    v = el.get(k)
    if v is None:
        raise SimError(f"<{el.tag}> lacks {k}")
    return int(v)


def load(
    text: str, max_steps: int = 256, max_per_chan: int = 32, max_count: int = 72
) -> tuple[dict, list[Tb]]:
    root = ET.fromstring(text)
    assert root.tag == "algo"
    head = {
        k: root.get(k)
        for k in (
            "name",
            "proto",
            "coll",
            "nchannels",
            "nchunksperloop",
            "ngpus",
            "inplace",
            "outofplace",
            "minBytes",
            "maxBytes",
        )
    }
    missing = [k for k, v in head.items() if v is None]
    if missing:
        raise SimError(f"<algo> lacks {missing}")
    n, chunks = int(head["ngpus"]), int(head["nchunksperloop"])
    lo, hi = int(head["minBytes"]), int(head["maxBytes"])
    if not 0 <= lo <= hi or hi <= 0:
        raise SimError(f"bad minBytes/maxBytes {lo}/{hi}")
    gpus = root.findall("gpu")
    if sorted(_int(g, "id") for g in gpus) != list(range(n)):
        raise SimError("gpu ids are not 0..ngpus-1")
    tbs: list[Tb] = []
    for g in gpus:
        gid = _int(g, "id")
        if _int(g, "i_chunks") != chunks:
            raise SimError(f"gpu {gid}: i_chunks != nchunksperloop")
        ids = []
        per_chan: dict[tuple[int, str], int] = defaultdict(int)
        peers: set[tuple[str, int, int]] = set()
        for t in g.findall("tb"):
            tb = Tb(gid, _int(t, "id"), _int(t, "send"), _int(t, "recv"), _int(t, "chan"), [])
            ids.append(tb.id)
            if gid in (tb.send, tb.recv):
                raise SimError(f"gpu {gid} tb {tb.id} names itself as peer")
            if not 0 <= tb.chan < int(head["nchannels"]):
                raise SimError(f"gpu {gid} tb {tb.id}: channel {tb.chan} >= nchannels")
            for kind, peer in (("send", tb.send), ("recv", tb.recv)):
                if peer >= 0:
                    if (kind, peer, tb.chan) in peers:
                        raise SimError(
                            f"gpu {gid}: two tbs {kind} peer {peer} on channel {tb.chan}"
                        )
                    peers.add((kind, peer, tb.chan))
                    per_chan[(tb.chan, kind)] += 1
            for i, s in enumerate(t.findall("step")):
                st = {k: s.get(k) for k in ("type", "srcbuf", "dstbuf")}
                st.update(
                    {
                        k: _int(s, k)
                        for k in ("s", "srcoff", "dstoff", "cnt", "depid", "deps", "hasdep")
                    }
                )
                if st["s"] != i:
                    raise SimError(f"gpu {gid} tb {tb.id}: step {i} numbered {st['s']}")
                if st["type"] != "nop":
                    if not 0 < st["cnt"] < max_count:
                        raise SimError(f"gpu {gid} tb {tb.id} step {i}: cnt {st['cnt']}")
                    off = st["dstoff"] if st["type"] != "s" else st["srcoff"]
                    if off < 0 or off + st["cnt"] > chunks:
                        raise SimError(f"gpu {gid} tb {tb.id} step {i}: out of the buffer")
                elif st["depid"] < 0:
                    raise SimError(f"gpu {gid} tb {tb.id} step {i}: nop without dependency")
                tb.steps.append(st)
            if len(tb.steps) > max_steps:
                raise SimError(f"gpu {gid} tb {tb.id}: {len(tb.steps)} steps")
            tbs.append(tb)
        if sorted(ids) != list(range(len(ids))):
            raise SimError(f"gpu {gid}: tb ids are not 0..k-1")
        if any(c > max_per_chan for c in per_chan.values()):
            raise SimError(f"gpu {gid}: more than {max_per_chan} tbs on a channel")
    by_key = {(t.gpu, t.id): t for t in tbs}
    referenced = set()
    for t in tbs:
        for st in t.steps:
            if st["depid"] >= 0:
                other = by_key.get((t.gpu, st["depid"]))
                if other is None or not 0 <= st["deps"] < len(other.steps):
                    raise SimError(f"gpu {t.gpu} tb {t.id} step {st['s']}: bad dependency")
                referenced.add((t.gpu, st["depid"], st["deps"]))
    for t in tbs:
        for st in t.steps:
            if bool(st["hasdep"]) != ((t.gpu, t.id, st["s"]) in referenced):
                raise SimError(f"gpu {t.gpu} tb {t.id} step {st['s']}: hasdep is wrong")
    for i, t in enumerate(tbs):
        t.gid = i
    return head, tbs


def simulate(
    text: str, seed: int = 0, capacity: int = 1, races: bool = True, **limits: int
) -> None:
    """Run the algorithm; raise SimError unless it is a deadlock-free, race-free, correct
    all-reduce."""
    head, tbs = load(text, **limits)
    n, chunks = int(head["ngpus"]), int(head["nchunksperloop"])
    rng = random.Random(seed)
    inputs = [[rng.randrange(P) for _ in range(chunks)] for _ in range(n)]
    want = [sum(inputs[r][c] for r in range(n)) % P for c in range(chunks)]
    buf = [list(row) for row in inputs]
    by_key = {(t.gpu, t.id): t for t in tbs}
    pc = [0] * len(tbs)
    clock = [0] * len(tbs)  # steps done per threadblock: vector-clock component
    vcs = [dict() for _ in tbs]  # each tb's vector clock (tb gid -> steps seen)
    step_vc: dict[tuple[int, int], dict[int, int]] = {}
    queues: dict[tuple[int, int, int], deque] = defaultdict(deque)
    last_write: dict[tuple[int, int], tuple[int, int]] = {}
    reads: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)

    def hb(vc: dict[int, int], who: tuple[int, int]) -> bool:
        return who[0] == me or vc.get(who[0], 0) >= who[1]

    def access(gpu: int, a: int, cnt: int, write: bool, vc: dict[int, int], t: Tb) -> None:
        if not races:
            return
        for c in range(a, a + cnt):
            key = (gpu, c)
            w = last_write.get(key)
            if w is not None and not hb(vc, w):
                raise SimError(
                    f"gpu {gpu} chunk {c}: tb {t.id} step {pc[t.gid]} races with an earlier write"
                )
            if write:
                for r in reads.pop(key, []):
                    if not hb(vc, r):
                        raise SimError(
                            f"gpu {gpu} chunk {c}: write by tb {t.id} step "
                            f"{pc[t.gid]} races with a read"
                        )
                last_write[key] = (t.gid, clock[t.gid] + 1)
            else:
                reads[key].append((t.gid, clock[t.gid] + 1))

    waiting_dep: dict[tuple[int, int], list[int]] = defaultdict(list)  # (tb, step) -> tbs
    sender_of = {(t.gpu, t.send, t.chan): t.gid for t in tbs if t.send >= 0}
    receiver_of = {(t.recv, t.gpu, t.chan): t.gid for t in tbs if t.recv >= 0}

    def blocked(i: int) -> bool:
        """Whether tb i's next step must wait; a dependency wait is registered."""
        t = tbs[i]
        st = t.steps[pc[i]]
        if st["depid"] >= 0:
            other = by_key[(t.gpu, st["depid"])].gid
            if pc[other] <= st["deps"]:
                waiting_dep[(other, st["deps"])].append(i)
                return True
        if st["type"] == "s":
            return len(queues[(t.gpu, t.send, t.chan)]) >= capacity
        if st["type"] in ("r", "rrc"):
            return not queues[(t.recv, t.gpu, t.chan)]
        return False

    done = sum(1 for t in tbs if not t.steps)
    ready = [i for i in range(len(tbs)) if tbs[i].steps and not blocked(i)]
    queued = set(ready)
    while ready:
        k = rng.randrange(len(ready))
        ready[k], ready[-1] = ready[-1], ready[k]
        i = ready.pop()
        queued.discard(i)
        t = tbs[i]
        me = i
        st = t.steps[pc[i]]
        vc = dict(vcs[i]) if races else {}
        if races and st["depid"] >= 0:
            for k2, v in step_vc[(t.gpu, by_key[(t.gpu, st["depid"])].gid, st["deps"])].items():
                vc[k2] = max(vc.get(k2, 0), v)
        kind = st["type"]
        woken: list[int] = []
        if kind == "s":
            access(t.gpu, st["srcoff"], st["cnt"], False, vc, t)
            data = buf[t.gpu][st["srcoff"] : st["srcoff"] + st["cnt"]]
            sent = dict(vc)
            sent[i] = clock[i] + 1
            key = (t.gpu, t.send, t.chan)
            queues[key].append((st["cnt"], data, sent))
            if key in receiver_of:
                woken.append(receiver_of[key])
        elif kind in ("r", "rrc"):
            key = (t.recv, t.gpu, t.chan)
            cnt, data, svc = queues[key].popleft()
            if cnt != st["cnt"]:
                raise SimError(
                    f"gpu {t.gpu} tb {t.id} step {st['s']}: receives {st['cnt']} "
                    f"chunks, the matching send sent {cnt}"
                )
            for k2, v in svc.items():
                vc[k2] = max(vc.get(k2, 0), v)
            access(t.gpu, st["dstoff"], cnt, True, vc, t)
            off = st["dstoff"]
            row = buf[t.gpu]
            for j, v in enumerate(data):
                row[off + j] = (row[off + j] + v) % P if kind == "rrc" else v
            if key in sender_of:
                woken.append(sender_of[key])
        elif kind != "nop":
            raise SimError(f"step type {kind!r} is not simulated")
        clock[i] += 1
        if races:
            vc[i] = clock[i]
            vcs[i] = vc
            step_vc[(t.gpu, i, pc[i])] = vc
        woken.extend(waiting_dep.pop((i, pc[i]), []))
        pc[i] += 1
        if pc[i] == len(t.steps):
            done += 1
        else:
            woken.append(i)
        for w in woken:
            if w not in queued and pc[w] < len(tbs[w].steps) and not blocked(w):
                ready.append(w)
                queued.add(w)
    if done < len(tbs):
        stuck = [(t.gpu, t.id, pc[t.gid]) for t in tbs if pc[t.gid] < len(t.steps)][:5]
        raise SimError(f"deadlock: stuck (gpu, tb, step) {stuck}")
    if any(queues.values()):
        raise SimError("messages left unreceived")
    for r in range(n):
        for c in range(chunks):
            if buf[r][c] != want[c]:
                raise SimError(f"gpu {r} chunk {c} does not hold the sum of all inputs")
