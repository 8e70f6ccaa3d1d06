"""One client must not take the webhook down: real TLS clients against a real server (and a real process).

Each test is one finding of the hardening review: a declared body over the limit, a body that never arrives,
compressed bodies, deeply nested objects in the log, a fan-out object on the event loop, certificate files that
do not match, and SIGTERM during a request.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from admission_support import PROFILES, TlsFiles, load_review

from fabricguard.admission.decide import Admission
from fabricguard.admission.server import Running, start
from fabricguard.admission.workloads import MAX_CONTAINERS
from fabricguard.profile import load_profile

GKE = next(p for p in PROFILES if p.stem == "gke-a3-ultra")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
async def server(tls: TlsFiles) -> AsyncIterator[Running]:
    srv = await start(Admission(load_profile(GKE)), tls.cert, tls.key, port=0, health_port=0,
                      body_timeout=1.0, reload_interval=0.05)
    yield srv
    await srv.cleanup()


def ctx_for(tls: TlsFiles) -> Any:
    import ssl

    return ssl.create_default_context(cafile=str(tls.ca_path))


async def raw_request(port: int, tls: TlsFiles, head: bytes, body: bytes = b"", *, wait: float = 5.0
                      ) -> tuple[int, bytes, float]:
    """Send ``head`` and ``body`` over TLS without finishing the body; (status, answer, seconds to answer)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx_for(tls))
    t = time.monotonic()
    writer.write(head + body)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(65536), wait)
    took = time.monotonic() - t
    # The server closes the connection after refusing: nothing more arrives.
    rest = await asyncio.wait_for(reader.read(), wait)
    writer.close()
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else 0
    return status, data + rest, took


def head(length: int, extra: str = "") -> bytes:
    return (f"POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n{extra}\r\n").encode()


async def test_declared_body_over_the_limit_is_refused_from_the_header(server: Running, tls: TlsFiles) -> None:
    status, data, took = await raw_request(server.port, tls, head(1_000_000_000), b"{")
    assert status == 413 and b"Content-Length 1000000000" in data
    assert took < 0.9  # at once, not after the 1 s body deadline


async def test_a_body_that_never_arrives_gets_408_at_the_deadline(server: Running, tls: TlsFiles) -> None:
    status, data, took = await raw_request(server.port, tls, head(5000), b'{"apiVersion"')
    assert status == 408 and b"within 1 s" in data
    assert took >= 0.9


async def test_compressed_bodies_are_refused_before_reading(server: Running, tls: TlsFiles) -> None:
    bomb = gzip.compress(b"0" * (64 * 1024 * 1024), compresslevel=9)  # 64 MiB of zeros in ~64 KiB
    for encoding in ("gzip", "deflate", "br"):
        status, data, _ = await raw_request(server.port, tls, head(len(bomb), f"Content-Encoding: {encoding}\r\n"),
                                            bomb)
        assert status == 415 and encoding.encode() in data
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx_for(tls))) as s:
        async with s.post(f"https://127.0.0.1:{server.port}/mutate", json=load_review("job")) as r:
            assert r.status == 200  # and the server is still serving
        async with s.get(f"http://127.0.0.1:{server.health_port}/metrics") as r:
            assert 'outcome="unsupported_encoding"} 3.0' in await r.text()


async def test_deeply_nested_objects_get_an_answer_and_at_most_one_log_line(
        server: Running, tls: TlsFiles, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    sent = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx_for(tls))) as s:
        for depth in (500, 900, 960, 985, 995, 5000):
            review = load_review("pod-owned")
            deep: Any = "x"
            for _ in range(depth):
                deep = {"a": deep}
            review["request"]["object"]["spec"]["containers"][0]["deep"] = deep
            try:
                body = json.dumps(review).encode()
            except RecursionError:  # too deep for the encoder here: write the nesting by hand
                body = json.dumps(load_review("pod-owned")).encode().replace(
                    b'"spec": {', b'"spec": {"deep": ' + b'{"a": ' * depth + b'1' + b'}' * depth + b', ', 1)
            async with s.post(f"https://127.0.0.1:{server.port}/mutate", data=body) as r:
                answer = await r.json()
            sent += 1
            if r.status == 200:
                assert answer["response"]["uid"] == review["request"]["uid"]
            else:
                assert r.status == 400 and "nested too deeply" in answer["error"]
    records = [r for r in caplog.records if r.name.startswith(("fabricguard", "aiohttp"))]
    assert all(r.exc_info is None and "\n" not in r.getMessage() for r in records)
    assert len(records) <= sent


