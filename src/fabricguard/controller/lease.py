"""Leader election on a ``coordination.k8s.io/v1`` Lease, so that two replicas never both act.

The rules are client-go's: the holder renews ``renewTime`` well within ``leaseDurationSeconds``; another
replica takes over only when the lease has expired, and every write carries the ``resourceVersion`` it read
(a merge patch with that precondition), so of two replicas racing for an expired lease the API server accepts
one write and answers 409 to the other.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from fabricguard import names, times
from fabricguard.times import format_micro

LEASE_API = names.LEASE_API


class Step(StrEnum):
    create = "create"
    renew = "renew"
    takeover = "takeover"
    follow = "follow"


def micro(t: datetime) -> str:
    """A Kubernetes MicroTime."""
    return format_micro(t)


def decide(lease: dict[str, Any] | None, identity: str, now: datetime) -> Step:
    if lease is None:
        return Step.create
    spec = lease.get("spec") or {}
    if spec.get("holderIdentity") == identity:
        return Step.renew
    renewed = times.parse_time(spec.get("renewTime")) or times.parse_time(spec.get("acquireTime"))
    duration = int(spec.get("leaseDurationSeconds") or 15)
    if not spec.get("holderIdentity") or renewed is None or now > renewed + timedelta(seconds=duration):
        return Step.takeover
    return Step.follow


def desired(lease: dict[str, Any] | None, identity: str, now: datetime, duration_s: int, step: Step) -> dict[str, Any]:
    spec = dict((lease or {}).get("spec") or {})
    if step in (Step.create, Step.takeover):
        spec["acquireTime"] = micro(now)
        spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if step is Step.takeover else 0)
    spec.update(holderIdentity=identity, leaseDurationSeconds=duration_s, renewTime=micro(now))
    md = dict((lease or {}).get("metadata") or {})
    return {"apiVersion": LEASE_API, "kind": "Lease", "metadata": md, "spec": spec}


async def read_lease(api: Any, namespace: str, name: str = names.CONTROLLER_LEASE) -> dict[str, Any] | None:
    import httpx
    import kr8s

    try:
        async with api.call_api("GET", version=LEASE_API, url=f"namespaces/{namespace}/leases/{name}") as resp:
            lease: dict[str, Any] = resp.json()
    except (httpx.HTTPStatusError, kr8s.ServerError) as exc:
        if exc.response is None or exc.response.status_code != 404:
            raise
        return None
    return lease


async def try_lead(api: Any, namespace: str, identity: str, now: datetime, *, duration_s: int = 15,
                   name: str = names.CONTROLLER_LEASE) -> bool:
    """One election round: True when ``identity`` holds the lease after it."""
    import httpx
    import kr8s

    url = f"namespaces/{namespace}/leases"
    lease = await read_lease(api, namespace, name)
    step = decide(lease, identity, now)
    if step is Step.follow:
        return False
    body = desired(lease, identity, now, duration_s, step)
    try:
        if step is Step.create:
            body["metadata"] = {"name": name, "namespace": namespace}
            async with api.call_api("POST", version=LEASE_API, url=url, json=body):
                pass
        else:
            # A merge patch that carries the resourceVersion it read: the API server applies it only if the
            # lease is unchanged since, and answers 409 otherwise (the same precondition as an update).
            patch = {"metadata": {"resourceVersion": (lease or {}).get("metadata", {}).get("resourceVersion")},
                     "spec": body["spec"]}
            async with api.call_api("PATCH", version=LEASE_API, url=f"{url}/{name}", content=json.dumps(patch),
                                    headers={"Content-Type": "application/merge-patch+json"}):
                pass
    except (httpx.HTTPStatusError, kr8s.ServerError) as exc:
        if exc.response is not None and exc.response.status_code == 409:
            return False  # the other replica won this round
        raise
    return True


def holder(lease: dict[str, Any] | None) -> str | None:
    return ((lease or {}).get("spec") or {}).get("holderIdentity")
