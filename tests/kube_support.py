"""What the tests that talk to kmock's Kubernetes emulator share: a kubeconfig for it, the emulator with the API
server behaviour the tests depend on, a server that never answers, and the example snapshots' generator
(examples/snapshots/generate.py) loaded once as a module.

:class:`Emulator` is kmock's KubernetesEmulator taught what a real API server does and kmock leaves out:

* **RBAC.** With ``rbac`` set (from the rendered manifests: :meth:`Rbac.from_manifests`), every request is
  authorized as the user its bearer token maps to (``tokens``): ClusterRoles through ClusterRoleBindings, Roles
  only in their namespace, ``resourceNames``, subresources. A request outside the role gets the 403 a real
  server gives (its message names user, verb, resource, group and namespace), and is recorded in ``denied``.
* **Selectors.** ``labelSelector`` and ``fieldSelector`` filter lists and watches (kmock returns everything).
* **resourceVersion** (``versions=True``): bumped on every write and delete; a merge patch carrying a stale one
  is a 409. A list answers the current version; a watch from a version streams only what changed after it
  (deletions included), not every object again.
* **Compaction.** :meth:`Emulator.compact` forgets the history up to now (etcd's compaction): a watch from an
  older version then gets 410 Gone with the API server's Status (reason ``Expired``), as an ``ERROR`` event
  (``expire_as="event"``, what the API server sends) or as an HTTP 410 answer (``"http"``); so does a list that
  asks for an exact older version. :meth:`Emulator.end_watches` ends the open watches (a server's
  ``timeoutSeconds``, a restarted apiserver) and :meth:`Emulator.hold_watches` keeps new ones waiting: a test
  makes changes in that gap, compacts, then :meth:`Emulator.release_watches`.
* **Latency.** ``delay_s`` before every answer: a slow API server.
* **Stalls.** :meth:`Emulator.stall` (a resource's plural) makes its lists hang and its watches, open or new,
  go silent after their headers (an API server host gone behind a load balancer, a black-holed connection)
  until :meth:`Emulator.heal`; ``expire_every_watch`` answers every watch with 410 Gone (a 410 storm).
* **Bookmarks.** With ``bookmark_s``, a watch that allows bookmarks and has been quiet that long gets a
  ``BOOKMARK`` with the current version, as the API server's watch cache sends one about once a minute.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import socket
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs
from kmock import KubernetesEmulator
from kmock._internal.k8s import KubernetesError

ROOT = Path(__file__).resolve().parents[1]
# Where kmock's emulator keeps each kind the example snapshots hold (group/version/plural).
RESOURCE = {
    "Node": "v1/nodes",
    "Pod": "v1/pods",
    "Event": "v1/events",
    "DaemonSet": "apps/v1/daemonsets",
    "ControllerRevision": "apps/v1/controllerrevisions",
    "ConfigMap": "v1/configmaps",
    "NetworkAttachmentDefinition": "k8s.cni.cncf.io/v1/network-attachment-definitions",
}


def kubeconfig(tmp_path: Path, url: str, token: str = "t", *, name: str = "kubeconfig") -> str:
    """A kubeconfig file for a cluster at ``url`` with a bearer ``token``; returns its path."""
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kmock", "cluster": {"server": url}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "kmock", "context": {"cluster": "kmock", "user": "u"}}],
        "current-context": "kmock",
    }
    path = tmp_path / name
    path.write_text(json.dumps(cfg))
    return str(path)


# ---------------------------------------------------------------------------------------------- RBAC


@dataclass(frozen=True)
class Attributes:
    """What the API server authorizes: a request's verb on a resource (RBAC's request attributes)."""

    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str | None
    name: str | None

    def describe(self, user: str) -> str:
        res = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        what = f'{res}.{self.group} "{self.name}"' if self.name and self.group else (
            f'{res} "{self.name}"' if self.name else f"{res}.{self.group}" if self.group else res)
        where = f' in the namespace "{self.namespace}"' if self.namespace else " at the cluster scope"
        group = f'"{self.group}"' if self.group else '""'
        return (f'{what} is forbidden: User "{user}" cannot {self.verb} resource "{res}" in API group {group}'
                f"{where}")


def attributes(method: str, path: str, params: dict[str, str]) -> Attributes | None:
    """A resource request's attributes from its method, path and query; None for a non-resource path."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 2:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return None
    if not rest:
        return None
    namespace = None
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else ""
    m = method.upper()
    if m == "GET":
        verb = "watch" if params.get("watch") in ("true", "1") else ("get" if name else "list")
    elif m == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}[m]
    return Attributes(verb, group, resource, sub, namespace, name)