def fan_out_pod(containers: int) -> bytes:
    review = load_review("pod-bare-group")
    pod = review["request"]["object"]
    pod["spec"]["containers"] = [{"name": f"c{i}", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
                                 for i in range(containers)]
    return json.dumps(review, separators=(",", ":")).encode()


@pytest.fixture
async def patient_server(tls: TlsFiles) -> AsyncIterator[Running]:
    srv = await start(Admission(load_profile(GKE)), tls.cert, tls.key, port=0, health_port=0)
    yield srv
    await srv.cleanup()


async def test_a_fan_out_object_is_refused_and_health_stays_answered(patient_server: Running,
                                                                     tls: TlsFiles) -> None:
    server = patient_server
    body = fan_out_pod(20_000)
    assert 1_000_000 < len(body) < 3 * 1024 * 1024  # under the body limit, as in the finding
    health_answers = 0
    done = asyncio.Event()

    async def probe() -> None:
        nonlocal health_answers
        async with aiohttp.ClientSession() as s:
            while not done.is_set():
                async with s.get(f"http://127.0.0.1:{server.health_port}/healthz") as r:
                    assert r.status == 200
                    health_answers += 1
                await asyncio.sleep(0.005)

    async def big(s: aiohttp.ClientSession) -> tuple[int, bytes]:
        async with s.post(f"https://127.0.0.1:{server.port}/mutate", data=body,
                          headers={"Content-Type": "application/json"}) as r:
            return r.status, await r.read()

    prober = asyncio.create_task(probe())
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx_for(tls))) as s:
        answers = await asyncio.gather(*(big(s) for _ in range(8)))
    done.set()
    await prober
    for status, raw in answers:
        assert status == 200, raw[:300]
        resp = json.loads(raw)["response"]
        assert status == 200 and not resp["allowed"]
        assert f"more than the {MAX_CONTAINERS}" in resp["status"]["message"]
        assert len(raw) < 2048  # the answer is bounded, not 55 MB
    assert health_answers >= 2


# ---------------------------------------------------------------------------------------------- certificates


async def peer_cn(port: int, tls: TlsFiles) -> str:
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx_for(tls))
    cert = writer.get_extra_info("peercert")
    writer.close()
    return dict(x[0] for x in cert["subject"])["commonName"]


async def wait_for_cn(port: int, tls: TlsFiles, cn: str) -> str:
    deadline = time.monotonic() + 5
    got = ""
    while time.monotonic() < deadline:
        got = await peer_cn(port, tls)
        if got == cn:
            break
        await asyncio.sleep(0.05)
    return got


async def test_certificate_rotation_is_picked_up(server: Running, tls: TlsFiles, tmp_path: Path) -> None:
    assert await peer_cn(server.port, tls) == "fabricguard-admission one"
    # The kubelet's atomic writer: both files written elsewhere, then renamed into place.
    tls.issue("fabricguard-admission two", tmp_path / "new.crt", tmp_path / "new.key")
    os.replace(tmp_path / "new.key", tls.key)
    os.replace(tmp_path / "new.crt", tls.cert)
    assert await wait_for_cn(server.port, tls, "fabricguard-admission two") == "fabricguard-admission two"


