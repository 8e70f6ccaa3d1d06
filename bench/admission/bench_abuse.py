"""The webhook under abuse: p99 of a normal review, and peak memory, while it is flooded.

Two floods, each against a fresh ``fabricguard admission serve`` process (one worker, TLS on 127.0.0.1 with a
trustme certificate, as in ``bench_webhook.py``), while a prober sends the realistic JobSet review to
``/mutate`` every 50 ms on a keep-alive connection of its own:

* ``big``: ``--big`` clients at once, each on its own TLS connection, POST a 2.9 MB review (a bare Pod of
  ~37,000 GPU containers, under the 3 MiB body limit) as fast as the server takes it, ``--rounds`` times;
* ``trickle``: ``--trickle`` TLS connections send a request line and then one header byte a second for
  ``--seconds`` seconds; the connections the server still holds at the end are counted;
* ``handshake``: ``--handshakes`` TCP connections each send a real ClientHello (made by a memory-BIO client)
  and never answer the server's reply, for ``--seconds`` seconds, each reconnecting 0.1 s after the server
  closes it; the connections the server holds are counted, and a fresh TLS connection with a review is tried
  every 0.5 s from 127.0.0.2 (new clients are what a handshake flood starves; the API server's address is
  not the flood's).

The prober is a process of its own. The server's VmHWM (peak resident memory) is read from /proc at the end of each flood, VmRSS every 0.5 s.
``--server-src DIR`` runs another source tree (an older commit's src/) to compare.

    .venv/bin/python bench/admission/bench_abuse.py [--big 300] [--trickle 3000] [--seconds 40] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).parent))
import contextlib

from bench_webhook import PROFILE, REVIEW, fan_out_pod, free_port, make_tls, memory_kib, pct

REPO = Path(__file__).resolve().parents[2]


async def prober(port: int, ctx: ssl.SSLContext, stop: asyncio.Event, out: dict[str, Any]) -> None:
    review = json.loads(REVIEW.read_text())
    body, uid = json.dumps(review).encode(), review["request"]["uid"]
    lat: list[float] = []
    errors: dict[str, int] = {}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx, limit=1)) as s:
        while not stop.is_set():
            t = time.perf_counter()
            try:
                async with asyncio.timeout(30):
                    async with s.post(f"https://127.0.0.1:{port}/mutate", data=body,
                                      headers={"Content-Type": "application/json"}) as r:
                        data = await r.read()
                ok = r.status == 200 and uid.encode() in data
                key = "ok" if ok else f"http {r.status}"
            except Exception as exc:
                key = type(exc).__name__
            lat.append(time.perf_counter() - t)
            errors[key] = errors.get(key, 0) + 1
            await asyncio.sleep(0.05)
    out.update({"probes": len(lat), "outcomes": errors, "p50_ms": round(pct(lat, 0.5) * 1e3, 1),
                "p99_ms": round(pct(lat, 0.99) * 1e3, 1), "max_ms": round(max(lat) * 1e3, 1) if lat else None,
                "over_5s": sum(1 for x in lat if x > 5.0)})


async def big_flood(port: int, ctx: ssl.SSLContext, n: int, rounds: int) -> dict[str, Any]:
    body = fan_out_pod(37_000)
    statuses: dict[str, int] = {}
    lat: list[float] = []

    async def client() -> None:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx, limit=1)) as s:
            for _ in range(rounds):
                t = time.perf_counter()
                try:
                    async with asyncio.timeout(60):
                        async with s.post(f"https://127.0.0.1:{port}/mutate", data=body,
                                          headers={"Content-Type": "application/json"}) as r:
                            await r.read()
                    key = str(r.status)
                except Exception as exc:
                    key = type(exc).__name__
                lat.append(time.perf_counter() - t)
                statuses[key] = statuses.get(key, 0) + 1

    await asyncio.gather(*(client() for _ in range(n)))
    return {"body_bytes": len(body), "clients": n, "rounds": rounds, "answers": statuses,
            "answer_p50_ms": round(pct(lat, 0.5) * 1e3, 1), "answer_max_ms": round(max(lat) * 1e3, 1)}


async def trickle_flood(port: int, ctx: ssl.SSLContext, n: int, seconds: float) -> dict[str, Any]:
    conns: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    failed = 0
    sem = asyncio.Semaphore(64)

    async def connect() -> None:
        nonlocal failed
        async with sem:
            try:
                r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port, ssl=ctx), 20)
                w.write(b"POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                conns.append((r, w))
            except Exception:
                failed += 1

    await asyncio.gather(*(connect() for _ in range(n)))
    start = time.monotonic()
    end = start + seconds
    held_at: dict[str, int] = {}
    while time.monotonic() < end:
        for mark in (5, 10, 20, 30):
            if time.monotonic() - start >= mark and f"{mark}s" not in held_at:
                held_at[f"{mark}s"] = sum(1 for r, w in conns if not w.is_closing() and not r.at_eof())
        for _, w in conns:
            if not w.is_closing():
                with contextlib.suppress(Exception):
                    w.write(b"X")
        await asyncio.sleep(1.0)
    held = sum(1 for r, w in conns if not w.is_closing() and not r.at_eof())
    for _, w in conns:
        w.close()
    return {"connections": n, "opened": len(conns), "failed_to_open": failed, "seconds": seconds,
            "still_held": {**held_at, "end": held}}


FRESH_FROM = "127.0.0.2"  # the fresh reviews come from another address than the flood, as the API server would


def client_hello(ctx: ssl.SSLContext) -> bytes:
    obj = ctx.wrap_bio(ssl.MemoryBIO(), out := ssl.MemoryBIO(), server_hostname="127.0.0.1")
    with contextlib.suppress(ssl.SSLWantReadError):
        obj.do_handshake()
    return out.read()


async def handshake_flood(port: int, ctx: ssl.SSLContext, n: int, seconds: float) -> dict[str, Any]:
    end = time.monotonic() + seconds
    held = 0
    opened = failed = 0
    sem = asyncio.Semaphore(64)  # connects in progress at once, as in the trickle flood

    async def slot() -> None:
        nonlocal held, opened, failed
        while time.monotonic() < end:
            try:
                async with sem:
                    r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
                w.write(client_hello(ctx))
                opened += 1
            except Exception:
                failed += 1
                await asyncio.sleep(0.1)
                continue
            held += 1
            try:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(max(end - time.monotonic(), 0)):
                        while await r.read(65536):
                            pass
            finally:
                held -= 1
                w.close()
            await asyncio.sleep(0.1)

    marks: dict[str, int] = {}
    fresh = {"ok": 0, "failed": 0}
    fresh_lat: list[float] = []

    async def watch() -> None:
        start = time.monotonic()
        body = REVIEW.read_bytes()
        while time.monotonic() < end:
            await asyncio.sleep(0.5)
            for mark in (5, 10, 15, 20, 30):
                if time.monotonic() - start >= mark and f"{mark}s" not in marks:
                    marks[f"{mark}s"] = held
            t = time.monotonic()
            try:
                async with asyncio.timeout(5):
                    r, w = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, local_addr=(FRESH_FROM, 0))
                    w.write(b"POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                            b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
                    ok = (await r.read(65536)).startswith(b"HTTP/1.1 200")
                    w.close()
            except Exception:
                ok = False
            fresh["ok" if ok else "failed"] += 1
            if ok:
                fresh_lat.append(time.monotonic() - t)

    await asyncio.gather(watch(), *(slot() for _ in range(n)))
    return {"connections": n, "seconds": seconds, "opened": opened, "failed_to_open": failed,
            "held": marks, "fresh_review": fresh,
            "fresh_review_p50_ms": round(pct(fresh_lat, 0.5) * 1e3, 1) if fresh_lat else None}


async def phase(name: str, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        ca = make_tls(Path(tmp))
        port = free_port()
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str((args.server_src or REPO / "src").resolve())}
        profile = (args.server_src.resolve().parent / "examples/profiles" / PROFILE.name) if args.server_src \
            else PROFILE
        server = subprocess.Popen(
            [sys.executable, "-m", "fabricguard", "admission", "serve", "--profile", str(profile), "--cert",
             f"{tmp}/tls.crt", "--key", f"{tmp}/tls.key", "--host", "127.0.0.1", "--port", str(port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        ctx = ssl.create_default_context(cafile=str(ca))
        try:
            for _ in range(200):
                await asyncio.sleep(0.1)
                try:
                    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as s, \
                            s.get(f"https://127.0.0.1:{port}/readyz") as r:
                        if r.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
            rss_start = memory_kib(server.pid)["VmRSS"]
            stop = asyncio.Event()
            probe: dict[str, Any] = {}
            rss_max = 0

            async def sample() -> None:
                nonlocal rss_max
                while not stop.is_set():
                    rss_max = max(rss_max, memory_kib(server.pid)["VmRSS"])
                    await asyncio.sleep(0.5)

            # The prober is a process of its own: the flood's client would otherwise delay it on this loop.
            probe_proc = await asyncio.create_subprocess_exec(
                sys.executable, __file__, "--probe-port", str(port), "--probe-ca", str(ca),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
            tasks = [asyncio.create_task(sample())]
            await asyncio.sleep(1.0)
            if name == "big":
                flood = await big_flood(port, ctx, args.big, args.rounds)
            elif name == "handshake":
                flood = await handshake_flood(port, ctx, args.handshakes, args.seconds)
            else:
                flood = await trickle_flood(port, ctx, args.trickle, args.seconds)
            await asyncio.sleep(1.0)
            stop.set()
            assert probe_proc.stdin is not None
            probe_proc.stdin.close()
            out, _ = await probe_proc.communicate()
            probe = json.loads(out)
            await asyncio.gather(*tasks)
            mem = memory_kib(server.pid)
        finally:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
    return {"flood": name, "server_src": str(args.server_src or "this tree"), **flood,
            "rss_start_MiB": round(rss_start / 1024, 1), "rss_max_sampled_MiB": round(rss_max / 1024, 1),
            "peak_rss_MiB": round(mem["VmHWM"] / 1024, 1), "normal_review": probe}


async def probe_main(port: int, ca: Path) -> None:
    """The prober alone, until its stdin closes; prints its figures as JSON."""
    stop = asyncio.Event()
    out: dict[str, Any] = {}
    loop = asyncio.get_running_loop()
    waiter = loop.run_in_executor(None, sys.stdin.read)
    waiter.add_done_callback(lambda _: stop.set())
    await prober(port, ssl.create_default_context(cafile=str(ca)), stop, out)
    print(json.dumps(out))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probe-port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--probe-ca", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--big", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--trickle", type=int, default=3000)
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--handshakes", type=int, default=2000)
    ap.add_argument("--only", choices=["big", "trickle", "handshake"])
    ap.add_argument("--server-src", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.probe_port:
        asyncio.run(probe_main(args.probe_port, args.probe_ca))
        return 0
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, args.trickle + args.big + args.handshakes + 512)), hard))
    results = []
    for name in ([args.only] if args.only else ["big", "trickle", "handshake"]):
        results.append(asyncio.run(phase(name, args)))
        print(json.dumps(results[-1], indent=2), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"cpus": os.cpu_count(), "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
