"""``fabricguard.kube``, the one Kubernetes edge, against the test API server over real HTTP: typed errors that
name the server, timeouts, reads retried and writes not, the permission table checked before a request leaves,
and the emulator's RBAC and selectors behaving as an API server's do."""

from __future__ import annotations

import json
import re
import socket
import time
from pathlib import Path
from typing import Any

import attrs
import pytest
from kmock import Server

from fabricguard.kube import Conflict, Forbidden, Gone, Kube, NotFound, TimedOut, Timeouts, Undeclared, Unreachable
from fabricguard.rbac import Permissions, grants, rbac_rules
from kube_support import Emulator, Rbac, attributes, kubeconfig, silent_server

# Short enough to keep the silent-server cases quick, long enough for a loaded CI machine (0.5 s failed there).
FAST = Timeouts(connect=1.0, read=1.0, call=2.0, list=2.5)
ROLE = [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "reader"},
         "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "writer", "namespace": "a"},
         "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "get"]},
                   {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["patch"], "resourceNames": ["mine"]}]}]


@attrs.define(kw_only=True)
class Flaky(Emulator):
    """Answers the first ``fail`` requests with 503 (an API server behind a restarting load balancer)."""

    fail: int = 0
    seen: list[str] = attrs.field(factory=list)

    async def _serve_k8s(self, request: Any) -> Any:
        import aiohttp.web

        self.seen.append(str(request.method.value))
        if self.fail > 0:
            self.fail -= 1
            return aiohttp.web.json_response({"kind": "Status", "code": 503, "message": "try again"}, status=503)
        return await super()._serve_k8s(request)


@pytest.fixture()
async def server(tmp_path: Path):
    k8s = Flaky(rbac=Rbac(admins={"admin"}).bind("ops", ROLE),
                tokens={"ops": {"username": "ops"}, "admin": {"username": "admin"}})
    async with k8s, Server(k8s) as srv:
        url = str(srv.url).rstrip("/")
        k8s.objects["v1/nodes", None, "n1"] = {"metadata": {"name": "n1", "labels": {"pool": "a"}}}
        k8s.objects["v1/nodes", None, "n2"] = {"metadata": {"name": "n2", "labels": {"pool": "b"}}}
        yield k8s, url, tmp_path


async def _kube(url: str, tmp: Path, token: str, **kw: Any) -> Kube:
    return await Kube.connect(kubeconfig(tmp, url, token, name=f"kc-{token}"), timeouts=FAST, **kw)


async def test_refusals_are_typed_and_name_the_server_and_the_object(server) -> None:
    _k8s, url, tmp = server
    kube = await _kube(url, tmp, "ops")
    assert await kube.get("v1", "configmaps", "nope", "a") is None  # a 404 on a get is "absent"
    with pytest.raises(NotFound) as nf:
        await kube.patch("v1", "configmaps", "mine", {"data": {}}, namespace="a", patch_type="merge")
    assert url in str(nf.value) and "/api/v1/namespaces/a/configmaps/mine" in str(nf.value)
    await kube.create("v1", "configmaps", {"metadata": {"name": "mine", "namespace": "a"}})
    with pytest.raises(Conflict):
        await kube.create("v1", "configmaps", {"metadata": {"name": "mine", "namespace": "a"}})
    with pytest.raises(Forbidden) as fb:
        await kube.create("v1", "configmaps", {"metadata": {"name": "x", "namespace": "b"}})
    assert fb.value.status == 403 and 'cannot create resource "configmaps"' in str(fb.value) and url in str(fb.value)
    await kube.close()


async def test_reads_are_retried_writes_are_sent_once(server) -> None:
    k8s, url, tmp = server
    kube = await _kube(url, tmp, "admin")
    k8s.fail, k8s.seen = 2, []
    assert [n["metadata"]["name"] for n in await kube.list("v1", "nodes")] == ["n1", "n2"]
    assert k8s.seen == ["GET", "GET", "GET"]  # two 503s, then the answer
    k8s.fail, k8s.seen = 1, []
    with pytest.raises(Exception) as err:
        await kube.create("v1", "configmaps", {"metadata": {"name": "y", "namespace": "a"}})
    assert getattr(err.value, "status", None) == 503 and k8s.seen == ["POST"]  # never a second create
    await kube.close()


