"""The controller's I/O edge: what it may do (its permission table), what it reads, and how it writes a pass.

Everything goes through ``fabricguard.kube.Kube`` (timeouts, typed errors, the permission check):

* :data:`CONTROLLER_GRANTS` is the one table of what the controller's calls need. The client refuses a call
  outside it, and ``render controller`` builds the ClusterRole and Role from it (``fabricguard.kube.rbac_rules``).
* :func:`reads` says what a pass lists: label and field selectors and the profile's namespaces where the pass
  needs less than everything (Warning events only, no finished pods except the canaries', ConfigMaps only where
  drift looks). :func:`list_cluster` lists them once (``--once``); :class:`Cache` keeps them fed by watches for
  the long-running loop, so a pass reads memory instead of relisting the cluster every 30 s.
* The controller's own lister is strict: a kind the pass needs that cannot be read (403, or 404 for one that
  must exist) fails the pass loudly (:class:`ReadFailed`). Unlike the doctor's audit, nothing is "skipped": a
  403 on FabricValidations would wipe a pool's history, a 403 on pods would call a running canary unschedulable.
  Only a CRD that is not installed (404 on an optional kind such as Kueue's) is left out, with a note.
* :func:`apply_actions` carries out a pass's actions; status that others share goes through a server-side
  apply (``Kube.apply``) with our field manager.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from fabricguard import kinds, names
from fabricguard import objects as o
from fabricguard.controller.actions import (
    Action,
    Annotate,
    ApplyStatus,
    Create,
    Delete,
    Emit,
    JsonPatch,
    MergePatch,
    MergeStatus,
)
from fabricguard.controller.facts import not_served_note
from fabricguard.controller.trim import trim
from fabricguard.doctor.diff import drift_scope
from fabricguard.doctor.snapshot import LIVE_RESOURCES, Snapshot
from fabricguard.kube import Conflict, Forbidden, Gone, Kube, KubeError, NotFound, TimedOut, Unreachable
from fabricguard.profile.model import PlatformProfile
from fabricguard.rbac import Grant, Permissions, grants

log = logging.getLogger("fabricguard.controller")
SUCCEEDED = "status.phase=Succeeded"

LEASE_API = names.LEASE_API
CONTROLLER_RESOURCES: tuple[tuple[str, str, str], ...] = (
    (names.FV_API, names.FV_PLURAL, names.FV_KIND),
    (names.KUEUE_API, "admissionchecks", "AdmissionCheck"),
    *((k.api_version, k.plural, k.kind) for k in kinds.MANAGED),  # every kind it follows and judges
    # blast.py: the pools' NodeReadinessRules, whose dryRun follows the mode and the breakers (optional: NRC).
    (names.NRR_API, "nodereadinessrules", "NodeReadinessRule"),
    # pairs.py: fabricguard's DeviceTaintRules on bad NICs (optional: resource.k8s.io/v1 serves them from 1.37).
    (names.DRA_API, "devicetaintrules", "DeviceTaintRule"),
)
# Read only for a profile with DRA claim pools: which namespaces opted in (they get the pools' templates).
CLAIM_RESOURCES: tuple[tuple[str, str, str], ...] = (("v1", "namespaces", "Namespace"),)
# Kinds every API server serves, and the controller's own CRD: a 404 on them is a broken cluster, not "absent".
REQUIRED = frozenset({"nodes", "pods", "events", "configmaps", "daemonsets", "deployments", "controllerrevisions",
                      "mutatingwebhookconfigurations", "validatingwebhookconfigurations", "namespaces",
                      names.FV_PLURAL})

# ------------------------------------------------------------------------------------ permission table

# `fabricguard breaker status|reset` (controller/commands.py): read the pools' FabricValidations, reset a breaker.
BREAKER_GRANTS: frozenset[Grant] = frozenset([
    *grants(names.FV_API, names.FV_PLURAL, ["get", "list"]),
    *grants(names.FV_API, names.FV_PLURAL, ["patch"], subresource="status"),
])


def breaker_permissions() -> Permissions:
    return Permissions(BREAKER_GRANTS, "", "breaker")


# What the controller's code calls, and nothing else. Reads: list and watch of every kind a pass reads. Writes:
# next to the action that makes them (canaries.py, gate.py, jobs.py, live.py, lease.py, runner.py).
CONTROLLER_GRANTS: frozenset[Grant] = frozenset([
    *(g for v, plural, _k in (*LIVE_RESOURCES, *CONTROLLER_RESOURCES, *CLAIM_RESOURCES) if plural != "configmaps"
      for g in grants(v, plural, ["list", "watch"])),
    # ConfigMaps only where drift compares them (kube-system, the device plugins' namespaces, its own): a Role in
    # each (controller_watched), never every namespace's (tenants keep configuration there).
    *grants("v1", "configmaps", ["list", "watch"], scope="watched"),
    # claims.py: one ResourceClaimTemplate per opted-in namespace and DRA claim pool (created, or replaced).
    *grants(names.DRA_API, "resourceclaimtemplates", ["create", "delete"]),
    # runner.read_reference: GET of the --reference ConfigMap (in a watched namespace: the own one, by default).
    *grants("v1", "configmaps", ["get"], scope="watched"),
    # canaries.py: the pool's FabricValidation (create) and its status (merge patch).
    *grants(names.FV_API, names.FV_PLURAL, ["create"]),
    *grants(names.FV_API, names.FV_PLURAL, ["patch"], subresource="status"),
    # blast.py: dryRun of the pools' NodeReadinessRules; the readiness taints of nodes behind an open breaker.
    *grants(names.NRR_API, "nodereadinessrules", ["patch"]),
    *grants("v1", "nodes", ["patch"]),
    # gate.py: our admission check's entry on Workloads and the AdmissionCheck's Active condition (apply).
    *grants(names.KUEUE_API, "workloads", ["patch"], subresource="status"),
    *grants(names.KUEUE_API, "admissionchecks", ["patch"], subresource="status"),
    # live.py, onFallback stop: spec.active=false on the running job's Workload (a merge patch of the object).
    *grants(names.KUEUE_API, "workloads", ["patch"]),
    # jobs.py and live.py: the verdict annotation on managed jobs (and onFallback stop on a job without Kueue).
    *(g for k in kinds.MANAGED for g in grants(k.api_version, k.plural, ["patch"])),
    # hang.py: NCCL's RAS asked from inside one pod of a job whose collectives stalled (python3 -c nccl.ras.CLIENT).
    # The exec is a websocket upgrade (a GET): API servers authorize it as get, and from 1.35 as create too.
    *grants("v1", "pods", ["get", "create"], subresource="exec"),
    # pairs.py: fabricguard's quarantine taint and the last-proven annotation (a merge patch of the Node), and
    # the FabricProven condition (apply of the Node's status).
    *grants("v1", "nodes", ["patch"]),
    *grants("v1", "nodes", ["patch"], subresource="status"),
    # pairs.py: a DeviceTaintRule on just the bad NIC of a convicted node of a DRA claim pool (deleted on release).
    *grants(names.DRA_API, "devicetaintrules", ["create", "delete"]),
    # actions.Emit: Events on the objects the controller judges.
    *grants("v1", "events", ["create"]),
    # canaries.py: canaries run in the controller's namespace only.
    *grants(names.JOBSET_API, "jobsets", ["create", "delete"], scope="namespace"),
    # lease.py: leader election.
    *grants(LEASE_API, "leases", ["get", "create", "patch"], scope="namespace"),
])


def controller_watched(profile: PlatformProfile, namespace: str, *extra: str) -> frozenset[str]:
    """The namespaces whose ConfigMaps the controller reads: where drift compares them, and its own (the
    ``--reference`` ConfigMap's home by default; ``extra`` adds the one ``--reference`` names)."""
    return frozenset({*drift_scope([profile]).configmap_namespaces, namespace, *extra})


def controller_permissions(namespace: str, profile: PlatformProfile | None = None, *extra: str) -> Permissions:
    watched = controller_watched(profile, namespace, *extra) if profile is not None else frozenset({namespace})
    return Permissions(CONTROLLER_GRANTS, namespace, "controller", watched)


# ------------------------------------------------------------------------------------------ reading


@dataclass(frozen=True)
class Read:
    """One list a pass needs: ``namespace`` None is every namespace."""

    api_version: str
    plural: str
    kind: str
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None

    @property
    def required(self) -> bool:
        return self.plural in REQUIRED

    @property
    def key(self) -> str:
        sel = ",".join(s for s in (self.label_selector, self.field_selector) if s)
        return f"{self.plural}.{self.api_version}" + (f" in {self.namespace}" if self.namespace else "") + (
            f" ({sel})" if sel else "")


class ReadFailed(KubeError):
    """A kind the pass needs could not be read: the pass does not run (nothing is judged on half a cluster)."""


def reads(profile: PlatformProfile, namespace: str) -> list[Read]:
    """What a pass lists. Everything the doctor's rules and the gate read, narrowed where the pass needs less:

    * events: Warning only (the scheduler's FailedScheduling, the kubelet's exec format errors);
    * pods: every pod not Succeeded (GPU accounting and the doctor's rules need running, pending and failed
      ones), plus the canaries' own pods in any phase (their completion is the canary's result), plus the
      managed jobs' Succeeded pods, trimmed to their claims and device health (a finished job's verdict reads
      them: ``verdict.claims``);
    * ConfigMaps: only where drift compares them (kube-system and the device plugins' namespaces).
    """
    out: list[Read] = []
    claims = any(p.claim_template_name for p in profile.spec.pools)
    for v, plural, kind in (*LIVE_RESOURCES, *CONTROLLER_RESOURCES, *(CLAIM_RESOURCES if claims else ())):
        if plural == "events":
            out.append(Read(v, plural, kind, field_selector="type=Warning"))
        elif plural == "pods":
            out.append(Read(v, plural, kind, field_selector="status.phase!=Succeeded"))
            out.append(Read(v, plural, kind, namespace, label_selector=names.LABEL_CANARY_POOL))
            # Last, so a canary's pod keeps its full form: the managed jobs' finished pods, trimmed to what a
            # verdict reads of them (their claims and the kubelet's device health: controller/trim.py).
            out.append(Read(v, plural, kind, label_selector=names.LABEL_JOB, field_selector=SUCCEEDED))
        elif plural == "configmaps":
            out += [Read(v, plural, kind, ns) for ns in sorted(drift_scope([profile]).configmap_namespaces or ())]
        else:
            out.append(Read(v, plural, kind))
    return out


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    m = o.meta(obj)
    return str(m.get("namespace") or ""), str(m.get("name") or "")


@dataclass
class Listing:
    """A list in progress: pages and objects so far (an informer's relist, said in the pass's notes)."""

    started: float = field(default_factory=time.monotonic)
    pages: int = 0
    objects: int = 0


async def _list(kube: Kube, r: Read, progress: Listing | None = None) -> tuple[list[dict[str, Any]], str, str | None]:
    """(items, resourceVersion, note): a not-installed optional kind is ([], "", note); any other failure raises.

    The list is read page by page, each page with its own deadline, and each page's objects are trimmed as it
    arrives: what the list holds at its peak is the trimmed objects so far and one page as decoded."""
    items: list[dict[str, Any]] = []
    meta: dict[str, Any] = {}
    try:
        async for page in kube.pages(r.api_version, r.plural, r.namespace, label_selector=r.label_selector,
                                     field_selector=r.field_selector, meta=meta, per_page=True):
            for item in page:
                item["kind"] = r.kind
                item.setdefault("apiVersion", r.api_version)
                trim(item, r.kind)  # keep only what a pass reads (managedFields are half a pod)
            items.extend(page)
            if progress is not None:
                progress.pages += 1
                progress.objects = len(items)
        rv = str(meta.get("resourceVersion") or "")
    except NotFound as exc:
        if r.required:
            raise ReadFailed(404, f"cannot list {r.key}, which the pass needs: {exc}", server=exc.server) from None
        return [], "", not_served_note(r.plural, r.api_version)
    except (Forbidden, Unreachable, TimedOut, KubeError) as exc:
        hint = " (the controller's ClusterRole must grant list and watch: render controller)" \
            if isinstance(exc, Forbidden) else ""
        raise ReadFailed(exc.status, f"cannot list {r.key}, which the pass needs: {exc}{hint}",
                         server=exc.server) from None
    return items, rv, None


def snapshot_of(per_read: Iterable[tuple[Read, Iterable[dict[str, Any]]]], notes: list[str]) -> Snapshot:
    """One snapshot from every read's items (an object two reads return, a canary pod, is kept once)."""
    seen: set[tuple[str, str, str]] = set()
    objects: list[dict[str, Any]] = []
    for r, items in per_read:
        for item in items:
            k = (r.kind, *_key(item))
            if k not in seen:
                seen.add(k)
                objects.append(item)
    return Snapshot(objects=objects, notes=list(notes), source="live")


# A watch that sends nothing (no event, no bookmark) for this long is ended and the read listed again: a live API
# server sends a BOOKMARK about once a minute to watches that allow them.
WATCH_IDLE_S = 90.0
# A pass does not admit (write Ready) on a read the server has not spoken for within this long.
STALE_AFTER_S = 150.0
LIST_CONCURRENCY = 8  # lists in flight at once: a slow API server costs a few round trips, not thirty


async def list_cluster(kube: Kube, profile: PlatformProfile, namespace: str) -> Snapshot:
    """Every kind the pass reads, listed now (``--once``), a few lists at a time; the first that fails fails all."""
    gate = asyncio.Semaphore(LIST_CONCURRENCY)

    async def one(r: Read) -> tuple[list[dict[str, Any]], str, str | None]:
        async with gate:
            return await _list(kube, r)

    todo = reads(profile, namespace)
    done = await asyncio.gather(*(one(r) for r in todo))
    notes = [note for _items, _rv, note in done if note]
    return snapshot_of(((r, items) for r, (items, _rv, _note) in zip(todo, done, strict=True)), notes)


@dataclass
class Backoff:
    """How long an informer waits before it lists again (client-go's reflector: 0.8 s doubling to 30 s, jitter
    1.0, reset after a healthy stretch). Every relist waits, a 410 Gone's too: a server that expires every watch
    (a 410 storm) gets a few lists per kind per minute, not a busy loop of full lists."""

    initial_s: float = 0.8
    cap_s: float = 30.0
    reset_after_s: float = 120.0  # a list and watch that ran this long healthy starts the next wait at initial_s
    rng: random.Random = field(default_factory=random.Random)
    current_s: float = 0.0

    def next(self, healthy_for_s: float) -> float:
        """The wait before the next list, given how long the last list-and-watch ran before it ended."""
        if healthy_for_s >= self.reset_after_s:
            self.current_s = 0.0
        self.current_s = self.initial_s if self.current_s == 0.0 else min(self.cap_s, self.current_s * 2)
        return self.current_s * (1.0 + self.rng.random())


@dataclass
class Informer:
    """One read kept current: a list, then watches from its resourceVersion; any end but a clean one (410 Gone,
    a refused or silent watch, a failed list, a bug) waits a jittered backoff and lists again. Never a dead task:
    :meth:`run` ends only on ``stop``.

    ``heard`` is when the server last spoke for this read (a list, an event, a bookmark): the pass uses its age
    to refuse to admit on old data (:meth:`Cache.stale`). ``items`` holds each object as decoded from its list or
    event, and an event replaces the object, never edits it: snapshots share these objects
    (:meth:`Cache.snapshot`), so a stored one must stay as it was stored."""

    kube: Kube
    read: Read
    items: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    synced: bool = False
    error: KubeError | None = None
    note: str | None = None
    lists: int = 0
    watches: int = 0
    events: int = 0
    bookmarks: int = 0
    heard: float | None = None  # monotonic time of the latest list, event or bookmark
    problem: str = ""  # why the latest list-and-watch ended (logged when it changes, not on every retry)
    backoff: Backoff = field(default_factory=Backoff)
    listing: Listing | None = None  # a (re)list in progress: the pass reads the previous list meanwhile

    def age(self, now: float | None = None) -> float | None:
        """Seconds since the server last spoke for this read: None before the first list, and for a kind the
        server does not serve (nothing of it to go stale; it is looked for again every minute)."""
        if self.heard is None or self.note is not None:
            return None
        return (time.monotonic() if now is None else now) - self.heard

    async def run(self, wake: asyncio.Event, stop: asyncio.Event, *, watch_timeout_s: int = 300,
                  idle_s: float | None = None) -> None:
        if idle_s is not None:
            self.backoff.reset_after_s = min(self.backoff.reset_after_s, idle_s)
        while not stop.is_set():
            began = time.monotonic()
            why = await self._list_and_watch(wake, stop, watch_timeout_s, idle_s)
            if stop.is_set():
                return
            delay = self.backoff.next(time.monotonic() - began)
            if why != self.problem:
                log.info("watch %s: %s; listing again in %.1f s", self.read.key, why, delay)
                self.problem = why
            await _sleep(stop, delay)

    async def _list_and_watch(self, wake: asyncio.Event, stop: asyncio.Event, watch_timeout_s: int,
                              idle_s: float | None) -> str:
        """List, then watch until something ends it; returns why (never raises but on cancellation)."""
        try:
            self.listing = Listing()
            try:
                items, rv, self.note = await _list(self.kube, self.read, self.listing)
            finally:
                self.listing = None
            self.lists += 1
            self.heard = time.monotonic()
            self.items = {_key(i): i for i in items}
            del items
            settle_after_list()
            self.synced, self.error = True, None
            wake.set()
            if self.note is not None:  # not installed: look again later (a CRD may be installed)
                await _sleep(stop, 60.0)
                return "not served"
            while not stop.is_set():
                started, events = time.monotonic(), self.events + self.bookmarks
                rv = await self._watch(rv, wake, stop, watch_timeout_s, idle_s)
                if time.monotonic() - started < 1.0 and self.events + self.bookmarks == events and not stop.is_set():
                    return "the server ended the watch at once"  # no busy loop of watches either
            return "stopped"
        except Gone:
            return "resourceVersion too old (410)"
        except ReadFailed as exc:
            self.synced, self.error = False, exc
            log.error("%s", exc)
            return str(exc)
        except Forbidden as exc:  # listing is allowed but watching is not: the cache would go stale quietly
            self.synced, self.error = False, ReadFailed(403, f"cannot watch {self.read.key}, which the pass "
                                                             f"needs: {exc}", server=exc.server)
            log.error("%s", self.error)
            return str(self.error)
        except KubeError as exc:
            return f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # a bug on an object's shape: the informer lists again, it never dies
            log.exception("watch %s: %s", self.read.key, exc)
            return f"{type(exc).__name__}: {exc}"

    async def _watch(self, rv: str, wake: asyncio.Event, stop: asyncio.Event, timeout_s: int,
                     idle_s: float | None) -> str:
        r = self.read
        self.watches += 1
        async for ev in self.kube.watch(r.api_version, r.plural, r.namespace, resource_version=rv,
                                        label_selector=r.label_selector, field_selector=r.field_selector,
                                        timeout_s=timeout_s, idle_s=idle_s):
            if stop.is_set():
                break
            obj = ev.get("object") or {}
            if not isinstance(obj, dict):
                continue
            rv = str(o.meta(obj).get("resourceVersion") or rv)
            kind = ev.get("type")
            self.heard = time.monotonic()
            if kind == "BOOKMARK":
                self.bookmarks += 1
                continue
            self.events += 1
            obj["kind"] = r.kind
            obj.setdefault("apiVersion", r.api_version)
            trim(obj, r.kind)
            if kind == "DELETED" or not _selected(r, obj):  # gone, or no longer selected (a pod that Succeeded)
                self.items.pop(_key(obj), None)
            else:
                self.items[_key(obj)] = obj
            wake.set()
        return rv


def settle_after_list() -> None:
    """After a (re)list: collect what the old list left, then freeze what survives. The cached objects are
    plain decoded JSON (no reference cycles, freed by their counts), and a full collection would walk all of
    them on nearly every pass (1.6 s of a 5.1 s pass at 20,000 nodes: bench/controller/README.md)."""
    gc.collect()
    gc.freeze()


def _selected(r: Read, obj: dict[str, Any]) -> bool:
    """The read's field selector, checked here too: an object that stops matching leaves the cache even where a
    server sends it as MODIFIED."""
    if r.field_selector == "type=Warning":
        return obj.get("type") == "Warning"
    if r.field_selector == "status.phase!=Succeeded":
        return (obj.get("status") or {}).get("phase") != "Succeeded"
    if r.field_selector == SUCCEEDED:
        return (obj.get("status") or {}).get("phase") == "Succeeded"
    return True


async def _sleep(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)


class Cache:
    """The watch-fed cache of every read: a pass takes a snapshot of memory, not of a fresh list."""

    def __init__(self, kube: Kube, profile: PlatformProfile, namespace: str) -> None:
        self.informers = [Informer(kube, r) for r in reads(profile, namespace)]
        self.tasks: list[asyncio.Task[None]] = []

    def start(self, wake: asyncio.Event, stop: asyncio.Event, *, watch_timeout_s: int = 300,
              idle_s: float | None = WATCH_IDLE_S) -> None:
        self.tasks = [asyncio.create_task(i.run(wake, stop, watch_timeout_s=watch_timeout_s, idle_s=idle_s))
                      for i in self.informers]

    def ages(self, now: float | None = None) -> dict[str, float | None]:
        """Seconds since the server last spoke for each read (None: never listed), by the read's key."""
        t = time.monotonic() if now is None else now
        return {i.read.key: i.age(t) for i in self.informers}

    def current(self, plural: str) -> list[dict[str, Any]]:
        """The objects the cache holds now for ``plural`` (every read of it), as the watches left them."""
        return [obj for i in self.informers if i.read.plural == plural for obj in i.items.values()]

    def stale(self, bound_s: float, now: float | None = None) -> str:
        """Why the cache is too old to admit on ("" when every read was heard within ``bound_s``): the reads
        the server has not spoken for, oldest first."""
        old = sorted(((a, k) for k, a in self.ages(now).items() if a is not None and a > bound_s), reverse=True)
        if not old:
            return ""
        shown = ", ".join(f"{k} {a:.0f} s" for a, k in old[:3]) + (f" and {len(old) - 3} more" if len(old) > 3 else "")
        return (f"the controller's view is stale: last heard from the API server for {shown} ago (bound "
                f"{bound_s:.0f} s)")

    @property
    def synced(self) -> bool:
        return all(i.synced for i in self.informers)

    @property
    def failed(self) -> bool:
        """A read the pass needs is failing now: the pass must run to fail loudly, not wait for it."""
        return any(i.error is not None for i in self.informers)

    def relisting(self, now: float | None = None) -> list[str]:
        """Reads whose relist is under way: a pass on the previous list says so instead of waiting for it."""
        t = time.monotonic() if now is None else now
        return [f"{i.read.key}: listing again for {t - i.listing.started:.0f} s ({i.listing.pages} page(s), "
                f"{i.listing.objects} object(s) so far); this pass reads the previous list"
                for i in self.informers if i.synced and i.listing is not None]

    def snapshot(self) -> Snapshot:
        """The cached cluster; ``ReadFailed`` when a read the pass needs is failing (its last error)."""
        for i in self.informers:
            if i.error is not None:
                raise i.error
            if not i.synced:
                raise ReadFailed(None, f"{i.read.key} has not been listed yet")
        notes = [i.note for i in self.informers if i.note] + self.relisting()
        # The cached objects themselves, not copies (a copy of 26,000 objects cost 1.8 s and 240 MiB a pass:
        # bench/controller/README.md). Safe because nothing writes into them: an informer replaces an object
        # by the one its event or list decoded and never edits a stored one, and the pass is pure: it reads
        # its snapshot and says what to write (tests/controller/test_relist.py checks a pass leaves them as
        # they were). The snapshot's own lists are taken now, so later events do not change what a pass sees.
        return snapshot_of(((i.read, list(i.items.values())) for i in self.informers), notes)

    async def close(self) -> None:
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


# ------------------------------------------------------------------------------------------ writing


# Workload check writes and finished jobs' verdicts in flight at once: 10k Workloads are not 20k round trips in
# a row, nor a burst of 2,800 verdicts (one pass's --verdict-budget at 20k nodes) 5,600.
WRITE_CONCURRENCY = 16
Fresh = Callable[[tuple[str, ...]], str]


async def apply_actions(kube: Kube, actions: list[Action], known: dict[tuple[str, str], dict[str, Any]],
                        leading: Callable[[], bool] | None = None, fresh: Fresh | None = None) -> list[str]:
    """Carry out the actions in order; ``known`` holds listed objects by (plural, name) for owner uids.

    Returns one line per action that failed (the pass goes on: the next pass retries what is still wanted).
    ``leading`` is asked before each action: a replica that lost the Lease mid-pass stops writing. A server that
    stops answering stops the pass (the rest would wait for the same timeout one by one).

    ``fresh`` is asked just before each write that admits (``admits``: a Workload's check turned Ready) with
    the pools it relies on; a reason back holds that write (and its Event) for the next pass, which decides
    again on what the cache holds then. Consecutive Workload check writes and finished jobs' verdict
    annotations go out ``WRITE_CONCURRENCY`` at a time, each with its Event after it (a verdict whose annotation
    was refused gets no Event: the next pass judges it again and says it then).
    """
    errors: list[str] = []
    i = 0
    while i < len(actions):
        if leading is not None and not leading():
            errors.append(f"lost the Lease: {len(actions) - i} action(s) left to the new leader")
            break
        j = i
        while j < len(actions) and _parallel_write(actions[j]):
            j += 1
        if j > i:  # a run of Workload check writes or verdicts (and their Events): in parallel, within the bound
            errs, left = await _apply_parallel(kube, actions[i:j], known, leading, fresh)
            errors += errs
            if left is not None:
                errors.append(f"lost the Lease: {left + len(actions) - j} action(s) left to the new leader")
                break
            i = j
            continue
        errors += await _apply_checked(kube, actions[i], known, fresh)
        i += 1
    return errors


def _parallel_write(a: Action) -> bool:
    """A write on one object that no other write of its run touches: a Workload's check, a finished job's
    verdict, or the Event of either."""
    if isinstance(a, ApplyStatus):
        return a.plural == "workloads"
    if isinstance(a, Annotate):
        return names.ANN_VERDICT in a.annotations
    return isinstance(a, Emit) and ((a.body.get("involvedObject") or {}).get("kind") == "Workload"
                                    or a.body.get("reason") == "JobVerdict")


def _about(event: Emit, write: Action) -> bool:
    return (event.body.get("involvedObject") or {}).get("name") == getattr(write, "name", None)


async def _apply_parallel(kube: Kube, run: list[Action], known: dict[tuple[str, str], dict[str, Any]],
                          leading: Callable[[], bool] | None, fresh: Fresh | None) -> tuple[list[str], int | None]:
    """The run's errors, and how many of its actions were left unwritten because the Lease was lost (None: it
    was not). ``leading`` was asked just before the run, for its first write; it is asked again before each
    later one, and once it says no, no write of the run starts."""
    groups: list[list[Action]] = []
    for a in run:  # each write with the Event about it that follows it, in that order
        if (isinstance(a, Emit) and groups and len(groups[-1]) == 1
                and isinstance(groups[-1][0], ApplyStatus | Annotate) and _about(a, groups[-1][0])):
            groups[-1].append(a)
        else:
            groups.append([a])
    gate = asyncio.Semaphore(WRITE_CONCURRENCY)
    left: list[int] = []  # the sizes of the groups not written once the Lease was lost

    async def one(n: int, group: list[Action]) -> list[str]:
        async with gate:
            if left or (n and leading is not None and not leading()):
                left.append(len(group))
                return []
            out = await _apply_checked(kube, group[0], known, fresh)
            first = group[0]
            # The Event tells of its write: none for a refused admission or verdict (the next pass decides again)
            event_due = not out or (isinstance(first, ApplyStatus) and not first.admits)
            if len(group) > 1 and event_due:
                out += await _apply_checked(kube, group[1], known, None)
            return out

    done = await asyncio.gather(*(one(n, g) for n, g in enumerate(groups)))
    return [e for errs in done for e in errs], (sum(left) if left else None)


async def _apply_checked(kube: Kube, a: Action, known: dict[tuple[str, str], dict[str, Any]],
                         fresh: Fresh | None) -> list[str]:
    admits: tuple[str, ...] = getattr(a, "admits", ())
    if admits and fresh is not None:
        why = fresh(admits)
        if why:
            return [f"{type(a).__name__} {getattr(a, 'plural', 'events')}/{getattr(a, 'name', '')}: not admitted: "
                    f"{why}; the next pass decides again"]
    try:
        await _apply_one(kube, a, known)
    except Conflict:
        if isinstance(a, Create | Emit):
            return []  # already there (a previous pass, the other replica, the same event): what we wanted
        return [f"{type(a).__name__} {getattr(a, 'plural', 'events')}/{getattr(a, 'name', '')}: "
                "changed meanwhile (409); the next pass retries"]
    except (Unreachable, TimedOut):
        raise
    except KubeError as exc:
        return [f"{type(a).__name__} {getattr(a, 'plural', 'events')}/{getattr(a, 'name', '')}: {exc}"]
    return []


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
    elif isinstance(a, JsonPatch):
        await kube.patch(a.api_version, a.plural, a.name, a.ops, namespace=a.namespace, patch_type="json",
                         field_manager=names.CONTROLLER_FIELD_MANAGER)
    elif isinstance(a, Emit):
        await kube.create("v1", "events", a.body)
