"""Benchmark the admission webhook over TLS: p50/p99 latency at a fixed 200 req/s and at saturation.

The server runs as one worker process (``fabricguard admission serve``, the container's entry point) on
127.0.0.1 with a freshly generated self-signed certificate; this process drives it with an aiohttp client over
many keep-alive TLS connections, POSTing a realistic JobSet AdmissionReview (the GKE A3 Ultra profile, which
yields the largest patch) to /mutate. Runs are bounded in time and request count.

    .venv/bin/python bench/admission/bench_webhook.py [--seconds 10] [--connections 64] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import trustme

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "examples" / "profiles" / "gke-a3-ultra.yaml"
REVIEW = REPO / "tests" / "admission" / "fixtures" / "jobset.json"


def make_tls(d: Path) -> Path:
    """Write ca.crt, tls.crt and tls.key for 127.0.0.1 into ``d`` (a trustme CA); return the CA path."""
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1", common_name="bench")
    ca.cert_pem.write_to_path(str(d / "ca.crt"))
    leaf.cert_chain_pems[0].write_to_path(str(d / "tls.crt"))
    leaf.private_key_pem.write_to_path(str(d / "tls.key"))
    return d / "ca.crt"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def summary(name: str, lat: list[float], errors: int, seconds: float) -> dict[str, Any]:
    return {
        "run": name,
        "requests": len(lat),
        "errors": errors,
        "seconds": round(seconds, 2),
        "throughput_rps": round(len(lat) / seconds, 1),
        "p50_ms": round(pct(lat, 0.50) * 1e3, 3),
        "p99_ms": round(pct(lat, 0.99) * 1e3, 3),
        "max_ms": round(max(lat) * 1e3, 3) if lat else None,
        "mean_ms": round(statistics.fmean(lat) * 1e3, 3) if lat else None,
    }


async def one(session: aiohttp.ClientSession, url: str, body: bytes, uid: str) -> float:
    t = time.perf_counter()
    async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as r:
        data = await r.read()
    dt_ = time.perf_counter() - t
    if r.status != 200 or uid.encode() not in data:
        raise RuntimeError(f"bad answer {r.status}")
    return dt_


async def fixed_rate(
    session: aiohttp.ClientSession, url: str, body: bytes, uid: str, rate: float, seconds: float
) -> dict[str, Any]:
    lat: list[float] = []
    errors = 0
    n = int(rate * seconds)
    start = time.perf_counter()

    async def fire(i: int) -> None:
        nonlocal errors
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        try:
            lat.append(await one(session, url, body, uid))
        except Exception:
            errors += 1

    await asyncio.gather(*(fire(i) for i in range(n)))
    return summary(f"fixed {rate:g} req/s", lat, errors, time.perf_counter() - start)


async def saturation(
    session: aiohttp.ClientSession, url: str, body: bytes, uid: str, workers: int, seconds: float, max_requests: int
) -> dict[str, Any]:
    lat: list[float] = []
    errors = 0
    start = time.perf_counter()
    stop = start + seconds

    async def worker() -> None:
        nonlocal errors
        while time.perf_counter() < stop and len(lat) + errors < max_requests:
            try:
                lat.append(await one(session, url, body, uid))
            except Exception:
                errors += 1

    await asyncio.gather(*(worker() for _ in range(workers)))
    return summary(f"saturation, {workers} connections", lat, errors, time.perf_counter() - start)


def fan_out_pod(containers: int) -> bytes:
    """The amplification case: one bare Pod of many tiny GPU containers (1.5 MB for 20,000)."""
    review = json.loads((REVIEW.parent / "pod-bare-group.json").read_text())
    review["request"]["object"]["spec"]["containers"] = [
        {"name": f"c{i}", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}} for i in range(containers)]
    return json.dumps(review, separators=(",", ":")).encode()


def fan_out_jobset(replicated_jobs: int) -> bytes:
    """A JobSet of many replicated jobs, each a copy of the realistic workers job."""
    review = json.loads(REVIEW.read_text())
    rjobs = review["request"]["object"]["spec"]["replicatedJobs"]
    rjobs[:] = [dict(copy.deepcopy(rjobs[1]), name=f"w{i}") for i in range(replicated_jobs)]
    return json.dumps(review, separators=(",", ":")).encode()


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time the server process has used so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_kib(pid: int) -> dict[str, int]:
    """The server's resident set now (VmRSS) and at its peak so far (VmHWM), in KiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