def _rule_allows(rule: dict[str, Any], a: Attributes) -> bool:
    res = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    groups, resources, verbs = rule.get("apiGroups") or [], rule.get("resources") or [], rule.get("verbs") or []
    if not ("*" in groups or a.group in groups):
        return False
    if not ("*" in resources or res in resources):
        return False
    if not ("*" in verbs or a.verb in verbs):
        return False
    names = rule.get("resourceNames")
    return not names or (a.name in names and a.verb not in ("list", "watch", "create", "deletecollection"))


@dataclass
class Rbac:
    """Who may do what: ``cluster[user]`` the rules of the user's ClusterRoles (every namespace),
    ``namespaced[user]`` (namespace, rules) of its Roles; ``admins`` may do anything (system:masters)."""

    cluster: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    namespaced: dict[str, list[tuple[str, list[dict[str, Any]]]]] = field(default_factory=dict)
    admins: set[str] = field(default_factory=set)

    @classmethod
    def from_manifests(cls, objs: list[dict[str, Any]], rbac: Rbac | None = None) -> Rbac:
        """The roles and bindings among rendered manifests, added to ``rbac``; subjects: ServiceAccounts
        (``system:serviceaccount:NS:NAME``) and Users."""
        out = rbac or cls()
        roles = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o.get("rules") or []
                 for o in objs if o.get("kind") in ("ClusterRole", "Role")}
        for b in objs:
            if b.get("kind") not in ("ClusterRoleBinding", "RoleBinding"):
                continue
            ref = b["roleRef"]
            ns = b["metadata"].get("namespace")
            rules = roles.get((ref["kind"], ns if ref["kind"] == "Role" else None, ref["name"]))
            if rules is None:
                continue  # a binding to a role that was not rendered grants nothing
            for subj in b.get("subjects") or ():
                user = (f"system:serviceaccount:{subj.get('namespace')}:{subj['name']}"
                        if subj["kind"] == "ServiceAccount" else subj["name"])
                if b["kind"] == "ClusterRoleBinding":
                    out.cluster.setdefault(user, []).extend(rules)
                elif ref["kind"] == "ClusterRole":
                    out.namespaced.setdefault(user, []).append((ns, rules))
                else:
                    out.namespaced.setdefault(user, []).append((ns, rules))
        return out

    def bind(self, user: str, roles: list[dict[str, Any]]) -> Rbac:
        """Bind ``user`` to rendered ClusterRoles and Roles that come without bindings."""
        binds = [{"kind": "ClusterRoleBinding" if r["kind"] == "ClusterRole" else "RoleBinding",
                  "metadata": {"name": r["metadata"]["name"], "namespace": r["metadata"].get("namespace")},
                  "roleRef": {"kind": r["kind"], "name": r["metadata"]["name"]},
                  "subjects": [{"kind": "User", "name": user}]} for r in roles]
        return Rbac.from_manifests([*roles, *binds], self)

    def allows(self, user: str, a: Attributes) -> bool:
        if user in self.admins:
            return True
        if any(_rule_allows(r, a) for r in self.cluster.get(user, ())):
            return True
        return a.namespace is not None and any(
            ns == a.namespace and any(_rule_allows(r, a) for r in rules) for ns, rules in self.namespaced.get(user, ()))


@attrs.frozen
class Forbidden(KubernetesError):
    status: int = 403
    reason: str = "Forbidden"


@attrs.frozen
class Conflict(KubernetesError):
    status: int = 409
    reason: str = "Conflict"


@attrs.frozen
class Expired(KubernetesError):
    status: int = 410
    reason: str = "Expired"
    details: Any = attrs.field(factory=dict)


