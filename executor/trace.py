"""A timeline trace of the plans a process runs (docs/executor.md, "Timeline trace").

With ``SYNCPLAN_TRACE=path`` (or ``ExecutorConfig(trace=path)``) every ``PlanExecutor`` of the
process records, per run and per program step, when the step ran on this rank and the bytes it
sent to and received from each peer, and the cost model's prediction of the same steps beside
it. Each rank writes one Chrome trace-event file (Perfetto, chrome://tracing) at exit, or when
``write_traces`` is called: ``path`` with ``{rank}`` replaced by the global rank, else
``path.rank<R>.json`` (``x.json`` -> ``x.rank<R>.json``).

A step's measured event ends when this rank's last receive of the step has landed (applied),
or, in a step where it only sends, when its last send was posted; it starts where the step
before it ended (the data-flow order on gloo overlaps steps, so a step's own work may begin
earlier). Steps where the rank does nothing last 0. The wait for the sends still in flight at
the end of a run is the event "wait for sends".
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from syncplan.core.atomic import atomic_write_json
from syncplan.core.program import Program
from syncplan.executor.dataflow import APPLY, POST_RECV, POST_SEND, WAIT_RECV

TRACE_ENV = "SYNCPLAN_TRACE"
TOPOLOGY_ENV = "SYNCPLAN_TRACE_TOPOLOGY"
MAX_EVENTS = 500_000  # per file: runs beyond this are counted, not recorded
PREDICTED_PID = 100_000  # the predicted process of rank R is PREDICTED_PID + R
STEPS_TID, RUNS_TID, RECVS_TID = 0, 1, 2
# ts are microseconds since 2025-01-01 UTC: a clock all ranks share, small enough that a
# double keeps it to 1/32 us for decades
CLOCK_ORIGIN_NS = 1_735_689_600 * 10**9


def trace_file(template: str, rank: int) -> Path:
    """Where rank ``rank`` writes: ``{rank}`` replaced, else ``.rank<R>.json`` appended
    (before a final ``.json``)."""
    if "{rank}" in template:
        return Path(template.replace("{rank}", str(rank)))
    stem = template[:-5] if template.endswith(".json") else template
    return Path(f"{stem}.rank{rank}.json")


class TraceRecorder:
    """The events of one process for one output file."""

    def __init__(self, template: str, rank: int) -> None:
        self.path = trace_file(template, rank)
        self.rank = rank
        self.events: list[dict[str, Any]] = []
        self.dropped_runs = 0
        self.runs = 0
        self.lock = threading.Lock()
        # a clock every rank shares: wall time since CLOCK_ORIGIN_NS, read through perf_counter
        self.offset_ns = time.time_ns() - time.perf_counter_ns() - CLOCK_ORIGIN_NS
        self.plans: dict[str, dict[str, Any]] = {}

    def us(self, ns: int) -> float:
        """Microseconds on the shared clock of a ``perf_counter_ns`` reading."""
        return (ns + self.offset_ns) / 1000.0

    def span(self, start_ns: int, end_ns: int) -> tuple[float, float]:
        """(ts, dur) of an event: ``ts + dur`` is exactly the next event's ``ts``."""
        ts = self.us(start_ns)
        return ts, self.us(end_ns) - ts

    def add(self, events: list[dict[str, Any]]) -> bool:
        with self.lock:
            if len(self.events) + len(events) > MAX_EVENTS:
                self.dropped_runs += 1
                return False
            self.events += events
            self.runs += 1
            return True

    def document(self) -> dict[str, Any]:
        r, p = self.rank, PREDICTED_PID + self.rank
        meta = [
            _meta("process_name", r, {"name": f"rank {r} measured"}),
            _meta("process_sort_index", r, {"sort_index": 2 * r}),
            _meta("process_name", p, {"name": f"rank {r} predicted"}),
            _meta("process_sort_index", p, {"sort_index": 2 * r + 1}),
        ]
        for pid in (r, p):
            meta.append(_meta("thread_name", pid, {"name": "steps"}, STEPS_TID))
            meta.append(_meta("thread_name", pid, {"name": "runs"}, RUNS_TID))
        meta.append(_meta("thread_name", r, {"name": "receives"}, RECVS_TID))
        with self.lock:
            return {
                "traceEvents": meta + self.events,
                "displayTimeUnit": "ms",
                "otherData": {
                    "rank": r,
                    "runs": self.runs,
                    "dropped_runs": self.dropped_runs,
                    "clock": "ts in microseconds since 2025-01-01 UTC (wall clock)",
                    "plans": dict(self.plans),
                },
            }

    def write(self) -> Path:
        atomic_write_json(self.path, self.document(), indent=None)
        return self.path


