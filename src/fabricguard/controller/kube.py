"""The controller's I/O edge: list the cluster, carry out a pass's actions, and watch for changes (kr8s).

kr8s' object ``patch()`` offers merge and JSON patches only, so status that others share goes through
``fabricguard.kube.Kube.apply``, a server-side apply (``application/apply-patch+yaml`` with our field manager
and ``force``). kr8s' ``async_watch`` does no initial list and keeps a stale ``resourceVersion`` after HTTP 410;
:func:`watch_changes` lists first, watches from the list's version, and relists on 410 or a closed stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from fabricguard import names
from fabricguard import objects as o
from fabricguard.controller.actions import Action, Annotate, ApplyStatus, Create, Delete, Emit, MergePatch, MergeStatus
from fabricguard.doctor.snapshot import LIVE_RESOURCES, Snapshot, collect_live, snapshot_from_lists
from fabricguard.kube import Kube, KubeError

log = logging.getLogger("fabricguard.controller")

CONTROLLER_RESOURCES: tuple[tuple[str, str, str], ...] = (
    (names.FV_API, names.FV_PLURAL, names.FV_KIND),
    (names.KUEUE_API, "admissionchecks", "AdmissionCheck"),
    (names.JOBSET_API, "jobsets", "JobSet"),
    (names.BATCH_API, "jobs", "Job"),
    (names.TRAINJOB_API, "trainjobs", "TrainJob"),
)
ALL_RESOURCES = LIVE_RESOURCES + CONTROLLER_RESOURCES
# Read only for a profile with DRA claim pools: which namespaces opted in (they get the pools' templates).
CLAIM_RESOURCES: tuple[tuple[str, str, str], ...] = (("v1", "namespaces", "Namespace"),)


async def list_cluster(kubeconfig: str | None, context: str | None,
                       extra: tuple[tuple[str, str, str], ...] = ()) -> Snapshot:
    """Every resource the pass reads, as one snapshot, through the doctor's paged collector (GET only)."""
    lists = await collect_live(kubeconfig=kubeconfig, context=context, resources=ALL_RESOURCES + extra)
    return snapshot_from_lists(lists, source="live")


async def apply_actions(api: Any, actions: list[Action], known: dict[tuple[str, str], dict[str, Any]],
                        leading: Callable[[], bool] | None = None) -> list[str]:
    """Carry out the actions in order; ``known`` holds listed objects by (plural, name) for owner uids.

    Returns one line per action that failed (the pass goes on: the next pass retries what is still wanted).
    ``leading`` is asked before each action: a replica that lost the Lease mid-pass stops writing.
    """
    kube = api if isinstance(api, Kube) else Kube(api)
    errors: list[str] = []
    for a in actions:
        if leading is not None and not leading():
            errors.append(f"lost the Lease: {len(actions) - actions.index(a)} action(s) left to the new leader")
            break
        try:
            await _apply_one(kube, a, known)
        except KubeError as exc:
            if isinstance(a, Create) and exc.status == 409:
                continue  # already there (a previous pass or the other replica): the state we wanted
            if isinstance(a, Emit) and exc.status == 409:
                continue  # the same event (its name is derived from object, reason, message and time)
            errors.append(f"{type(a).__name__} {getattr(a, 'plural', 'events')}/{getattr(a, 'name', '')}: "
                          f"HTTP {exc.status or '?'}: {exc}")
    return errors


async def _apply_one(kube: Kube, a: Action, known: dict[tuple[str, str], dict[str, Any]]) -> None:
    if isinstance(a, Create):
        body = a.body
        if a.owner is not None and a.owner in known:
            body = json.loads(json.dumps(body))
            body["metadata"]["ownerReferences"] = [o.owner_ref(known[a.owner], names.FV_API, names.FV_KIND)]
        if a.namespace:
            body = {**body, "metadata": {**body["metadata"], "namespace": a.namespace}}
        known[(a.plural, a.name)] = await kube.create(a.api_version, a.plural, body)
    elif isinstance(a, Delete):
        await kube.delete(a.api_version, a.plural, a.name, a.namespace, propagation="Background")
    elif isinstance(a, ApplyStatus):
        await kube.apply(a.api_version, a.plural, a.name, a.body(), namespace=a.namespace, subresource="status",
                         field_manager=names.CONTROLLER_FIELD_MANAGER)
    elif isinstance(a, MergeStatus):
        await kube.patch(a.api_version, a.plural, a.name, {"status": a.status}, namespace=a.namespace,
                         subresource="status", patch_type="merge", field_manager=names.CONTROLLER_FIELD_MANAGER)
    elif isinstance(a, Annotate):
        await kube.patch(a.api_version, a.plural, a.name, {"metadata": {"annotations": a.annotations}},
                         namespace=a.namespace, patch_type="merge", field_manager=names.CONTROLLER_FIELD_MANAGER)
    elif isinstance(a, MergePatch):
        await kube.patch(a.api_version, a.plural, a.name, a.body, namespace=a.namespace, patch_type="merge",
                         field_manager=names.CONTROLLER_FIELD_MANAGER)
    elif isinstance(a, Emit):
        await kube.create("v1", "events", a.body)


# What wakes a pass early: (apiVersion, plural, labelSelector). Only canary pods: every other pod change in a
# large cluster would keep the controller busy for nothing, and the periodic pass sees them anyway.
WATCHED: tuple[tuple[str, str, str | None], ...] = (
    (names.JOBSET_API, "jobsets", None),
    ("v1", "pods", names.LABEL_CANARY_POOL),
    (names.KUEUE_API, "workloads", None),
    (names.FV_API, names.FV_PLURAL, None),
)


async def watch_changes(api: Any, api_version: str, plural: str, wake: asyncio.Event,
                        stop: asyncio.Event, *, selector: str | None = None, timeout_s: int = 300) -> None:
    """Set ``wake`` on every change of ``plural``. Lists first for a resourceVersion; relists on 410 or EOF."""
    import httpx
    import kr8s

    backoff = 1.0
    while not stop.is_set():
        started = time.monotonic()
        try:
            sel: dict[str, Any] = {"labelSelector": selector} if selector else {}
            async with api.call_api("GET", version=api_version, url=plural, params={"limit": 1, **sel}) as first:
                body = first.json()
            rv = (body.get("metadata") or {}).get("resourceVersion") or ""
            params: dict[str, Any] = {"watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": timeout_s,
                                      **sel}
            if rv and rv != "...":
                params["resourceVersion"] = rv
            async with api.call_api("GET", version=api_version, url=plural, params=params, stream=True,
                                    timeout=None) as resp:
                async for line in resp.aiter_lines():
                    if stop.is_set():
                        return
                    if not line.strip():
                        continue
                    try:
                        ev = json.loads(line)
                    except ValueError:
                        continue
                    if ev.get("type") == "ERROR":
                        break  # 410 Gone (or another error): relist with a fresh resourceVersion
                    if ev.get("type") != "BOOKMARK":
                        wake.set()
        except (httpx.HTTPError, kr8s.ServerError) as exc:
            log.info("watch %s: %s; relisting", plural, exc)
        except asyncio.CancelledError:
            return
        # A stream that ends at once (an error, a server that closes watches) must not become a busy loop.
        backoff = 1.0 if time.monotonic() - started > 30 else min(backoff * 2, 30.0)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=backoff)