async def test_mismatched_or_half_written_pairs_never_break_handshakes(server: Running, tls: TlsFiles,
                                                                       tmp_path: Path,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="fabricguard.admission")
    gen = server.reloader.generation
    # A certificate written seconds before its key: the new cert does not match the old key.
    new = tls.issue("fabricguard-admission three")
    tls.cert.write_bytes(b"".join(p.bytes() for p in new.cert_chain_pems))
    results = []
    for _ in range(60):
        results.append(await peer_cn(server.port, tls))
        await asyncio.sleep(0.01)
    assert results == ["fabricguard-admission one"] * 60  # every handshake served by the old pair
    assert server.reloader.generation == gen
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "still serving generation 1" in warnings[0]
    # A half-written certificate is not loaded either.
    tls.cert.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n")
    await asyncio.sleep(0.2)
    assert await peer_cn(server.port, tls) == "fabricguard-admission one"
    # Then the matching key and certificate arrive: the new pair is served.
    tls.key.write_bytes(new.private_key_pem.bytes())
    tls.cert.write_bytes(b"".join(p.bytes() for p in new.cert_chain_pems))
    assert await wait_for_cn(server.port, tls, "fabricguard-admission three") == "fabricguard-admission three"
    assert server.reloader.generation == gen + 1


# ---------------------------------------------------------------------------------------------- shutdown


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(port: int, path: str) -> int:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


async def test_sigterm_drains_in_flight_requests_and_keeps_answering(tls: TlsFiles) -> None:
    port, health = free_port(), free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "fabricguard", "admission", "serve", "--profile", str(GKE), "--cert", str(tls.cert),
         "--key", str(tls.key), "--port", str(port), "--health-port", str(health), "--shutdown-delay", "1.5",
         "--shutdown-timeout", "5"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if http_get(health, "/readyz") == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline and proc.poll() is None, "the server did not start"
            await asyncio.sleep(0.1)
        body = json.dumps(load_review("jobset")).encode()
        # A request half sent when SIGTERM arrives.
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx_for(tls))
        writer.write(head(len(body)) + body[:100])
        await writer.drain()
        await asyncio.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.3)
        assert http_get(health, "/readyz") == 503  # not ready first
        assert http_get(health, "/healthz") == 200
        # During the delay new connections are still answered (and told to close).
        async with (aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx_for(tls))) as s,
                    s.post(f"https://127.0.0.1:{port}/mutate", data=body) as r):
            assert r.status == 200 and (await r.json())["response"]["allowed"]
            assert r.headers.get("Connection", "").lower() == "close"
        writer.write(body[100:])
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 10)
        assert answer.startswith(b"HTTP/1.1 200")
        assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["response"]["allowed"]
        writer.close()
        assert proc.wait(15) == 0
        out = proc.stdout.read().decode() if proc.stdout else ""
        assert "draining" in out and "Traceback" not in out
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


class _Broken(Admission):
    """A decision with a bug in it: the server must still answer and log one line."""

    def decide(self, endpoint: Any, req: Any) -> Any:
        raise RuntimeError("boom\nwith a second line")


async def test_a_bug_in_a_decision_is_a_denied_review_and_one_log_line(tls: TlsFiles,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="fabricguard.admission")
    srv = await start(_Broken(load_profile(GKE)), tls.cert, tls.key, port=0)
    try:
        async with (aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx_for(tls))) as s,
                    s.post(f"https://127.0.0.1:{srv.port}/mutate", json=load_review("job")) as r):
            resp = (await r.json())["response"]
    finally:
        await srv.cleanup()
    assert r.status == 200 and not resp["allowed"] and resp["status"]["code"] == 500
    assert "RuntimeError" in resp["status"]["message"]
    [line] = [rec for rec in caplog.records if rec.name == "fabricguard.admission" and rec.levelno >= logging.ERROR]
    assert line.exc_info is None and "\n" not in line.getMessage() and "boom with a second line" in line.getMessage()


async def test_probes_are_answered_while_the_webhook_loop_is_blocked(server: Running) -> None:
    import threading

    assert server.health_port is not None
    answers: list[int] = []
    probe = threading.Thread(target=lambda: answers.append(http_get(server.health_port or 0, "/readyz")))
    probe.start()
    time.sleep(1.0)  # the webhook's event loop does nothing else meanwhile, as in a long synchronous decision
    probe.join(5)
    assert answers == [200]
