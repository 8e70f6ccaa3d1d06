"""The HTTPS webhook with real TLS clients: answers, errors, metrics, the health port and fuzzed input."""

from __future__ import annotations

import asyncio
import http.client
import json
import ssl
import threading
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from admission_support import PROFILES, TlsFiles, load_review, make_tls
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabricguard.admission import review as rv
from fabricguard.admission.decide import Admission
from fabricguard.admission.server import Running, start
from fabricguard.profile import load_profile

GKE = next(p for p in PROFILES if p.stem == "gke-a3-ultra")
MAX_BODY = 256 * 1024


def client_ctx(tls: TlsFiles) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(tls.ca_path))


async def test_real_https_client_gets_patch_and_denials(tls: TlsFiles) -> None:
    srv = await start(Admission(load_profile(GKE)), tls.cert, tls.key, port=0, max_body=MAX_BODY, health_port=0)
    base = f"https://127.0.0.1:{srv.port}"
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_ctx(tls))) as s:
            review = load_review("jobset")
            async with s.post(f"{base}/mutate", json=review) as r:
                assert r.status == 200 and r.content_type == "application/json"
                body = await r.json()
            assert body["apiVersion"] == "admission.k8s.io/v1"
            assert body["response"]["uid"] == review["request"]["uid"]
            assert body["response"]["patchType"] == "JSONPatch"
            assert rv.decode_patch(body)
            async with s.post(f"{base}/validate", json=review) as r:
                body = await r.json()
            assert body["response"]["allowed"] is False
            for path, status in (("/healthz", 200), ("/readyz", 200)):
                async with s.get(base + path) as r:
                    assert r.status == status
            async with s.post(f"{base}/mutate", data=b"not json") as r:
                assert r.status == 400 and "not JSON" in (await r.json())["error"]
            async with s.post(f"{base}/mutate", data=b"x" * (MAX_BODY + 1)) as r:
                assert r.status == 413
            async with s.get(f"{base}/mutate") as r:
                assert r.status == 405
        # Health and metrics on the plain-HTTP port, where probes never wait behind TLS work.
        async with aiohttp.ClientSession() as s:
            health = f"http://127.0.0.1:{srv.health_port}"
            for path in ("/healthz", "/readyz"):
                async with s.get(health + path) as r:
                    assert r.status == 200 and await r.text() == "ok"
            async with s.get(f"{health}/metrics") as r:
                text = await r.text()
            assert 'fabricguard_admission_requests_total{endpoint="mutate",outcome="patched"} 1.0' in text
            assert 'fabricguard_admission_requests_total{endpoint="mutate",outcome="too_large"} 1.0' in text
            assert 'fabricguard_admission_requests_total{endpoint="validate",outcome="denied"} 1.0' in text
            # The health port serves nothing else (the one bounded server answers GET and HEAD only).
            async with s.post(f"{health}/mutate", json=review) as r:
                assert r.status == 405
            async with s.get(f"{health}/mutate") as r:
                assert r.status == 404
        # A plain-HTTP client gets no answer from the TLS port, and the server keeps serving.
        with pytest.raises(aiohttp.ClientError):
            async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{srv.port}/healthz") as r:
                await r.read()
    finally:
        await srv.cleanup()


# ---------------------------------------------------------------------------------------------- fuzzing


class _Background:
    """The server on its own event loop in a thread, for synchronous (hypothesis) clients."""

    def __init__(self, tls: TlsFiles) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        fut = asyncio.run_coroutine_threadsafe(
            start(Admission(load_profile(GKE)), tls.cert, tls.key, port=0, max_body=MAX_BODY), self.loop)
        self.running: Running = fut.result(10)
        self.port = self.running.port
        self.ctx = client_ctx(tls)

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=10)
        try:
            conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.running.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture(scope="module")
def background(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Background]:
    srv = _Background(make_tls(tmp_path_factory.mktemp("tls"), "fuzz"))
    yield srv
    srv.close()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=10), kids, max_size=4),
    max_leaves=20,
)
FIELDS = ["apiVersion", "kind", "request", "request.uid", "request.kind", "request.operation", "request.object",
          "request.object.spec", "request.object.metadata", "request.object.spec.replicatedJobs",
          "request.object.spec.trainer", "request.namespace", "request.dryRun", "request.object.kind",
          "request.object.apiVersion"]


def _set(doc: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    cur: Any = doc
    for p in parents:
        if not isinstance(cur, dict) or not isinstance(cur.get(p), dict):
            return
        cur = cur[p]
    if value is _DELETE:
        cur.pop(last, None)
    else:
        cur[last] = value


_DELETE = object()


@st.composite
def bad_bodies(draw: st.DrawFn) -> bytes:
    choice = draw(st.integers(0, 3))
    if choice == 0:
        return draw(st.binary(max_size=200))
    if choice == 1:
        return json.dumps(draw(json_values)).encode()
    review = load_review(draw(st.sampled_from(["jobset", "trainjob", "job", "pod-owned", "pod-bare-group"])))
    for _ in range(draw(st.integers(1, 3))):
        field = draw(st.sampled_from(FIELDS))
        _set(review, field, _DELETE if draw(st.booleans()) else draw(json_values))
    return json.dumps(review).encode()


def _check_answer(status: int, raw: bytes, sent: bytes) -> None:
    assert status in (200, 400, 413), status
    body = json.loads(raw)
    if status != 200:
        assert body["error"]
        return
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    resp = body["response"]
    assert isinstance(resp["allowed"], bool)
    if not resp["allowed"]:
        assert resp["status"]["message"]
    assert resp["uid"] == json.loads(sent)["request"]["uid"]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=bad_bodies(), endpoint=st.sampled_from(["/mutate", "/validate"]))
def test_fuzzed_bodies_always_get_a_proper_answer(background: _Background, body: bytes, endpoint: str) -> None:
    status, raw = background.post(endpoint, body)
    _check_answer(status, raw, body)


@settings(max_examples=300, deadline=None)
@given(body=bad_bodies(), endpoint=st.sampled_from(["mutate", "validate", "review"]))
def test_fuzzed_bodies_never_raise_in_the_decision(body: bytes, endpoint: str) -> None:
    d = _ADMISSION.handle(endpoint, body)  # type: ignore[arg-type]
    assert d.outcome != "error"
    _check_answer(d.status, json.dumps(d.body).encode(), body)


_ADMISSION = Admission(load_profile(GKE))


def test_huge_and_empty_bodies(background: _Background) -> None:
    status, raw = background.post("/mutate", b"{" * (4 * MAX_BODY))
    assert status == 413 and b"--max-body" in raw
    status, _ = background.post("/validate", b"")
    assert status == 400
    # Deeply nested JSON under the size limit is a 400, not a RecursionError.
    status, _ = background.post("/mutate", b"[" * 100_000 + b"]" * 100_000)
    assert status == 400
    status, raw = background.post("/mutate", json.dumps(load_review("job")).encode())
    assert status == 200 and json.loads(raw)["response"]["allowed"]
