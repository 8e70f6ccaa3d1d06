"""tests/kmock_speed.py answers kmock's "is this request in that view" from the view's filter chain instead of walking
every recorded request; this checks that answer against kmock's own for filter, priority and slice views."""

from __future__ import annotations

import httpx
from kmock import KubernetesEmulator, Server

import kmock_speed


async def test_the_chain_answer_is_kmocks_answer() -> None:
    # The conftest pytest loaded, not a second copy: kmock's own answer must really be kmock's.
    assert kmock_speed._kmock_contains.__module__ == "kmock._internal.dsl"
    k8s = KubernetesEmulator()
    async with k8s, Server(k8s) as server:
        k8s["get /version/"] << {"major": "1", "minor": "31"}
        views = [k8s["get /version/"], k8s["get"], k8s["post"], k8s["get /version/"] ** 5, k8s["get"][:1]]
        async with httpx.AsyncClient(base_url=str(server.url)) as client:
            for _ in range(3):
                await client.get("/version/")
                await client.get("/api/v1/nodes")
        requests = list(k8s)
        assert len(requests) == 6
        for view in views:
            for req in requests:
                assert kmock_speed._view_contains(view, req) == kmock_speed._kmock_contains(view, req), (view, req)
        # The shortcut really is taken for plain filters (a slice falls back to kmock's walk).
        assert kmock_speed._chain_holds(views[0], requests[0]) is True
        assert kmock_speed._chain_holds(views[4], requests[0]) is None