def _meta(name: str, pid: int, args: dict[str, Any], tid: int = 0) -> dict[str, Any]:
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": args}


_RECORDERS: dict[str, TraceRecorder] = {}
_REGISTRY_LOCK = threading.Lock()


def recorder(template: str, rank: int) -> TraceRecorder:
    """The process's recorder for ``template`` (written at exit)."""
    with _REGISTRY_LOCK:
        rec = _RECORDERS.get(template)
        if rec is None:
            if not _RECORDERS:
                atexit.register(write_traces)
            rec = _RECORDERS[template] = TraceRecorder(template, rank)
        return rec


def write_traces() -> list[Path]:
    """Write every trace file of this process now (again at exit); their paths."""
    with _REGISTRY_LOCK:
        recs = list(_RECORDERS.values())
    return [rec.write() for rec in recs]


def _step_info(sched: Any, esize: int) -> dict[int, dict[str, Any]]:
    """Per program step this rank acts in: bytes sent and received, per peer (plan ranks)."""
    out: dict[int, dict[str, Any]] = {}
    for st in sched.steps:
        sends: dict[str, int] = {}
        recvs: dict[str, int] = {}
        for m in st.sends:
            sends[str(m.peer)] = sends.get(str(m.peer), 0) + (m.stop - m.start) * esize
        for m in st.recvs:
            recvs[str(m.peer)] = recvs.get(str(m.peer), 0) + (m.stop - m.start) * esize
        out[st.index] = {
            "bytes_sent": sum(sends.values()),
            "bytes_recv": sum(recvs.values()),
            "sent_to": sends,
            "recv_from": recvs,
        }
    return out


def _marks(sched: Any, code: Sequence[tuple[int, int]]) -> list[int]:
    """Per gloo instruction: the program step whose end it marks (-1: none). A step with
    receives ends at its last receive or apply; one with only sends at its last post."""
    send_step: list[int] = []
    recv_step: list[int] = []
    for st in sched.steps:
        send_step += [st.index] * len(st.sends)
        recv_step += [st.index] * len(st.recvs)
    receives = set(recv_step)
    out = []
    for op, i in code:
        if op in (WAIT_RECV, APPLY):
            out.append(recv_step[i])
        elif op == POST_SEND and send_step[i] not in receives:
            out.append(send_step[i])
        else:
            out.append(-1)
    return out


# (prepared, step info, gloo instruction marks, gloo receives: (step, peer, bytes))
_PrepInfo = tuple[Any, dict[int, dict[str, Any]], list[int] | None, list[tuple[int, int, int]]]


