"""Leader election on a ``coordination.k8s.io/v1`` Lease, so that two replicas never both act.

The rules are client-go's: the holder renews well within ``leaseDurationSeconds``; another replica takes over
only when the lease has expired **by its own clock**: it remembers when it *observed* the Lease record change
(holder, renewTime, resourceVersion) on its monotonic clock, and takes over only once a full lease duration has
passed since without a change. The ``renewTime`` the holder wrote is never compared with the follower's wall
clock, so a follower whose clock runs minutes ahead does not take over from a live holder (client-go
``leaderelection.go``: ``observedTime``, ``observedRecord``). Every write carries the ``resourceVersion`` it
read (a merge patch with that precondition), so of two replicas racing for an expired lease the API server
accepts one write and answers 409 to the other.

A holder renews with **one request**: a merge patch carrying the resourceVersion of the Lease its last write
returned (client-go reads first, which doubles the time a renewal takes on a slow API server). A 409 means
someone else wrote the Lease since: the next round reads it again. :func:`lease_duration` sizes the duration
from the request latency the client measured, so a slow server does not eat the holder's whole window.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from fabricguard import names, times
from fabricguard.controller.kube import LEASE_API
from fabricguard.kube import Conflict, Kube, NotFound
from fabricguard.times import format_micro

__all__ = ["LEASE_API", "Elector", "Step", "decide", "decide_observed", "desired", "holder", "lease_duration", "micro",
           "read_lease", "release"]

# A renewal is due every third of the duration; the lease is long enough when a renewal that takes the slowest
# recent request time, twice (a retry), still leaves most of the window to act in.
LATENCY_FACTOR = 6
MAX_DURATION_S = 120


class Step(StrEnum):
    create = "create"
    renew = "renew"
    takeover = "takeover"
    follow = "follow"


def micro(t: datetime) -> str:
    """A Kubernetes MicroTime."""
    return format_micro(t)


def decide(lease: dict[str, Any] | None, identity: str, now: datetime) -> Step:
    """A one-shot reader's guess from the holder's written renewTime (``--once`` asks whether a controller is
    running); an elector decides with :func:`decide_observed` instead, on its own clock."""
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


def _record(lease: dict[str, Any] | None) -> tuple[Any, ...]:
    """What a change of the Lease is seen by: its holder, renewal and version."""
    spec = (lease or {}).get("spec") or {}
    return (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseTransitions"),
            ((lease or {}).get("metadata") or {}).get("resourceVersion"))


def decide_observed(lease: dict[str, Any] | None, identity: str, observed_at: float, mono_now: float) -> Step:
    """client-go's rule: take over a held lease only when a full ``leaseDurationSeconds`` has passed, on this
    replica's monotonic clock, since it observed the record change; the holder's written times are not read."""
    if lease is None:
        return Step.create
    spec = lease.get("spec") or {}
    if spec.get("holderIdentity") == identity:
        return Step.renew
    duration = int(spec.get("leaseDurationSeconds") or 15)
    if not spec.get("holderIdentity") or mono_now > observed_at + duration:
        return Step.takeover
    return Step.follow


def lease_duration(configured_s: int, latency_s: float) -> int:
    """The ``leaseDurationSeconds`` to write: the configured one, longer when requests are slow (at most 120 s)."""
    return min(MAX_DURATION_S, max(configured_s, math.ceil(latency_s * LATENCY_FACTOR)))


def desired(lease: dict[str, Any] | None, identity: str, now: datetime, duration_s: int, step: Step) -> dict[str, Any]:
    spec = dict((lease or {}).get("spec") or {})
    if step in (Step.create, Step.takeover):
        spec["acquireTime"] = micro(now)
        spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if step is Step.takeover else 0)
    spec.update(holderIdentity=identity, leaseDurationSeconds=duration_s, renewTime=micro(now))
    md = dict((lease or {}).get("metadata") or {})
    return {"apiVersion": LEASE_API, "kind": "Lease", "metadata": md, "spec": spec}


async def read_lease(kube: Kube, namespace: str, name: str = names.CONTROLLER_LEASE) -> dict[str, Any] | None:
    return await kube.get(LEASE_API, "leases", name, namespace)


async def _write(kube: Kube, namespace: str, name: str, lease: dict[str, Any] | None, body: dict[str, Any],
                 step: Step) -> dict[str, Any]:
    if step is Step.create:
        body["metadata"] = {"name": name, "namespace": namespace}
        return await kube.create(LEASE_API, "leases", body)
    # A merge patch that carries the resourceVersion it read: the API server applies it only if the lease is
    # unchanged since, and answers 409 otherwise (the same precondition as an update).
    patch = {"metadata": {"resourceVersion": (lease or {}).get("metadata", {}).get("resourceVersion")},
             "spec": body["spec"]}
    return await kube.patch(LEASE_API, "leases", name, patch, namespace=namespace, patch_type="merge")


class Elector:
    """One replica's side of the election; remembers the Lease its last write returned, so a renewal is one
    request."""

    def __init__(self, kube: Kube, namespace: str, identity: str, *, name: str = names.CONTROLLER_LEASE) -> None:
        self.kube = kube
        self.namespace = namespace
        self.identity = identity
        self.name = name
        self.held: dict[str, Any] | None = None  # the Lease as our last successful write left it
        # client-go's observedRecord/observedTime: the record as last read, and when (monotonic) it changed.
        self.observed: tuple[Any, ...] | None = None
        self.observed_at = 0.0

    def observe(self, lease: dict[str, Any] | None, mono_now: float) -> None:
        record = _record(lease)
        if record != self.observed:
            self.observed, self.observed_at = record, mono_now

    async def round(self, now: datetime, duration_s: int | Callable[[], int], mono: float | None = None) -> bool:
        """One election round: True when this replica holds the lease after it. ``duration_s`` may be a function,
        asked just before the write (so a read that was slow already lengthens the lease it writes). ``now``
        is only written (renewTime, acquireTime); expiry is judged on ``mono`` (default: ``time.monotonic()``)."""
        def duration() -> int:
            return duration_s() if callable(duration_s) else duration_s

        mono_now = time.monotonic() if mono is None else mono

        if self.held is not None:
            body = desired(self.held, self.identity, now, duration(), Step.renew)
            try:
                self.held = await _write(self.kube, self.namespace, self.name, self.held, body, Step.renew) or body
                self.observe(self.held, mono_now)
                return True
            except (Conflict, NotFound):
                self.held = None  # someone else wrote it (or deleted it): read it again below
        lease = await read_lease(self.kube, self.namespace, self.name)
        self.observe(lease, mono_now)
        step = decide_observed(lease, self.identity, self.observed_at, mono_now)
        if step is Step.follow:
            return False
        body = desired(lease, self.identity, now, duration(), step)
        try:
            self.held = await _write(self.kube, self.namespace, self.name, lease, body, step) or body
        except Conflict:
            return False  # the other replica won this round
        self.observe(self.held, mono_now)
        return True

    async def release(self, now: datetime) -> bool:
        """Give the Lease up (holder cleared), so a follower takes over at once; False if we no longer held it."""
        lease = self.held or await read_lease(self.kube, self.namespace, self.name)
        self.held = None
        if lease is None or holder(lease) != self.identity:
            return False
        spec = {**(lease.get("spec") or {}), "holderIdentity": "", "renewTime": micro(now)}
        try:
            await self.kube.patch(LEASE_API, "leases", self.name,
                                  {"metadata": {"resourceVersion": lease.get("metadata", {}).get("resourceVersion")},
                                   "spec": spec}, namespace=self.namespace, patch_type="merge")
        except (Conflict, NotFound):
            return False
        return True


async def release(kube: Kube, namespace: str, identity: str, now: datetime, name: str = names.CONTROLLER_LEASE) -> bool:
    return await Elector(kube, namespace, identity, name=name).release(now)


def holder(lease: dict[str, Any] | None) -> str | None:
    return ((lease or {}).get("spec") or {}).get("holderIdentity")
