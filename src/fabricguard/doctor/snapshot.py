"""A snapshot of the cluster objects the doctor reads: loaded from a directory of kubectl output, or live.

``load_snapshot(DIR)`` reads every ``*.json``, ``*.yaml`` and ``*.yml`` file in DIR holding Kubernetes
objects or ``List``s exactly as ``kubectl get ... -o json|yaml`` writes them. A file that holds no
Kubernetes object (a platform profile, notes) is skipped with a note; a file that cannot be parsed raises
``SnapshotError`` naming the file and line.

``collect_live`` reads the same kinds from the API server through ``fabricguard.kube`` (GET only, never Secrets) and
``write_snapshot`` stores them as one ``List`` file per resource, in the shape ``kubectl`` writes.
``stream_live`` reads them page by page into a sink instead, so ``fabricguard snapshot`` (``SnapshotWriter``)
holds one page at a time however large the cluster: each page is written out as it arrives, and only the
objects a sink keeps (the reference ``--publish`` sends) stay in memory.
"""

from __future__ import annotations

import functools
import json
import operator
import os
from array import array
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from functools import cached_property, partial
from itertools import compress
from pathlib import Path
from typing import Any, TypeVar, cast

from fabricguard import names, objects
from fabricguard.kube import Kube
from fabricguard.kubectl_output import documents, is_list, is_object, list_items
from fabricguard.profile.dra import SliceIndex
from fabricguard.profile.model import PlatformProfile
from fabricguard.userfiles import input_file
from fabricguard.yamlsource import SourceError

SNAPSHOT_SUFFIXES = (".json", ".yaml", ".yml")
T = TypeVar("T")
Memo = tuple[list[Any], Any, Any]  # (the objects, what was kept of them, signature() of the function)
PROFILE_API_PREFIX = "fabricguard.io/"


class SnapshotError(SourceError):
    """A snapshot that cannot be read: ``source`` and ``line`` say where."""


