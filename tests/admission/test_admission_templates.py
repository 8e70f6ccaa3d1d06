"""The webhook's ResourceClaimTemplate cache: answers from the last list, fails closed before and when it is stale,
and lists through fabricguard.kube from a real HTTP API server (kmock)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kmock import KubernetesEmulator, Server

from fabricguard import names
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


def _served_templates(k8s: Any) -> None:
    k8s["get /version/"] << {"major": "1", "minor": "35", "gitVersion": "v1.35.0", "platform": "linux/amd64"}
    for ns in ("ml-search", "ml-ranking"):
        t = template(ns)
        k8s.objects["resource.k8s.io/v1/resourceclaimtemplates", ns, t["metadata"]["name"]] = {
            k: v for k, v in t.items() if k not in ("kind", "apiVersion")}


WEBHOOK_SA = "system:serviceaccount:fabricguard-system:fabricguard-admission"


async def test_the_lister_runs_under_the_rendered_webhook_role(tmp_path: Path) -> None:
    """The emulator authorizes every request as the webhook's ServiceAccount with the ClusterRole that
    ``render webhook`` builds from WEBHOOK_GRANTS: a call the role does not grant is a 403, and fails here."""
    from fabricguard.admission.render import manifests
    from kube_support import Emulator, Rbac

    objs = manifests("x: y\n", "ghcr.io/acme/fabricguard@sha256:" + "a" * 64, claim_templates=True)
    async with Emulator(rbac=Rbac.from_manifests(objs)) as k8s, Server(k8s) as server:
        k8s.tokens = {"webhook": {"username": WEBHOOK_SA}}
        _served_templates(k8s)
        cache = TemplateCache(kube_lister(kubeconfig(tmp_path, str(server.url).rstrip("/"), "webhook")))
        await cache.refresh()
        await cache.refresh()  # the renewal is the same call
        assert k8s.denied == [] and cache.error is None, (k8s.denied, cache.error)
        assert cache.resolve(claims.TEMPLATE_KIND, "ml-search", "fabricguard-b200-dranet-fabric") is not None
        # The same emulator refuses what the role leaves out: the enforcement is real.
        k8s.rbac = Rbac.from_manifests([o for o in objs if o["kind"] != "ClusterRoleBinding"])
        await cache.refresh()
        assert cache.error is not None and "403" in cache.error and len(k8s.denied) == 1


async def test_a_call_outside_the_webhook_table_is_refused_before_it_is_sent() -> None:
    from fabricguard.admission.templates import WEBHOOK_GRANTS, webhook_permissions
    from fabricguard.kube import Kube, Undeclared

    kube = Kube(None, permissions=webhook_permissions())
    for call in (kube.get(names.DRA_API, "resourceclaimtemplates", "t", "ml-search"),
                 kube.list(names.DRA_API, "resourceclaims")):
        with pytest.raises(Undeclared, match="admission webhook's permission table"):
            await call
    with pytest.raises(Undeclared):
        async for _ev in kube.watch(names.DRA_API, "resourceclaimtemplates"):
            pass
    assert {(g.resource, g.verb) for g in WEBHOOK_GRANTS} == {("resourceclaimtemplates", "list")}