async def test_requests_sent_at_once_on_a_fresh_connection_share_one_session(server, monkeypatch) -> None:
    """kr8s opens its HTTP session on the first request that finds none: sixteen lists sent at once on a fresh
    connection (a controller pass) each opened one and closed the one before, under a request still using it."""
    import asyncio

    import httpx

    opened: list[int] = []
    real_init = httpx.AsyncClient.__init__

    def counting_init(self: httpx.AsyncClient, *args: Any, **kwargs: Any) -> None:
        opened.append(1)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(httpx.AsyncClient, "__init__", counting_init)
    _k8s, url, tmp = server
    kube = await _kube(url, tmp, "admin")
    answers = await asyncio.gather(*(kube.list("v1", "nodes") for _ in range(16)))
    assert all(len(a) == 2 for a in answers)
    assert len(opened) == 1
    other = kube.with_permissions(None)  # the same connection under another table shares the session too
    await asyncio.gather(*(other.list("v1", "nodes") for _ in range(4)))
    assert len(opened) == 1
    await kube.close()


async def test_an_undeclared_call_is_refused_before_it_is_sent(server) -> None:
    k8s, url, tmp = server
    table = Permissions(frozenset(grants("v1", "nodes", ["list"])), "a", "reader")
    kube = await _kube(url, tmp, "admin", permissions=table)
    assert len(await kube.list("v1", "nodes")) == 2
    k8s.seen = []
    with pytest.raises(Undeclared, match="get on nodes is not in the reader's permission table"):
        await kube.get("v1", "nodes", "n1")
    assert k8s.seen == []
    await kube.close()


async def test_no_answer_and_no_listener_are_timed_out_and_unreachable(tmp_path: Path) -> None:
    with silent_server() as silent:
        kube = await Kube.connect(kubeconfig(tmp_path, silent.url), timeouts=FAST)
        t0 = time.monotonic()
        with pytest.raises(TimedOut) as err:
            await kube.list("v1", "nodes")
        took = time.monotonic() - t0
        assert took < FAST.list + 1.5 and silent.url in str(err.value)
        # The seconds it says are the seconds it waited (it used to say the deadline, having given up earlier).
        said = float(re.search(r"no answer within ([0-9.]+) s \((\d+) attempt", str(err.value)).group(1))  # type: ignore[union-attr]
        assert said <= took + 0.01, (said, took, str(err.value))
        t0 = time.monotonic()
        with pytest.raises(TimedOut):
            await kube.patch("v1", "nodes", "n1", {}, patch_type="merge")
        assert time.monotonic() - t0 < FAST.read + 1.5  # a write waits one read timeout, no retry
        await kube.close()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kube = await Kube.connect(kubeconfig(tmp_path, f"http://127.0.0.1:{port}", name="closed"), timeouts=FAST)
    with pytest.raises(Unreachable, match="cannot connect"):
        await kube.get("v1", "nodes", "n1")
    await kube.close()


def test_roles_are_rendered_from_the_table_grouped_by_verbs() -> None:
    table = [*grants("v1", "nodes", ["list", "watch"]), *grants("v1", "pods", ["watch", "list"]),
             *grants("v1", "nodes", ["patch"], subresource="status"),
             *grants("coordination.k8s.io/v1", "leases", ["get"], scope="namespace")]
    assert rbac_rules(table, "cluster") == [
        {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]}]
    assert rbac_rules(table, "namespace") == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get"]}]


