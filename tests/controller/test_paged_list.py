"""Lists that always finish: a list the server answers page by page has a deadline per page, not per list, and
the cache trims each page as it arrives; a relist under way is said in the pass's notes, never waited on silently.

The test API server here pages as kube-apiserver does (``limit`` and an opaque ``continue`` token) and answers each
request after ``delay_s``: ten pages of 0.5 s each take over 5 s, more than the 3 s list deadline.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
from controller_support import PROFILE
from kmock import Server

from fabricguard.controller.kube import Cache, Informer, Read, _list
from fabricguard.kube import Kube, TimedOut, Timeouts
from fabricguard.profile import loads_profile

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench" / "controller"))
import realistic  # noqa: E402

from kube_support import Emulator, kubeconfig  # noqa: E402

PAGED = Timeouts(connect=2.0, read=3.0, call=3.0, list=3.0)


@attrs.define(kw_only=True)
class Paging(Emulator):
    """Serves lists in pages of ``limit`` items, the continue token being the offset (opaque to clients)."""

    pages_served: int = 0

    async def _serve_list(self, request: Any) -> Any:
        out = await super()._serve_list(request)
        params = dict(request.params)
        limit = int(params.get("limit") or 0)
        start = int(params.get("continue") or 0)
        items = out["items"]
        self.pages_served += 1
        if limit and start + limit < len(items):
            out["metadata"]["continue"] = str(start + limit)
        out["items"] = items[start : start + limit] if limit else items
        return out


@pytest.fixture()
async def paging(tmp_path: Path):
    k8s = Paging(delay_s=0.5)
    async with k8s, Server(k8s) as srv:
        for i in range(600):
            p = realistic.pod(i, f"n{i % 7}")
            k8s.objects["v1/pods", p["metadata"]["namespace"], p["metadata"]["name"]] = p
        kube = await Kube.connect(kubeconfig(tmp_path, str(srv.url).rstrip("/"), "t"), timeouts=PAGED)
        yield k8s, kube
        await kube.close()


@pytest.mark.slow
async def test_a_list_longer_than_its_deadline_finishes_page_by_page_trimmed(paging) -> None:
    k8s, kube = paging
    with pytest.raises(TimedOut):  # one deadline for the whole list: it runs out before the last page
        async for _page in kube.pages("v1", "pods", limit=60):
            pass
    k8s.pages_served = 0
    items = []
    async for page in kube.pages("v1", "pods", limit=60, per_page=True):
        items += page
    assert len(items) == 600 and k8s.pages_served == 10
    got, _rv, note = await _list(kube, Read("v1", "pods", "Pod"))  # the cache's own list: 500 a page
    assert note is None and len(got) == 600
    assert not any("managedFields" in p["metadata"] or "env" in p["spec"]["containers"][0] for p in got)


@pytest.mark.slow
async def test_a_relist_under_way_is_said_and_the_pass_reads_the_previous_list(paging) -> None:
    k8s, kube = paging
    cache = Cache(kube, loads_profile(PROFILE), "fabricguard-system")
    inf = Informer(kube, Read("v1", "pods", "Pod"))
    cache.informers = [inf]  # the pods alone
    wake, stop = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(inf.run(wake, stop, watch_timeout_s=5))
    for _ in range(100):
        if inf.synced:
            break
        await asyncio.sleep(0.1)
    assert inf.synced and len(cache.snapshot().pods) == 600
    k8s.expire_every_watch = True  # the next watch is 410 Gone: the informer lists again (0.5 s a page, 2 pages)
    k8s.end_watches()
    for _ in range(300):
        notes = cache.snapshot().notes
        if notes:
            break
        await asyncio.sleep(0.05)
    assert notes and "listing again" in notes[0] and "reads the previous list" in notes[0]
    assert len(cache.snapshot().pods) == 600  # the previous list, whole
    stop.set()
    await asyncio.wait_for(task, 10)
