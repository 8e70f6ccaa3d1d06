"""The webhook's plain-HTTP health port under idle and trickling clients: do probes and reviews still pass?

A fresh ``fabricguard admission serve`` process (TLS on 127.0.0.1 with a trustme certificate, as in
``bench_webhook.py``; health on another port) runs with the descriptor limit a container gets (soft 1,024,
containerd 2.x), as the issue measured. Then, on the health port:

* ``--idle`` connections from 127.0.0.1 that never send a byte, opened as fast as the server accepts them;
* ``--trickle`` connections from 127.0.0.3 that send a request head one byte a second.

Opening the flood stops after 20 s (connections not opened by then count as failed). For ``--seconds`` the bench, from 127.0.0.2 (the kubelet's node address), sends a kubelet-style probe (a fresh
connection, ``GET /readyz``) every 0.2 s, and a JobSet review to ``/mutate`` on a fresh TLS connection every
0.5 s. It reports each one's status and latency, how many flood connections the server still held at the end,
the server's open descriptors and its peak memory (VmHWM). ``--server-src DIR`` runs another source tree (an
older commit's src/) to compare.

    .venv/bin/python bench/admission/bench_health_port.py [--idle 2000] [--trickle 200] [--seconds 15]
        [--server-src DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import resource
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from bench_webhook import PROFILE, REVIEW, free_port, make_tls, memory_kib, pct

REPO = Path(__file__).resolve().parents[2]
CONTAINER_NOFILE = 1024  # the soft descriptor limit a container gets under containerd 2.x


def _container_limit() -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(CONTAINER_NOFILE, hard), hard))


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def _probe(port: int) -> tuple[int, float]:
    t = time.monotonic()
    try:
        async with asyncio.timeout(5):
            r, w = await asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.2", 0))
            w.write(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: kube-probe/1.33\r\nConnection: close\r\n\r\n")
            data = await r.read()
            w.close()
        return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.") else 0, time.monotonic() - t
    except (OSError, TimeoutError, ValueError, IndexError):
        return 0, time.monotonic() - t


async def _review(port: int, ctx: ssl.SSLContext, body: bytes) -> tuple[int, float]:
    t = time.monotonic()
    head = (f"POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    try:
        async with asyncio.timeout(5):
            r, w = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, local_addr=("127.0.0.2", 0))
            w.write(head + body)
            data = await r.read()
            w.close()
        return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.") else 0, time.monotonic() - t
    except (OSError, TimeoutError, ValueError, IndexError, ssl.SSLError):
        return 0, time.monotonic() - t


def _figures(got: list[tuple[int, float]]) -> dict[str, Any]:
    ok = sorted(t * 1000 for s, t in got if s == 200)
    return {"sent": len(got), "ok": len(ok), "statuses": sorted({s for s, _ in got}),
            "p50_ms": round(pct(ok, 0.5), 1) if ok else None, "p99_ms": round(pct(ok, 0.99), 1) if ok else None,
            "max_ms": round(ok[-1], 1) if ok else None}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        ca = make_tls(Path(tmp))
        port, health = free_port(), free_port()
        src = (args.server_src or REPO / "src").resolve()
        profile = (src.parent / "examples/profiles" / PROFILE.name) if args.server_src else PROFILE
        server = subprocess.Popen(
            [sys.executable, "-m", "fabricguard", "admission", "serve", "--profile", str(profile), "--cert",
             f"{tmp}/tls.crt", "--key", f"{tmp}/tls.key", "--host", "127.0.0.1", "--port", str(port),
             "--health-port", str(health)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_container_limit,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(src)})
        ctx = ssl.create_default_context(cafile=str(ca))
        body = REVIEW.read_bytes()
        flood: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        try:
            for _ in range(200):
                await asyncio.sleep(0.1)
                if (await _probe(health))[0] == 200:
                    break
            fds_start = _fds(server.pid)
            print(f"server up ({fds_start} descriptors); opening the flood", file=sys.stderr, flush=True)
            refused = 0
            opening = time.monotonic() + 20  # a server that stopped accepting: give up opening after 20 s
            for i in range(args.idle + args.trickle):
                if time.monotonic() > opening:
                    refused += 1
                    continue
                try:
                    async with asyncio.timeout(0.5):
                        flood.append(await asyncio.open_connection(
                            "127.0.0.1", health, local_addr=("127.0.0.1" if i < args.idle else "127.0.0.3", 0)))
                except (OSError, TimeoutError):
                    refused += 1
            trickling = flood[args.idle:]
            print(f"{len(flood)} flood connections open, {refused} failed; probing", file=sys.stderr, flush=True)
            probes: list[tuple[int, float]] = []
            reviews: list[tuple[int, float]] = []
            stop = asyncio.Event()

            async def trickle() -> None:
                line = b"GET /readyz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 4096
                for ch in line:
                    if stop.is_set():
                        return
                    for _, w in trickling:
                        if not w.is_closing():
                            with contextlib.suppress(Exception):
                                w.write(bytes([ch]))
                    await asyncio.sleep(1.0)

            async def every(period: float, fn: Any, out: list[tuple[int, float]]) -> None:
                while not stop.is_set():
                    out.append(await fn())
                    await asyncio.sleep(period)

            tasks = [asyncio.create_task(trickle()),
                     asyncio.create_task(every(0.2, lambda: _probe(health), probes)),
                     asyncio.create_task(every(0.5, lambda: _review(port, ctx, body), reviews))]
            await asyncio.sleep(args.seconds)
            fds_end = _fds(server.pid)
            stop.set()
            await asyncio.gather(*tasks)
            print("counting what the server still holds", file=sys.stderr, flush=True)
            held = 0  # still open: no EOF and no reset from the server
            for r, _ in flood:
                try:
                    await asyncio.wait_for(r.read(), 0.005)
                except TimeoutError:
                    held += 1
                except OSError:
                    pass
            mem = memory_kib(server.pid)
        finally:
            for _, w in flood:
                w.close()
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
    return {"server_src": str(args.server_src or "this tree"), "idle": args.idle, "trickle": args.trickle,
            "seconds": args.seconds, "flood_connect_failed": refused, "flood_held_at_end": held,
            "server_fds_before_flood": fds_start, "server_fds_during_flood": fds_end,
            "peak_rss_MiB": round(mem["VmHWM"] / 1024, 1), "probes": _figures(probes), "reviews": _figures(reviews)}


def main() -> int:
    logging.getLogger("asyncio").setLevel(logging.ERROR)  # "socket.send() raised" for each cut trickler
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--idle", type=int, default=2000)
    ap.add_argument("--trickle", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--server-src", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, args.idle + args.trickle + 512)), hard))
    result = asyncio.run(run(args))
    print(json.dumps(result, indent=2), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"cpus": os.cpu_count(), "result": result}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