def test_the_emulator_authorizes_as_rbac_does() -> None:
    rbac = Rbac().bind("ops", ROLE)
    a = attributes("GET", "/api/v1/nodes/n1", {})
    assert a is not None and rbac.allows("ops", a) and not rbac.allows("someone", a)
    watch = attributes("GET", "/api/v1/nodes", {"watch": "true"})
    assert watch is not None and watch.verb == "watch" and not rbac.allows("ops", watch)
    in_a = attributes("POST", "/api/v1/namespaces/a/configmaps", {})
    in_b = attributes("POST", "/api/v1/namespaces/b/configmaps", {})
    assert in_a and in_b and rbac.allows("ops", in_a) and not rbac.allows("ops", in_b)  # a Role: its namespace
    mine = attributes("PATCH", "/api/v1/namespaces/a/configmaps/mine", {})
    other = attributes("PATCH", "/api/v1/namespaces/a/configmaps/other", {})
    assert mine and other and rbac.allows("ops", mine) and not rbac.allows("ops", other)  # resourceNames
    sub = attributes("PATCH", "/apis/kueue.x-k8s.io/v1beta2/namespaces/x/workloads/w/status", {})
    assert sub is not None and (sub.group, sub.resource, sub.subresource) == ("kueue.x-k8s.io", "workloads", "status")
    assert attributes("GET", "/version", {}) is None


async def test_the_emulator_filters_by_label_and_field_selectors(server) -> None:
    _k8s, url, tmp = server
    kube = await _kube(url, tmp, "admin")
    assert [n["metadata"]["name"] for n in await kube.list("v1", "nodes", label_selector="pool=b")] == ["n2"]
    assert [n["metadata"]["name"] for n in await kube.list("v1", "nodes", field_selector="metadata.name!=n2")] == [
        "n1"]
    await kube.close()


@pytest.mark.parametrize("expire_as", ["event", "http"])
async def test_a_watch_from_a_compacted_version_is_gone_as_the_api_server_says_it(tmp_path: Path, expire_as) -> None:
    """The test API server's compaction answers what a real one does (a Status with reason Expired, code 410, as a
    watch ERROR event or an HTTP 410), and the edge reads either as ``Gone``; an uncompacted version streams
    only what changed after it, a deletion included."""
    k8s = Emulator(versions=True, expire_as=expire_as, rbac=Rbac(admins={"admin"}), tokens={"admin": {"username": "admin"}})
    async with k8s, Server(k8s) as srv:
        url = str(srv.url).rstrip("/")
        kube = await _kube(url, tmp_path, "admin")
        await kube.create("v1", "configmaps", {"metadata": {"name": "old", "namespace": "a"}})
        await kube.create("v1", "configmaps", {"metadata": {"name": "gone", "namespace": "a"}})
        _items, rv = await kube.list_page("v1", "configmaps", "a")
        await kube.create("v1", "configmaps", {"metadata": {"name": "new", "namespace": "a"}})
        await kube.delete("v1", "configmaps", "gone", "a")
        seen: list[tuple[str, str]] = []
        async def first_two() -> None:
            async for ev in kube.watch("v1", "configmaps", "a", resource_version=rv, timeout_s=5):
                seen.append((ev["type"], ev["object"]["metadata"]["name"]))
                if len(seen) == 2:
                    return
        await first_two()
        assert sorted(seen) == [("ADDED", "new"), ("DELETED", "gone")]  # not "old": the list already had it
        k8s.compact()
        with pytest.raises(Gone):
            async for _ev in kube.watch("v1", "configmaps", "a", resource_version=rv, timeout_s=5):
                pass
        status = await _raw_watch_status(url, rv, expire_as)
        assert (status["kind"], status["status"], status["reason"], status["code"]) == ("Status", "Failure", "Expired", 410)
        assert k8s.expired and all(e.endswith(f"@{rv}") for e in k8s.expired)
        await kube.close()


async def _raw_watch_status(url: str, rv: str, expire_as: str) -> dict[str, Any]:
    """The Status a raw watch request from ``rv`` gets: the HTTP 410's body, or the ERROR event's object."""
    import httpx

    http = httpx.AsyncClient(base_url=url, headers={"Authorization": "Bearer admin"})
    try:
        async with http.stream("GET", "/api/v1/namespaces/a/configmaps",
                               params={"watch": "true", "resourceVersion": rv}) as resp:
            if expire_as == "http":
                assert resp.status_code == 410
                return dict(json.loads(await resp.aread()))
            assert resp.status_code == 200
            async for line in resp.aiter_lines():
                if line.strip():
                    ev = json.loads(line)
                    assert ev["type"] == "ERROR"
                    return dict(ev["object"])
        raise AssertionError("the watch ended without an event")
    finally:
        await http.aclose()