class PlanTracer:
    """Runs one executor's plan with timestamps and hands the events to a TraceRecorder."""

    def __init__(
        self, rec: TraceRecorder, plan: Mapping[str, Any] | None, program: Any, topology: Any
    ) -> None:
        self.rec = rec
        self.program = program  # core.document.PlanDocument
        self.plan = plan
        self.topology = topology
        self.nsteps = len(program.steps)
        self._info: dict[int, _PrepInfo] = {}
        self._predicted: dict[int, tuple[list[float], str]] = {}
        rec.plans[program.plan_id] = {
            "ranks": len(program.ranks),
            "steps": self.nsteps,
            "collective": program.collective,
        }

    def predicted(self, nbytes: int) -> tuple[list[float], str]:
        """Per program step: predicted seconds for a run of ``nbytes``, and the model."""
        hit = self._predicted.get(nbytes)
        if hit is None:
            hit = self._predicted[nbytes] = predicted_steps(
                self.program, self.plan, self.topology, nbytes
            )
        return hit

    def _prep_info(self, prep: Any, esize: int) -> _PrepInfo:
        hit = self._info.get(id(prep))
        if hit is None or hit[0] is not prep:
            code = getattr(prep, "code", None)
            flow = getattr(prep, "flow", None)
            steps = [st.index for st in prep.sched.steps for _ in st.recvs]
            hit = (
                prep,
                _step_info(prep.sched, esize),
                None if code is None else _marks(prep.sched, code),
                []
                if flow is None
                else [
                    (k, p, (b - a) * esize)
                    for k, (p, a, b, _) in zip(steps, flow.recvs, strict=True)
                ],
            )
            self._info[id(prep)] = hit
        return hit

    def run(self, prep: Any, flat: Any, timeout: timedelta) -> None:
        esize = flat.element_size()
        _, info, marks, recvs = self._prep_info(prep, esize)
        got: list[int] = []
        t0 = time.perf_counter_ns()
        if marks is None:
            ends = _run_steps(prep, flat, timeout)
        else:
            ends = _run_gloo(prep, flat, timeout, marks, got)
        t_end = time.perf_counter_ns()
        events = self._events(info, ends, t0, t_end, flat.numel() * esize, marks is not None)
        self.rec.add(events + self._recv_events(recvs, got, t0))

    def _recv_events(
        self, recvs: list[tuple[int, int, int]], got: list[int], t0: int
    ) -> list[dict[str, Any]]:
        """gloo: one event per received message, from the previous one's arrival (the run's
        start for the first) to its own, as this rank saw it (receives are waited for in
        program order)."""
        rec, run, out = self.rec, self.rec.runs, []
        start = t0
        for (step, peer, nbytes), end in zip(recvs, got, strict=True):
            args = {"run": run, "step": step, "peer": peer, "bytes": nbytes}
            out.append(_x(f"recv from {peer}", rec.rank, RECVS_TID, *rec.span(start, end), args))
            start = end
        return out

    def _events(
        self,
        info: dict[int, dict[str, Any]],
        ends: dict[int, int],
        t0: int,
        t_end: int,
        nbytes: int,
        flow: bool,
    ) -> list[dict[str, Any]]:
        rec, run = self.rec, self.rec.runs
        pid, ppid = rec.rank, PREDICTED_PID + rec.rank
        plan_id = self.program.plan_id
        events: list[dict[str, Any]] = []
        frontier = t0
        for s in range(self.nsteps):
            end = max(ends.get(s, frontier), frontier)
            args = {"step": s, "run": run, "plan_id": plan_id, **info.get(s, _IDLE)}
            events.append(_x(f"step {s}", pid, STEPS_TID, *rec.span(frontier, end), args))
            frontier = end
        if flow and t_end > frontier:  # gloo's data-flow order waits for sends at the end
            events.append(
                _x(
                    "wait for sends",
                    pid,
                    STEPS_TID,
                    *rec.span(frontier, t_end),
                    {"run": run, "plan_id": plan_id},
                )
            )
        run_args = {"run": run, "plan_id": plan_id, "bytes": nbytes}
        events.append(_x(f"run {run}", pid, RUNS_TID, *rec.span(t0, t_end), run_args))
        times, model = self.predicted(nbytes)
        at = rec.us(t0)
        for s, d in enumerate(times):
            args = {"step": s, "run": run, "plan_id": plan_id, "model": model, "predicted_s": d}
            nxt = at + d * 1e6
            events.append(_x(f"step {s}", ppid, STEPS_TID, at, nxt - at, args))
            at = nxt
        events.append(
            _x(
                f"run {run}",
                ppid,
                RUNS_TID,
                rec.us(t0),
                sum(times) * 1e6,
                {**run_args, "model": model},
            )
        )
        return events


