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
import datetime as dt
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
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "examples" / "profiles" / "gke-a3-ultra.yaml"
REVIEW = REPO / "tests" / "admission" / "fixtures" / "jobset.json"


def make_tls(d: Path) -> Path:
    """Write ca.crt, tls.crt and tls.key for 127.0.0.1 into ``d``; return the CA path."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bench CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(hours=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    import ipaddress

    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bench")]))
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(hours=2))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    (d / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (d / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (d / "tls.key").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
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


async def drive(port: int, ca: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
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
        results = [await fixed_rate(session, url, body, uid, args.rate, args.seconds)]
        results.append(await saturation(session, url, body, uid, args.connections, args.seconds, args.max_requests))
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--max-requests", type=int, default=200_000)
    ap.add_argument("--json", type=Path)
    ap.add_argument(
        "--pin",
        action="store_true",
        help="pin the server to CPU 0 and this client to CPU 1 (they do not compete for one core)",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ca = make_tls(Path(tmp))
        port = free_port()
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
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            preexec_fn=(lambda: os.sched_setaffinity(0, {0})) if args.pin else None,
        )
        if args.pin:
            os.sched_setaffinity(0, {1})
        try:
            try:
                import uvloop  # the client is as fast as it can be, so the server is what is measured
            except ImportError:
                results = asyncio.run(drive(port, ca, args))
            else:
                results = uvloop.run(drive(port, ca, args))
        finally:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
    print(f"{'run':34} {'requests':>9} {'errors':>6} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for r in results:
        print(
            f"{r['run']:34} {r['requests']:>9} {r['errors']:>6} {r['throughput_rps']:>9} {r['p50_ms']:>8} "
            f"{r['p99_ms']:>8} {r['max_ms']:>8}"
        )
    if args.json:
        args.json.write_text(
            json.dumps({"cpus": os.cpu_count(), "python": sys.version.split()[0], "results": results}, indent=2) + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