def expired_status(rv: int, compacted: int) -> dict[str, Any]:
    """The Status the API server sends for a resourceVersion older than its compacted history."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f"too old resource version: {rv} ({compacted})", "reason": "Expired", "code": 410}


def _version(value: Any) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


# ------------------------------------------------------------------------------------------ selectors


def _field(obj: dict[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return "" if cur is None else str(cur)


def selected(obj: dict[str, Any], label_selector: str | None, field_selector: str | None) -> bool:
    """Whether ``obj`` matches the (equality and existence) selectors the API server supports for these tests."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, (label_selector or "").split(",")):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k.strip()) == v.strip():
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k.strip()) != v.strip():
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term.strip() not in labels:
            return False
    for term in filter(None, (field_selector or "").split(",")):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if _field(obj, k.strip()) == v.strip():
                return False
        else:
            k, v = term.replace("==", "=").split("=", 1)
            if _field(obj, k.strip()) != v.strip():
                return False
    return True


# ------------------------------------------------------------------------------------------- emulator


BUILTIN = ("v1/nodes", "v1/pods", "v1/events", "v1/configmaps", "v1/namespaces", "apps/v1/daemonsets",
           "apps/v1/deployments", "apps/v1/controllerrevisions", "batch/v1/jobs", "coordination.k8s.io/v1/leases",
           "admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
           "admissionregistration.k8s.io/v1/validatingwebhookconfigurations")