async def fan_out(session: aiohttp.ClientSession, url: str, health: str, pid: int) -> list[dict[str, Any]]:
    """Time each fan-out case alone, then 8 of the largest at once while /healthz is polled on the health port."""
    results = []
    cases = [("pod of 20,000 GPU containers", fan_out_pod(20_000)),
             ("pod of 40,000 GPU containers", fan_out_pod(40_000)),
             ("JobSet of 1,000 replicated jobs", fan_out_jobset(1_000))]
    for name, body in cases:
        lat, sizes = [], []
        for _ in range(5):
            t = time.perf_counter()
            async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as r:
                data = await r.read()
            lat.append(time.perf_counter() - t)
            sizes.append(len(data))
        results.append({"run": f"fan-out: {name}", "body_bytes": len(body), "answer_bytes": max(sizes),
                        "p50_ms": round(pct(lat, 0.5) * 1e3, 1), "max_ms": round(max(lat) * 1e3, 1),
                        "server_kib": memory_kib(pid)})
    body = cases[1][1]  # 40,000 containers: about the largest body --max-body lets in (3 MiB)
    health_lat: list[float] = []
    done = asyncio.Event()

    async def probe() -> None:
        async with aiohttp.ClientSession() as s:
            while not done.is_set():
                t = time.perf_counter()
                async with s.get(health) as r:
                    await r.read()
                health_lat.append(time.perf_counter() - t)
                await asyncio.sleep(0.01)

    async def big() -> float:
        t = time.perf_counter()
        async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as r:
            await r.read()
        return time.perf_counter() - t

    prober = asyncio.create_task(probe())
    lat = await asyncio.gather(*(big() for _ in range(8)))
    done.set()
    await prober
    results.append({"run": "fan-out: 8 x 40,000 containers at once", "p50_ms": round(pct(lat, 0.5) * 1e3, 1),
                    "max_ms": round(max(lat) * 1e3, 1), "healthz_max_ms": round(max(health_lat) * 1e3, 1),
                    "healthz_probes": len(health_lat), "server_kib": memory_kib(pid)})
    return results


async def drive(port: int, ca: Path, args: argparse.Namespace, pid: int) -> list[dict[str, Any]]:
    ctx = ssl.create_default_context(cafile=str(ca))
    review = json.loads(REVIEW.read_text())
    body = json.dumps(review).encode()
    uid = review["request"]["uid"]
    url = f"https://127.0.0.1:{port}/mutate"
    conn = aiohttp.TCPConnector(ssl=ctx, limit=args.connections)
    async with aiohttp.ClientSession(connector=conn) as session:
        deadline = time.monotonic() + 20
        while True:
            try:
                async with session.get(f"https://127.0.0.1:{port}/readyz") as r:
                    if r.status == 200:
                        break
            except aiohttp.ClientError:
                if time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.1)
        # Warm up: open the connections and let the server reach steady state.
        await saturation(session, url, body, uid, args.connections, 1.0, 2000)
        results = []
        for phase in (lambda: fixed_rate(session, url, body, uid, args.rate, args.seconds),
                      lambda: saturation(session, url, body, uid, args.connections, args.seconds, args.max_requests)):
            cpu = cpu_seconds(pid)
            results.append(await phase())
            # Server CPU per answered request: what one request costs, whatever else runs on the machine.
            results[-1]["server_cpu_us_per_request"] = round(
                (cpu_seconds(pid) - cpu) / max(results[-1]["requests"], 1) * 1e6, 1)
        results[-1]["server_kib"] = memory_kib(pid)
        if args.fan_out:
            results += await fan_out(session, url, f"http://127.0.0.1:{args.health_port}/healthz", pid)
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--max-requests", type=int, default=200_000)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--no-fan-out", dest="fan_out", action="store_false",
                    help="skip the fan-out cases (large objects the caps refuse)")
    ap.add_argument("--server-src", type=Path,
                    help="run the server from another source tree (e.g. an older commit's src/) to compare")
    ap.add_argument(
        "--pin",
        action="store_true",
        help="pin the server to CPU 0 and this client to CPU 1 (they do not compete for one core)",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ca = make_tls(Path(tmp))
        port = free_port()
        args.health_port = free_port()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if args.server_src:
            env["PYTHONPATH"] = str(args.server_src.resolve())
        usage = subprocess.run([sys.executable, "-m", "fabricguard", "admission", "serve", "--help"], env=env,
                               capture_output=True, text=True).stdout
        health = ["--health-port", str(args.health_port)] if "--health-port" in usage else []
        args.fan_out = args.fan_out and bool(health)  # older servers have no health port to poll
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fabricguard",
                "admission",
                "serve",
                "--profile",
                str(PROFILE),
                "--cert",
                f"{tmp}/tls.crt",
                "--key",
                f"{tmp}/tls.key",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                *health,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            preexec_fn=(lambda: os.sched_setaffinity(0, {0})) if args.pin else None,
        )
        if args.pin:
            os.sched_setaffinity(0, {1})
        try:
            try:
                import uvloop  # the client is as fast as it can be, so the server is what is measured
            except ImportError:
                results = asyncio.run(drive(port, ca, args, server.pid))
            else:
                results = uvloop.run(drive(port, ca, args, server.pid))
        finally:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
    print(f"{'run':40} {'requests':>9} {'errors':>6} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} "
          f"{'peak MiB':>8} {'CPU us/req':>10}")
    for r in results:
        peak = r.get("server_kib", {}).get("VmHWM")
        print(
            f"{r['run']:40} {r.get('requests', 5):>9} {r.get('errors', 0):>6} {r.get('throughput_rps', '-'):>9} "
            f"{r['p50_ms']:>8} {r.get('p99_ms', '-'):>8} {r['max_ms']:>8} "
            f"{round(peak / 1024, 1) if peak else '-':>8} {r.get('server_cpu_us_per_request', '-'):>10}"
            + (f"  answer {r['answer_bytes']} B" if "answer_bytes" in r else "")
            + (f"  /healthz max {r['healthz_max_ms']} ms over {r['healthz_probes']}" if "healthz_max_ms" in r else "")
        )
    if args.json:
        args.json.write_text(
            json.dumps({"cpus": os.cpu_count(), "python": sys.version.split()[0], "results": results}, indent=2) + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
