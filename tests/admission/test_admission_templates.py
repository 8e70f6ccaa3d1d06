"""The webhook's ResourceClaimTemplate cache: answers from the last list, fails closed before and when it is stale,
and lists through fabricguard.kube from a real HTTP API server (kmock)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kmock import KubernetesEmulator, Server

from fabricguard.admission import claims
from fabricguard.admission.templates import TemplateCache, kube_lister
from fabricguard.profile import load_profile
from kube_support import kubeconfig

DRANET = load_profile(Path(__file__).resolve().parents[2] / "examples" / "profiles" / "gke-a4-dranet.yaml")


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def template(ns: str) -> dict[str, Any]:
    t = claims.claim_template(DRANET.pool(), ns)
    assert t is not None
    return t


async def test_answers_from_the_last_list_and_fails_closed_when_it_is_stale() -> None:
    clock = Clock()
    answers: list[Any] = [[template("ml-search")], RuntimeError("connection refused")]

    async def lister() -> list[dict[str, Any]]:
        a = answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a

    cache = TemplateCache(lister, max_age=60, clock=clock)
    with pytest.raises(claims.ResolverUnavailable, match="has not been read yet"):
        cache.resolve(claims.TEMPLATE_KIND, "ml-search", "fabricguard-b200-dranet-fabric")
    await cache.refresh()
    assert cache.resolve(claims.TEMPLATE_KIND, "ml-search", "fabricguard-b200-dranet-fabric") is not None
    assert cache.resolve(claims.TEMPLATE_KIND, "other", "fabricguard-b200-dranet-fabric") is None
    await cache.refresh()  # fails: the previous list is still used ...
    clock.t += 30
    assert cache.resolve(claims.TEMPLATE_KIND, "ml-search", "fabricguard-b200-dranet-fabric") is not None
    clock.t += 60  # ... until it is max_age old
    with pytest.raises(claims.ResolverUnavailable, match="connection refused"):
        cache.resolve(claims.TEMPLATE_KIND, "ml-search", "fabricguard-b200-dranet-fabric")


async def test_an_api_server_that_never_answers_is_a_timeout_not_a_hang() -> None:
    async def never() -> list[dict[str, Any]]:
        await asyncio.sleep(3600)
        return []

    cache = TemplateCache(never, timeout=0.05)
    await cache.refresh()
    with pytest.raises(claims.ResolverUnavailable, match=r"took over 0\.05 s"):
        cache.resolve(claims.TEMPLATE_KIND, "ml-search", "x")


async def test_lists_every_template_from_the_api_server(tmp_path: Path) -> None:
    async with KubernetesEmulator() as k8s, Server(k8s) as server:
        k8s["get /version/"] << {"major": "1", "minor": "35", "gitVersion": "v1.35.0", "platform": "linux/amd64"}
        for ns in ("ml-search", "ml-ranking"):
            t = template(ns)
            k8s.objects["resource.k8s.io/v1/resourceclaimtemplates", ns, t["metadata"]["name"]] = {
                k: v for k, v in t.items() if k not in ("kind", "apiVersion")}
        cache = TemplateCache(kube_lister(kubeconfig(tmp_path, str(server.url).rstrip("/"))))
        await cache.refresh()
        assert cache.error is None
        got = cache.resolve(claims.TEMPLATE_KIND, "ml-ranking", "fabricguard-b200-dranet-fabric")
        assert got is not None and claims.claim_classes(got) == {"mrdma.google.com"}
        paths = {r.url.path for r in k8s}
        assert "/apis/resource.k8s.io/v1/resourceclaimtemplates" in paths
