"""A tiny TCP throughput tool, run inside the namespaces by ``linkcheck``.

``python -m syncplan.testbed.throughput recv --port P --flows K`` accepts K connections, reads
each to EOF and prints one JSON line: total bytes, seconds from the first to the last byte
received (over all flows) and the rate in Mbit/s.
``python -m syncplan.testbed.throughput send --to ADDR --port P --seconds S`` streams zeros
for S seconds.
``python -m syncplan.testbed.throughput echo --port P`` answers every message of one
connection (an 8-byte length, then that many bytes) with one byte once all of it arrived;
``python -m syncplan.testbed.throughput msgs --to ADDR --port P --sizes 4096,65536 --reps R``
sends single messages to it, ``--gap`` seconds apart (the link idle in between), and prints
each message's time from the first byte sent to the answer (JSON, per size).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
import time

CHUNK = 256 * 1024


def receive(port: int, flows: int, timeout_s: float) -> dict[str, float]:
    """Accept ``flows`` connections on ``port`` and read them to EOF."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(flows)
    srv.settimeout(timeout_s)
    print(json.dumps({"listening": port}), flush=True)
    lock = threading.Lock()
    stats = {"bytes": 0, "first": float("inf"), "last": 0.0}

    def drain(conn: socket.socket) -> None:
        conn.settimeout(timeout_s)
        buf = bytearray(CHUNK)
        n_total, first, last = 0, None, 0.0
        with conn:
            while True:
                n = conn.recv_into(buf)
                if not n:
                    break
                now = time.monotonic()
                if first is None:
                    first = now
                n_total += n
                last = now
        with lock:
            stats["bytes"] += n_total
            if first is not None:
                stats["first"] = min(stats["first"], first)
                stats["last"] = max(stats["last"], last)

    threads = []
    with srv:
        for _ in range(flows):
            conn, _addr = srv.accept()
            t = threading.Thread(target=drain, args=(conn,), daemon=True)
            t.start()
            threads.append(t)
    for t in threads:
        t.join(timeout_s)
    seconds = max(stats["last"] - stats["first"], 1e-9) if stats["bytes"] else 0.0
    rate = stats["bytes"] * 8 / seconds / 1e6 if seconds else 0.0
    return {"bytes": stats["bytes"], "seconds": seconds, "rate_mbit": rate}


def send(
    addr: str, port: int, seconds: float, connect_timeout_s: float, congestion: str | None = None
) -> int:
    """Stream zeros to ``addr:port`` for ``seconds``; returns bytes sent."""
    deadline = time.monotonic() + connect_timeout_s
    while True:
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            if congestion:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, congestion.encode())
            sock.settimeout(connect_timeout_s)
            sock.connect((addr, port))
            break
        except OSError:
            sock.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    payload = bytes(CHUNK)
    sent = 0
    with sock:
        sock.settimeout(seconds + 30)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            sock.sendall(payload)
            sent += len(payload)
        sock.shutdown(socket.SHUT_WR)
        sock.recv(1)  # wait for the receiver to close: all bytes delivered
    return sent


HEADER = 8  # message length, big-endian


def _read_exact(conn: socket.socket, n: int, buf: bytearray) -> bool:
    """Read ``n`` bytes (into ``buf``, reused); False on EOF before the first byte."""
    view = memoryview(buf)
    got = 0
    while got < n:
        k = conn.recv_into(view[: min(n - got, len(buf))])
        if not k:
            if got:
                raise ConnectionError(f"EOF after {got} of {n} bytes")
            return False
        got += k
    return True


def echo(port: int, timeout_s: float) -> int:
    """Answer each message of one connection with one byte; returns the messages seen."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(1)
    srv.settimeout(timeout_s)
    print(json.dumps({"listening": port}), flush=True)
    buf = bytearray(CHUNK)
    count = 0
    with srv:
        conn, _addr = srv.accept()
    with conn:
        conn.settimeout(timeout_s)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while _read_exact(conn, HEADER, buf):
            _read_exact(conn, int.from_bytes(buf[:HEADER], "big"), buf)
            conn.sendall(b"k")
            count += 1
    return count


def messages(
    addr: str, port: int, sizes: list[int], reps: int, gap_s: float, connect_timeout_s: float
) -> dict[str, list[float]]:
    """Time single messages of each size to an ``echo`` server (first byte sent to answer);
    sizes interleaved rep by rep, the link idle ``gap_s`` before each."""
    deadline = time.monotonic() + connect_timeout_s
    while True:
        try:
            sock = socket.create_connection((addr, port), timeout=connect_timeout_s)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    times: dict[str, list[float]] = {str(n): [] for n in sizes}
    payload = bytes(max(sizes))
    with sock:
        for _ in range(reps):
            for n in sizes:
                time.sleep(gap_s)
                t0 = time.perf_counter()
                sock.sendall(n.to_bytes(HEADER, "big") + payload[:n])
                if not sock.recv(1):
                    raise ConnectionError("echo server closed the connection")
                times[str(n)].append(time.perf_counter() - t0)
        sock.shutdown(socket.SHUT_WR)
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m syncplan.testbed.throughput")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("recv")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--flows", type=int, default=1)
    r.add_argument("--timeout", type=float, default=60.0)
    s = sub.add_parser("send")
    s.add_argument("--to", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--seconds", type=float, default=2.0)
    s.add_argument("--connect-timeout", type=float, default=10.0)
    s.add_argument(
        "--congestion",
        default=os.environ.get("SYNCPLAN_TB_CC") or None,
        help="TCP congestion control for the flow (default: the system's)",
    )
    e = sub.add_parser("echo")
    e.add_argument("--port", type=int, required=True)
    e.add_argument("--timeout", type=float, default=60.0)
    m = sub.add_parser("msgs")
    m.add_argument("--to", required=True)
    m.add_argument("--port", type=int, required=True)
    m.add_argument("--sizes", required=True, help="bytes, comma-separated")
    m.add_argument("--reps", type=int, default=10)
    m.add_argument("--gap", type=float, default=0.05, help="idle seconds before each message")
    m.add_argument("--connect-timeout", type=float, default=10.0)
    args = ap.parse_args(argv)
    if args.cmd == "echo":
        print(json.dumps({"messages": echo(args.port, args.timeout)}), flush=True)
    elif args.cmd == "msgs":
        sizes = [int(x) for x in args.sizes.split(",")]
        print(
            json.dumps(
                messages(args.to, args.port, sizes, args.reps, args.gap, args.connect_timeout)
            ),
            flush=True,
        )
    elif args.cmd == "recv":
        print(json.dumps(receive(args.port, args.flows, args.timeout)), flush=True)
    else:
        print(
            json.dumps(
                {
                    "sent": send(
                        args.to, args.port, args.seconds, args.connect_timeout, args.congestion
                    )
                }
            ),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