@dataclass
class Snapshot:
    """Kubernetes objects by kind, plus notes on what was skipped and where it came from."""

    objects: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    source: str = ""
    profile_path: Path | None = None
    _members: tuple[Any, dict[str, list[dict[str, Any]]]] | None = field(default=None, init=False, repr=False,
                                                                         compare=False)
    # (what, id of the object) -> (the object, what ``derived`` computed of it) from a previous snapshot whose
    # objects are never edited in place, and from this one.
    known_derived: dict[tuple[str, int], tuple[dict[str, Any], Any]] | None = field(default=None, repr=False,
                                                                                 compare=False)
    _derived: dict[tuple[str, int], tuple[dict[str, Any], Any]] = field(default_factory=dict, init=False,
                                                                        repr=False, compare=False)
    # What ``select`` and ``fold`` computed, by what they name: (the objects, what was kept of them, the function
    # and its arguments), from a previous snapshot whose objects are never edited in place, and from this one.
    known_memo: dict[Hashable, Memo] | None = field(default=None, repr=False, compare=False)
    _memo: dict[Hashable, Memo] = field(default_factory=dict, init=False, repr=False, compare=False)
    _places: dict[tuple[int, int], tuple[list[Any], list[Any], list[int]]] = field(
        default_factory=dict, init=False, repr=False, compare=False)
    # Per-object answers computed (not kept) by select and derived, and the objects of the groups fold computed
    # again: what a pass judged again (controller/incremental.py PassStats).
    computed: int = field(default=0, init=False, repr=False, compare=False)
    folded: int = field(default=0, init=False, repr=False, compare=False)

    @cached_property
    def by_kind(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for o in self.objects:
            out[o.get("kind", "")].append(o)
        return out

    def kind(self, kind: str) -> list[dict[str, Any]]:
        return self.by_kind.get(kind, [])

    @property
    def nodes(self) -> list[dict[str, Any]]:
        return self.kind("Node")

    @property
    def pods(self) -> list[dict[str, Any]]:
        return self.kind("Pod")

    @property
    def daemonsets(self) -> list[dict[str, Any]]:
        return self.kind("DaemonSet")

    @property
    def events(self) -> list[dict[str, Any]]:
        return self.kind("Event")

    def pool_members(self, profile: PlatformProfile) -> dict[str, list[dict[str, Any]]]:
        """The Nodes of each pool of ``profile`` (:meth:`PlatformProfile.pool_of`), in snapshot order; computed
        once per snapshot and profile (a dozen rules ask), each Node's pool kept while it is the same object
        (:meth:`select`). The lists are shared: read them, never change them."""
        if self._members is not None and self._members[0] is profile:
            return self._members[1]
        placed = self.select("pool of", self.nodes, partial(_pool_of, profile))
        out = self.fold("pool members", placed, partial(_members, tuple(p.name for p in profile.spec.pools)))
        self._members = (profile, out)
        return out

    def derived(self, what: str, obj: dict[str, Any], fn: Callable[[dict[str, Any]], T]) -> T:
        """``fn(obj)``, computed once per snapshot and object, and taken from ``known_derived`` when ``obj`` is
        the very object seen there. ``fn`` must read nothing but ``obj`` (no profile, no clock) and ``what``
        names it; callers read what it gives, never change it."""
        key = (what, id(obj))
        got = self._derived.get(key)
        if got is not None and got[0] is obj:
            return cast(T, got[1])
        was = self.known_derived.get(key) if self.known_derived else None
        if was is not None and was[0] is obj:
            value = was[1]
        else:
            value = fn(obj)
            self.computed += 1
        self._derived[key] = (obj, value)
        return cast(T, value)

    def select(self, what: Hashable, objs: list[dict[str, Any]],
               fn: Callable[[dict[str, Any]], T | None]) -> list[tuple[dict[str, Any], T]]:
        """``[(o, fn(o)) for o in objs if fn(o)]``: the objects a rule reports on, with what it reads of each.

        ``fn`` reads nothing but its one object and its own arguments (a module function, or a
        ``functools.partial`` of one with a pool's parameters: :func:`signature`, compared by value), so its
        answer for an object is kept for as long as the object is the very one seen (``known_memo``: the
        controller's cache replaces an object on a watch event and never edits one). ``what`` names the call
        (a rule and a pool, say). Against the objects of the previous call with the same ``what`` and
        function, only the objects not there before are judged: after one watch event, one call; the rest is
        a walk by identity in C. The list is shared: read it, never change it."""
        key, sig = ("select", what), signature(fn)
        was = self._recall(key, sig)
        if was is not None and was[0] is objs:
            return cast(list[tuple[dict[str, Any], T]], was[1][0])
        chosen: dict[int, tuple[dict[str, Any], Any]]
        if was is None:
            chosen, fresh = {}, objs
        else:
            before, (out, where) = was[0], was[1]
            if len(before) == len(objs):
                replaced = self._replaced(before, objs)
                if len(replaced) <= 64 + len(objs) // 64:
                    out, where = self._patch(objs, replaced, fn, out, where)
                    self._memo[key] = (objs, (out, where), sig)
                    return cast(list[tuple[dict[str, Any], T]], out)
            # Many replaced, added or deleted: the kept answers by object (they hold their objects, so no other
            # object can take their id), and only the objects not there before judged.
            chosen = {id(e[0]): e for e in out}
            fresh = fresh_objects(before, objs)
        self.computed += len(fresh)
        for x in fresh:
            if id(x) not in chosen and (v := fn(x)):
                chosen[id(x)] = (x, v)
        where = array("q", compress(range(len(objs)), map(chosen.__contains__, map(id, objs))))  # 8 B a place
        out = [chosen[id(objs[i])] for i in where]
        self._memo[key] = (objs, (out, where), sig)  # the answers in order and their places: nothing by id
        return cast(list[tuple[dict[str, Any], T]], out)

    def _patch(self, objs: list[dict[str, Any]], replaced: list[int], fn: Callable[[dict[str, Any]], Any],
               out: list[tuple[dict[str, Any], Any]], where: array[int]
               ) -> tuple[list[tuple[dict[str, Any], Any]], array[int]]:
        """:meth:`select`'s answer after the objects at ``replaced`` (positions in ``objs``) were replaced in
        place: ``out`` (chosen answers in order) and ``where`` (their positions) patched there alone; the
        lists themselves when no chosen answer changed (a new list otherwise: the old ones stay last pass's)."""
        copied = False
        for i in replaced:
            x = objs[i]
            self.computed += 1
            v = fn(x)
            new = (x, v) if v else None
            k = bisect_left(where, i)
            had = k < len(where) and where[k] == i
            if not had and new is None:
                continue
            if not copied:
                out, where, copied = list(out), array("q", where), True
            if had and new is not None:
                out[k] = new
            elif had:
                del out[k], where[k]
            else:
                out.insert(k, cast(tuple[dict[str, Any], Any], new))
                where.insert(k, i)
        return out, where

    def fold(self, what: Hashable, objs: list[Any], fn: Callable[[list[Any]], T]) -> T:
        """``fn(objs)``, kept while ``objs`` are the very objects (in order) it was last computed for.

        As for :meth:`select`, ``fn`` reads nothing but ``objs`` and its own arguments. For what a rule
        computes of a whole group (a DaemonSet's pods, a pool's nodes) that one changed object does not
        touch elsewhere; callers read what it gives, never change it."""
        key, sig = ("fold", what), signature(fn)
        was = self._recall(key, sig)
        if was is not None and same_objects(was[0], objs, self._replaced):
            value = was[1]
        else:
            value = fn(objs)
            self.folded += len(objs)
        self._memo[key] = (objs, value, sig)
        return cast(T, value)

    def _recall(self, key: Hashable, sig: Any) -> Memo | None:
        """What this snapshot, else a previous one, kept under ``key`` for the same function and arguments."""
        was = self._memo.get(key) or (self.known_memo.get(key) if self.known_memo else None)
        return was if was is not None and (was[2] is sig or was[2] == sig) else None

    def _replaced(self, before: list[Any], objs: list[Any]) -> list[int]:
        """``replaced_places(before, objs)``, once per pair of lists in this snapshot (a dozen calls compare the
        same Nodes with the same previous ones)."""
        key = (id(before), id(objs))
        got = self._places.get(key)
        if got is None or got[0] is not before or got[1] is not objs:
            got = self._places[key] = (before, objs, replaced_places(before, objs))
        return got[2]

    def memo_seen(self) -> dict[Hashable, Memo]:
        """What :meth:`select` and :meth:`fold` computed or kept for this snapshot."""
        return self._memo

    def derived_seen(self) -> dict[tuple[str, int], tuple[dict[str, Any], Any]]:
        """What :meth:`derived` computed or kept for this snapshot's objects."""
        return self._derived

    @cached_property
    def claims_by_name(self) -> dict[tuple[str, str], dict[str, Any]]:
        """ResourceClaims by ``(namespace, name)``."""
        return {((c.get("metadata") or {}).get("namespace", ""), objects.name_of(c)): c
                for c in self.kind("ResourceClaim")}

    @cached_property
    def dra_index(self) -> SliceIndex:
        """ResourceSlices by (node, driver) and the devices ResourceClaims hold (profile.dra)."""
        return SliceIndex.build(self.kind("ResourceSlice"), self.kind("ResourceClaim"))

    @cached_property
    def node_by_name(self) -> dict[str, dict[str, Any]]:
        return {name: n for n, (name,) in self.select("node name", self.nodes, _node_name)}

    @cached_property
    def daemonset_pods(self) -> dict[tuple[str, str], list[dict[str, Any]]]:
        """Pods whose controller is a DaemonSet, by its ``(namespace, name)`` (each pod's controller kept while it
        is the same object; the whole kept while no DaemonSet's pod changed: an event on a training pod costs
        nothing here)."""
        return self.fold("daemonset pods", self.select("daemonset of", self.pods, _daemonset_of), _by_daemonset)

    @cached_property
    def revisions_by_owner(self) -> dict[tuple[str, str], list[dict[str, Any]]]:
        """ControllerRevisions by the ``(namespace, name)`` of the DaemonSet that owns them."""
        out: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for r in self.kind("ControllerRevision"):
            meta = r.get("metadata") or {}
            for ref in meta.get("ownerReferences") or ():
                if ref.get("kind") == "DaemonSet":
                    out[(meta.get("namespace", ""), ref.get("name", ""))].append(r)
        return out


def signature(fn: Callable[..., Any]) -> Any:
    """What a kept answer was computed with: the function and, for a ``functools.partial``, its arguments (compared
    by value: a rule's pool parameters, say). Another profile, another pool's parameters, a lambda made anew:
    another signature, so nothing kept for one is given to the other."""
    if isinstance(fn, functools.partial):
        return fn.func, fn.args, tuple(sorted(fn.keywords.items()))
    return fn


def fresh_objects(before: list[dict[str, Any]], objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects of ``objs`` that are not the very objects of ``before`` (in place, when both are as long:
    one replaced object is one answer to compute; an object that moved counts as fresh)."""
    if len(before) == len(objs):
        return list(compress(objs, map(operator.is_not, objs, before)))
    seen = set(map(id, before))
    return [x for x in objs if id(x) not in seen]


def replaced_places(before: list[Any], objs: list[Any]) -> list[int]:
    """The positions where ``objs`` (as long as ``before``) holds another object than ``before``."""
    return list(compress(range(len(objs)), map(operator.is_not, objs, before)))


def same_objects(before: list[Any], objs: list[Any],
                 replaced: Callable[[list[Any], list[Any]], list[int]] = replaced_places) -> bool:
    """Whether ``objs`` are the very objects of ``before``, in order."""
    return before is objs or (len(before) == len(objs) and not replaced(before, objs))


def _pool_of(profile: PlatformProfile, n: dict[str, Any]) -> str | None:
    pool = profile.pool_of(n)
    return pool.name if pool is not None else None


def _members(pools: tuple[str, ...], placed: list[tuple[dict[str, Any], str]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {p: [] for p in pools}
    for n, pool in placed:
        if pool in out:
            out[pool].append(n)
    return out


def _by_daemonset(owned: list[tuple[dict[str, Any], tuple[str, str]]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    out: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for p, owner in owned:
        out[owner].append(p)
    return out


def _node_name(n: dict[str, Any]) -> tuple[str]:
    return (n["metadata"]["name"],)


def _daemonset_of(p: dict[str, Any]) -> tuple[str, str] | None:
    """(namespace, name) of the pod's controller when it is a DaemonSet (its first controller reference)."""
    meta = p.get("metadata") or {}
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller", True):
            return (meta.get("namespace", ""), ref.get("name", "")) if ref.get("kind", "") == "DaemonSet" else None
    return None


def _ingest(snapshot: Snapshot, docs: Iterable[Any], name: str) -> int:
    """Add every object in ``docs`` (objects or Lists); returns how many were added."""
    count = 0
    for doc in docs:
        if not is_object(doc):
            continue
        if doc["apiVersion"].startswith(PROFILE_API_PREFIX):
            if doc["kind"] == "PlatformProfile" and snapshot.profile_path is None:
                snapshot.profile_path = Path(snapshot.source) / name
            continue
        if is_list(doc):
            items = list(list_items(doc))
            snapshot.objects.extend(items)
            count += len(items)
            continue
        snapshot.objects.append(doc)
        count += 1
    return count


def load_file(snapshot: Snapshot, path: Path) -> None:
    """Parse one file into ``snapshot``; notes a file with no Kubernetes object, raises on bad syntax."""
    name = path.name
    try:
        docs = documents(path)
    except SourceError as exc:
        raise SnapshotError(exc.source, exc.line, exc.problem) from None
    before_profile = snapshot.profile_path
    added = _ingest(snapshot, docs, name)
    if added == 0 and any(is_object(d) and d.get("kind") == "List" for d in docs):
        snapshot.notes.append(f"{name}: an empty List")
    elif added == 0:
        if snapshot.profile_path is not None and snapshot.profile_path != before_profile:
            snapshot.notes.append(f"{name}: a fabricguard PlatformProfile, not Kubernetes objects; skipped")
        else:
            snapshot.notes.append(f"{name}: holds no Kubernetes objects; skipped")


def load_snapshot(directory: str | Path) -> Snapshot:
    """Every Kubernetes object in the JSON/YAML files of ``directory`` (not recursive, sorted by name)."""
    d = Path(directory)
    if not d.is_dir():
        raise SnapshotError(str(d), None, "not a directory; pass the folder that holds the kubectl output")
    snap = Snapshot(source=str(d))
    for p in sorted(d.iterdir()):
        if p.suffix in SNAPSHOT_SUFFIXES and not p.is_file():
            # A FIFO or a directory named pods.json would drop a kind from the audit without a word.
            try:
                input_file(p)
            except SourceError as exc:
                raise SnapshotError(exc.source, None, f"{exc.problem.split('; ')[0]}; a snapshot file must be "
                                    "a regular file (move it out of the folder to leave it out)") from None
    files = sorted(p for p in d.iterdir() if p.is_file() and p.suffix in SNAPSHOT_SUFFIXES)
    for p in sorted(p for p in d.iterdir() if p.is_file() and p.suffix not in SNAPSHOT_SUFFIXES):
        snap.notes.append(f"{p.name}: not a .json/.yaml file; skipped")
    for path in files:
        load_file(snap, path)
    if not snap.objects:
        raise SnapshotError(str(d), None, "no Kubernetes objects found in any .json/.yaml file")
    return snap


# --- live collection ---------------------------------------------------------------------------------

# (apiVersion, plural, kind, namespaced). Secrets are deliberately absent: the doctor never reads them.
LIVE_RESOURCES: tuple[tuple[str, str, str], ...] = (
    ("v1", "nodes", "Node"),
    ("v1", "pods", "Pod"),
    ("v1", "events", "Event"),
    ("v1", "configmaps", "ConfigMap"),
    (names.APPS_API, "daemonsets", "DaemonSet"),
    (names.APPS_API, "deployments", "Deployment"),
    (names.APPS_API, "controllerrevisions", "ControllerRevision"),
    (names.ADMISSIONREGISTRATION_API, "mutatingwebhookconfigurations", "MutatingWebhookConfiguration"),
    (names.ADMISSIONREGISTRATION_API, "validatingwebhookconfigurations", "ValidatingWebhookConfiguration"),
    (names.NAD_API, "network-attachment-definitions", "NetworkAttachmentDefinition"),
    (names.KUEUE_API, "resourceflavors", "ResourceFlavor"),
    (names.KUEUE_API, "clusterqueues", "ClusterQueue"),
    (names.KUEUE_API, "localqueues", "LocalQueue"),
    (names.KUEUE_API, "topologies", "Topology"),
    (names.KUEUE_API, "workloads", "Workload"),
    (names.GKE_NETWORK_API, "networks", "Network"),
    (names.GKE_NETWORK_API, "gkenetworkparamsets", "GKENetworkParamSet"),
    # Dynamic Resource Allocation: how DRA drivers offer the fabric, and what pods hold of it.
    (names.DRA_API, "deviceclasses", "DeviceClass"),
    (names.DRA_API, "resourceslices", "ResourceSlice"),
    (names.DRA_API, "resourceclaims", "ResourceClaim"),
    (names.DRA_API, "resourceclaimtemplates", "ResourceClaimTemplate"),
)
FORBIDDEN_PLURALS = frozenset({"secrets"})
PAGE_SIZE = 500


class PageSink:
    """Where ``stream_live`` hands each resource's pages: ``begin``, ``page`` (repeated), then ``end`` or
    ``skip`` (the resource turned out not to be served, or is forbidden)."""

    def begin(self, plural: str, kind: str, api_version: str) -> None:
        pass

    def page(self, plural: str, items: list[dict[str, Any]]) -> None:
        pass

    def end(self, plural: str) -> None:
        pass

    def skip(self, plural: str) -> None:
        pass


async def stream_live(
    sink: PageSink,
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    resources: Iterable[tuple[str, str, str]] = (),
    kube: Kube | None = None,
) -> list[str]:
    """Every resource read from the API server with GET requests only, a page (``PAGE_SIZE``) at a time into
    ``sink``, through ``kube`` (or a connection from ``kubeconfig``/``context``); returns the notes on resources
    left out. The doctor audits what it may see: 404 (not installed) and 403 (forbidden) are notes; a server that
    does not answer is ``Unreachable``/``TimedOut`` (``fabricguard.kube``), naming it."""
    from fabricguard.kube import Forbidden, NotFound

    own = kube is None
    client = kube or await Kube.connect(kubeconfig, context)
    notes: list[str] = []
    try:
        for api_version, plural, kind in tuple(resources) or LIVE_RESOURCES:
            if plural in FORBIDDEN_PLURALS:
                raise ValueError("the doctor never reads Secrets")
            sink.begin(plural, kind, api_version)
            try:
                async for items in client.pages(api_version, plural, limit=PAGE_SIZE):
                    for item in items:
                        item["kind"] = kind
                    sink.page(plural, items)
                    del items  # the page is dropped before the next one is read
            except (NotFound, Forbidden) as exc:
                why = "not served (not installed)" if isinstance(exc, NotFound) else "forbidden"
                notes.append(f"{plural}.{api_version}: {why}; skipped")
                sink.skip(plural)
                continue
            except BaseException:
                sink.skip(plural)
                raise
            sink.end(plural)
    finally:
        if own:
            await client.close()
    return notes


class _Collect(PageSink):
    def __init__(self) -> None:
        self.lists: dict[str, dict[str, Any]] = {}

    def begin(self, plural: str, kind: str, api_version: str) -> None:
        self.lists[plural] = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": []}

    def page(self, plural: str, items: list[dict[str, Any]]) -> None:
        self.lists[plural]["items"].extend(items)

    def skip(self, plural: str) -> None:
        self.lists.pop(plural, None)


async def collect_live(
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    resources: Iterable[tuple[str, str, str]] = (),
    kube: Kube | None = None,
) -> dict[str, dict[str, Any]]:
    """One ``List`` per resource, read from the API server with GET requests only (paged), through ``kube``
    (or a connection from ``kubeconfig``/``context``).

    The doctor audits what it may see: a resource the server does not serve (404: a CRD that is not installed,
    such as Kueue or Multus) or that these credentials may not list (403) is left out and reported under the
    ``"_notes"`` key. A server that does not answer is ``Unreachable``/``TimedOut`` (``fabricguard.kube``).
    """
    sink = _Collect()
    notes = await stream_live(sink, kubeconfig=kubeconfig, context=context, resources=resources, kube=kube)
    lists = sink.lists
    lists["_notes"] = {"notes": notes}
    return lists


class SnapshotWriter(PageSink):
    """Write each resource's pages to ``<plural>.json`` as they arrive (kubectl's ``List`` shape, the same text
    ``write_snapshot`` writes), keeping only what ``keep(obj)`` returns (not None) in ``kept``.

    A file is written under a temporary name and renamed when complete, so a failed read leaves no half file.
    ``SourceError`` names a file that cannot be written."""

    def __init__(self, directory: Path, keep: Any = None) -> None:
        self.directory = directory
        self.keep = keep
        self.kept: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.written: list[Path] = []
        self.counts: dict[str, int] = {}
        self._fh: Any = None
        self._tmp: Path | None = None

    def begin(self, plural: str, kind: str, api_version: str) -> None:
        self._tmp = self.directory / f".{plural}.json.partial"
        try:
            self._fh = self._tmp.open("w", encoding="utf-8")
            self._fh.write('{\n  "apiVersion": "v1",\n  "kind": "List",\n  "metadata": {\n'
                           '    "resourceVersion": ""\n  },\n  "items": [')
        except OSError as exc:
            raise SourceError(str(self._tmp), None, f"cannot write: {exc.strerror or exc}") from None
        self.counts[plural] = 0

    def page(self, plural: str, items: list[dict[str, Any]]) -> None:
        fh = self._fh
        try:
            for item in items:
                fh.write(",\n" if self.counts[plural] else "\n")
                fh.write("    " + json.dumps(item, indent=2).replace("\n", "\n    "))
                self.counts[plural] += 1
        except OSError as exc:
            raise SourceError(str(self._tmp), None, f"cannot write: {exc.strerror or exc}") from None
        if self.keep is not None:
            for item in items:
                got = self.keep(item)
                if got is not None:
                    meta = item.get("metadata") or {}
                    self.kept[(str(item.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name")))] = got

    def end(self, plural: str) -> None:
        assert self._tmp is not None
        final = self.directory / f"{plural}.json"
        try:
            self._fh.write("\n  ]\n}\n" if self.counts[plural] else "]\n}\n")
            self._fh.close()
            os.replace(self._tmp, final)
        except OSError as exc:
            raise SourceError(str(final), None, f"cannot write: {exc.strerror or exc}") from None
        self._fh, self._tmp = None, None
        self.written.append(final)

    def skip(self, plural: str) -> None:
        if self._fh is not None:
            self._fh.close()
        if self._tmp is not None:
            self._tmp.unlink(missing_ok=True)
        self._fh, self._tmp = None, None
        self.counts.pop(plural, None)


def snapshot_from_lists(lists: dict[str, dict[str, Any]], source: str = "live") -> Snapshot:
    snap = Snapshot(source=source)
    for key, lst in lists.items():
        if key == "_notes":
            snap.notes.extend(lst.get("notes", []))
            continue
        _ingest(snap, [lst], key)
    return snap


def write_snapshot(lists: dict[str, dict[str, Any]], directory: str | Path) -> list[Path]:
    """Write one ``<plural>.json`` per resource, in ``kubectl get -o json`` shape; ``SourceError`` names a
    folder or file that cannot be written."""
    from fabricguard.userfiles import output_dir, write_text

    d = output_dir(Path(directory))
    written = []
    for key, lst in lists.items():
        if key == "_notes":
            continue
        p = d / f"{key}.json"
        write_text(p, json.dumps(lst, indent=2) + "\n")
        written.append(p)
    return written