_IDLE = {"bytes_sent": 0, "bytes_recv": 0, "sent_to": {}, "recv_from": {}}


def _x(
    name: str, pid: int, tid: int, ts: float, dur: float, args: dict[str, Any]
) -> dict[str, Any]:
    return {"name": name, "ph": "X", "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}


def predicted_steps(
    program: Any, plan: Mapping[str, Any] | None, topology: Any, nbytes: int
) -> tuple[list[float], str]:
    """Per program step, the predicted seconds of a run of ``nbytes``: the cost model's
    (``syncplan.planner.timeline.program_step_times``, with the document's cost terms) when a
    topology is known, else the plan's ``predicted_time_s`` split by step bytes
    (``byte_step_times``); and which of the two ("cost model" / "bytes split")."""
    from syncplan.core.options import PlanOptions
    from syncplan.planner.timeline import byte_step_times, program_step_times

    prog = Program(program.units, [list(s) for s in program.steps])
    if topology is not None:
        topo = topology
        if isinstance(topology, str | os.PathLike):
            from syncplan.planner.topology import load_topology

            topo = load_topology(os.fspath(topology))
        opts = PlanOptions.recorded_in(dict(plan) if plan is not None else {})
        return program_step_times(
            topo, list(program.ranks), prog, float(nbytes), opts
        ), "cost model"
    predicted = float((plan or {}).get("predicted_time_s") or 0.0)
    return byte_step_times(prog, predicted), "bytes split"


def _run_gloo(
    prep: Any, flat: Any, timeout: timedelta, marks: list[int], got_at: list[int]
) -> dict[int, int]:
    """``_GlooPrepared.run`` with the time of every instruction that marks a step's end;
    appends each receive's arrival time (in receive order) to ``got_at``."""
    now = time.perf_counter_ns
    send_bufs, recv_bufs, applies = prep.views(flat)
    send, recv = prep.pg.send, prep.pg.recv
    sends, recvs = prep.sends, prep.recvs
    sent: list[Any] = [None] * len(sends)
    got: list[Any] = [None] * len(recvs)
    ends: dict[int, int] = {}
    for n, (op, i) in enumerate(prep.code):
        if op == WAIT_RECV:
            got[i].wait(timeout)
            got_at.append(now())
        elif op == POST_SEND:
            peer, _, _, tag = sends[i]
            sent[i] = send(send_bufs[i], peer, tag)
        elif op == POST_RECV:
            peer, _, _, tag = recvs[i]
            got[i] = recv(recv_bufs[i], peer, tag)
        elif op == APPLY:
            _apply(applies[i])
        else:
            sent[i].wait(timeout)
        if marks[n] >= 0:
            ends[marks[n]] = now()
    return ends


def _run_steps(prep: Any, flat: Any, timeout: timedelta) -> dict[int, int]:
    """``_StepPrepared.run`` with the end time of every step."""
    import torch.distributed as dist

    ends: dict[int, int] = {}
    for st, (ops, applies) in zip(prep.sched.steps, prep.ops(flat), strict=True):
        for w in dist.batch_isend_irecv(ops):
            w.wait(timeout)
        _apply(applies)
        if flat.device.type == "cuda":
            import torch

            torch.cuda.synchronize(flat.device)
        ends[st.index] = time.perf_counter_ns()
    return ends


def _apply(applies: list[Any]) -> None:
    for dst, staged, reduce in applies:
        if reduce:
            dst.add_(staged)
        else:
            dst.copy_(staged)