@attrs.define(kw_only=True)
class Emulator(KubernetesEmulator):
    """kmock's emulator with RBAC, selectors, resourceVersions and latency (see the module's docstring).

    Subclasses that serve some requests themselves override :meth:`_serve_k8s`, never ``_handle``: RBAC and the
    delay apply to every resource request."""

    rbac: Rbac | None = None
    tokens: dict[str, dict[str, Any]] = attrs.field(factory=dict)  # bearer token -> user info
    denied: list[str] = attrs.field(factory=list)
    delay_s: float = 0.0
    versions: bool = False
    rv: int = 1000
    compacted: int = 0  # a watch from a version older than this is 410 Gone
    expire_as: str = "event"  # how that 410 is sent: "event" (a watch ERROR event) or "http" (the answer's status)
    expired: list[str] = attrs.field(factory=list)  # "PATH@VERSION" of each request answered 410
    tombstones: list[tuple[Any, str | None, str, int]] = attrs.field(factory=list)  # (resource, ns, name, rv)
    bookmark_s: float | None = None  # quiet watches that allow bookmarks get one this often (the API server: 1 min)
    expire_every_watch: bool = False  # a 410 storm: every watch gets 410 Gone, whatever version it asks for
    stalled: set[str] = attrs.field(factory=set)  # plurals whose lists hang and whose watches go silent
    _healed: asyncio.Event = attrs.field(factory=asyncio.Event)
    _gate: asyncio.Event = attrs.field(factory=asyncio.Event)
    _ending: asyncio.Event = attrs.field(factory=asyncio.Event)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        for res in BUILTIN:  # a real API server serves its built-in kinds even while none exists
            self.resources[res].verbs = {"list", "watch", "get", "create", "patch", "update", "delete"}
        self._gate.set()

    def compact(self) -> int:
        """Forget the history up to the current version (etcd's compaction); returns that version."""
        self.compacted = self.rv
        self.tombstones = [t for t in self.tombstones if t[3] > self.compacted]
        return self.compacted

    def end_watches(self) -> None:
        """End every open watch stream cleanly, as the server does when a watch's ``timeoutSeconds`` is up."""
        self._ending.set()
        self._ending = asyncio.Event()

    def hold_watches(self) -> None:
        """New watches get their headers, then wait (nothing streamed) until :meth:`release_watches`."""
        self._gate.clear()

    def release_watches(self) -> None:
        self._gate.set()

    def stall(self, plural: str) -> None:
        """Lists of ``plural`` hang, and its watches (open ones too) send nothing more, until :meth:`heal`."""
        self.stalled.add(plural)

    def heal(self, plural: str) -> None:
        self.stalled.discard(plural)
        self._healed.set()
        self._healed = asyncio.Event()

    async def _until_healed(self, plural: str) -> None:
        while plural in self.stalled:
            await self._healed.wait()

    def user_of(self, request: Any) -> dict[str, Any]:
        auth = request.headers.get("Authorization", "")
        return self.tokens.get(auth.removeprefix("Bearer ").strip(), {"username": "system:anonymous"})

    async def _handle(self, request: Any) -> Any:
        if self.delay_s and request.resource is not None:
            await asyncio.sleep(self.delay_s)
        a = attributes(str(request.method.value), request.url.path, dict(request.params))
        if self.rbac is not None and a is not None:
            user = self.user_of(request)
            name = user.get("username", "system:anonymous")
            if "system:masters" not in (user.get("groups") or []) and not self.rbac.allows(name, a):
                msg = a.describe(name)
                self.denied.append(msg)
                raise Forbidden(message=msg)
        if a is not None and a.verb == "list":
            await self._until_healed(a.resource)
        if self.versions and a is not None and a.verb in ("list", "watch"):
            self._expire(request, a)
        if self.versions and a is not None and a.verb == "delete" and request.resource is not None:
            self.rv += 1
            self.tombstones.append((request.resource, a.namespace, a.name or "", self.rv))
        if self.versions and a is not None and a.verb in ("create", "patch", "update") and isinstance(
                request.data, dict):
            if a.verb != "create":
                self._precondition(request)
            # The new version goes in with the write, so the answer carries it (as the API server's does).
            self.rv += 1
            request.data.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        return await self._serve_k8s(request)

    async def _serve_k8s(self, request: Any) -> Any:
        return await super()._handle(request)

    def _expire(self, request: Any, a: Attributes) -> None:
        """410 as an HTTP answer: a list that asks for an exact compacted version, or (``expire_as="http"``) a
        watch from one. A watch otherwise gets its 410 as an ``ERROR`` event (:meth:`_serve_watch`)."""
        params = dict(request.params)
        since = _version(params.get("resourceVersion"))
        if since is None or since == 0 or since >= self.compacted:
            return
        exact = a.verb == "list" and params.get("resourceVersionMatch") == "Exact"
        if exact or (a.verb == "watch" and self.expire_as == "http"):
            self.expired.append(f"{request.url.path}@{since}")
            raise Expired(message=expired_status(since, self.compacted)["message"])

    def _stored(self, request: Any, a: Attributes) -> Any:
        md = (request.data.get("metadata") or {}) if isinstance(request.data, dict) else {}
        key = (request.resource, a.namespace or md.get("namespace"), a.name or md.get("name"))
        return self.objects[key] if key in self.objects else None  # noqa: SIM401 (kmock has no .get)

    def _precondition(self, request: Any) -> None:
        data = request.data
        ctype = (request.headers.get("Content-Type") or "").split(";")[0]
        if not isinstance(data, dict) or ctype != "application/merge-patch+json":
            return
        want = (data.get("metadata") or {}).get("resourceVersion")
        a = attributes(str(request.method.value), request.url.path, dict(request.params))
        obj = self._stored(request, a) if a is not None else None
        if want is None or obj is None or obj.deleted:
            return
        have = (obj.raw.get("metadata") or {}).get("resourceVersion")
        if have is not None and str(want) != str(have):
            raise Conflict(message=f'Operation cannot be fulfilled on {a.resource} "{a.name}": the object has been '
                                   "modified; please apply your changes to the latest version and try again")

    async def _serve_list(self, request: Any) -> Any:
        out = await super()._serve_list(request)
        params = dict(request.params)
        sel, fsel = params.get("labelSelector"), params.get("fieldSelector")
        if sel or fsel:
            out["items"] = [o for o in out["items"] if selected(o, sel, fsel)]
        if self.versions:
            out["metadata"]["resourceVersion"] = str(self.rv)
        return out

    async def _serve_watch(self, request: Any) -> Any:
        params = dict(request.params)
        sel, fsel = params.get("labelSelector"), params.get("fieldSelector")
        since = _version(params.get("resourceVersion")) if self.versions else None
        ending = self._ending
        a = attributes(str(request.method.value), request.url.path, params)
        plural = a.resource if a is not None else ""
        source = super()._serve_watch(request).__aiter__()
        try:
            yield await anext(source)  # the headers: the stream has started
            await self._gate.wait()
            await self._until_healed(plural)
            if self.expire_every_watch or (since and since < self.compacted):  # its history is gone: list again
                self.expired.append(f"{request.url.path}@{since}")
                yield {"type": "ERROR", "object": expired_status(since or 0, self.compacted)}
                return
            if since:  # what was deleted after the client's version (kmock replays only the living)
                for res, ns, name, rv in self.tombstones:
                    if res == request.resource and rv > since and request.namespace in (None, ns):
                        yield {"type": "DELETED", "object": {"metadata": {"name": name, "namespace": ns,
                                                                          "resourceVersion": str(rv)}}}
            bookmarks = self.bookmark_s is not None and params.get("allowWatchBookmarks") in ("true", "1")
            nxt: asyncio.Future[Any] | None = None
            while True:
                nxt = nxt or asyncio.ensure_future(anext(source))
                end = asyncio.ensure_future(ending.wait())
                done, _ = await asyncio.wait({nxt, end}, return_when=asyncio.FIRST_COMPLETED,
                                             timeout=self.bookmark_s if bookmarks else None)
                end.cancel()
                if not done:  # quiet for a while: the watch cache's periodic BOOKMARK (its current version)
                    await self._until_healed(plural)
                    yield {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": str(self.rv)}}}
                    continue
                if nxt not in done:  # the server ends the watch
                    nxt.cancel()
                    with contextlib.suppress(BaseException):
                        await nxt
                    return
                nxt, fut = None, nxt
                try:
                    ev = fut.result()
                except StopAsyncIteration:
                    return
                if not isinstance(ev, dict):
                    yield ev
                    continue
                obj = ev.get("object") or {}
                if ev.get("type") == "DELETED":  # kmock sends the last stored version; the deletion has its own
                    md = obj.get("metadata") or {}
                    rvs = [t[3] for t in self.tombstones
                           if t[0] == request.resource and t[1:3] == (md.get("namespace"), md.get("name"))]
                    if rvs:
                        obj = {**obj, "metadata": {**md, "resourceVersion": str(max(rvs))}}
                        ev = {**ev, "object": obj}
                have = _version((obj.get("metadata") or {}).get("resourceVersion"))
                if since and ev.get("type") != "DELETED" and have is not None and have <= since:
                    continue  # the client's list already held this version
                await self._until_healed(plural)  # a stalled stream holds what changed meanwhile
                if (sel or fsel) and not selected(obj, sel, fsel):
                    if ev.get("type") == "MODIFIED":  # as the API server does: an object that stops matching is
                        yield {**ev, "type": "DELETED"}  # DELETED for this watch (here also one that never matched)
                    continue
                yield ev
        finally:
            with contextlib.suppress(BaseException):
                await source.aclose()


# ----------------------------------------------------------------------------------------- silent server


class SilentServer:
    """An API server that accepts TCP connections and never answers a byte (a hung apiserver, a black-holed
    load balancer). ``url`` is its address; connections stay open until the context ends."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        self._stop = False
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.accepted.append(conn)  # read nothing, answer nothing

    def __enter__(self) -> SilentServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop = True
        self._thread.join(2)
        for c in self.accepted:
            with contextlib.suppress(OSError):
                c.close()
        self.sock.close()


@contextlib.contextmanager
def silent_server() -> Iterator[SilentServer]:
    with SilentServer() as s:
        yield s


@contextlib.contextmanager
def unaccepting_server() -> Iterator[str]:
    """An address whose TCP connects time out: a listening socket that never accepts, its backlog (0) already
    full, so the kernel drops every further SYN (a host gone behind a load balancer, a firewall that drops)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(0)
    filler = socket.create_connection(sock.getsockname(), timeout=1.0)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        filler.close()
        sock.close()


def _load_generate() -> ModuleType:
    name = "fg_example_snapshots"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / "snapshots" / "generate.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


gen = _load_generate()
