"""The one module that talks to the Kubernetes API (kr8s underneath): typed errors, timeouts, declared permissions.

Every request fabricguard makes goes through :class:`Kube`:

* **Typed errors.** A refusal is a :class:`Conflict`, :class:`NotFound`, :class:`Forbidden`, :class:`Gone`,
  :class:`Invalid` or a plain :class:`KubeError` (other statuses); a server that cannot be reached is
  :class:`Unreachable`, one that does not answer in time :class:`TimedOut`. Each names the server URL and the
  object (``GET /api/v1/nodes/n1 at https://10.0.0.1:6443``), so a caller prints it as one line.
* **Timeouts on every call.** A connect and a read timeout per request (:class:`Timeouts`), and a deadline for a
  whole call: a paged list, retries included, ends by ``list_s``. Only idempotent reads are retried (a connection
  refused, a timeout, 429 or 5xx), with a short backoff and within the deadline; a write is sent once.
  ``FABRICGUARD_API_TIMEOUT`` (seconds) sets the read timeout (and scales the others) for every command.
* **Declared permissions.** A client built with ``grants`` (a table of :class:`Grant`: group, resource,
  subresource, verb, scope) refuses, before it is sent, a request that the table does not declare
  (:class:`Undeclared`); ``render controller``, ``render agent``, ``render webhook``, ``render transition-rbac``
  and ``render install`` (with the optional preflight ClusterRole) build their Roles from the same tables
  (:func:`rbac_rules`), so the code cannot make a call that its rendered role would refuse.

An update carries the ``resourceVersion`` it read (a concurrent writer is a conflict, not a lost update), and every
patch names its type (a JSON merge patch replaces whole lists, so callers choose it only for objects they own).

By concern: the typed errors live in :mod:`fabricguard.kube_errors`, the permission tables in
:mod:`fabricguard.rbac`, the kubeconfig checks in :mod:`fabricguard.kubeconfig`; this module is the client and
re-exports their names, so ``from fabricguard.kube import Kube, KubeError, Grant`` keeps working.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from fabricguard.kube_errors import (
    BY_STATUS,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    KubeError,
    NotFound,
    TimedOut,
    Undeclared,
    Unreachable,
    retry_after_seconds,
    status_of,
    unreachable,
)
from fabricguard.kubeconfig import check_kubeconfig, kubeconfig_path, kubeconfig_problem
from fabricguard.rbac import Grant, Permissions, Scope, Verb, grants, group_of, rbac_rules, verb_of
from fabricguard.userfiles import SourceError

__all__ = [
    "Conflict", "Forbidden", "Gone", "Grant", "Invalid", "Kube", "KubeError", "Latency", "NotFound", "PatchType",
    "Permissions", "Scope", "TimedOut", "Timeouts", "Undeclared", "Unreachable", "Verb", "check_kubeconfig",
    "grants", "group_of", "kubeconfig_path", "kubeconfig_problem", "rbac_rules", "unreachable",
]

PatchType = Literal["merge", "strategic", "json"]
_CONTENT_TYPE = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
}
TIMEOUT_ENV = "FABRICGUARD_API_TIMEOUT"
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
ATTEMPTS = 3  # of an idempotent read, within its deadline


# ------------------------------------------------------------------------------------------- timeouts


@dataclass(frozen=True)
class Timeouts:
    """Seconds: ``connect`` a TCP+TLS connection, ``read`` one answer, ``call`` a whole get (retries included),
    ``list`` a whole paged list. The defaults end any one-shot command within 45 s against a silent server."""

    connect: float = 5.0
    read: float = 15.0
    call: float = 20.0
    list: float = 30.0

    @classmethod
    def from_env(cls) -> Timeouts:
        raw = os.environ.get(TIMEOUT_ENV, "").strip()
        if not raw:
            return cls()
        try:
            read = float(raw)
        except ValueError:
            raise SourceError(TIMEOUT_ENV, None, f"{raw!r} is not a number of seconds") from None
        if not 0 < read <= 600:
            raise SourceError(TIMEOUT_ENV, None, f"{raw!r}: use between 0 and 600 seconds")
        return cls(connect=min(5.0, read), read=read, call=read * 4 / 3, list=read * 2)


# ---------------------------------------------------------------------------------------- permissions

# --------------------------------------------------------------------------------------------- client


def _path(plural: str, name: str | None, sub: str | None = None) -> str:
    return "/".join(p for p in (plural, name, sub) if p)


def _api_path(api_version: str, namespace: str | None, rel: str) -> str:
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    return f"{base}/namespaces/{namespace}/{rel}" if namespace else f"{base}/{rel}"


class Kube:
    """One API server connection; create with ``await Kube.connect(kubeconfig, context)``."""

    def __init__(self, api: Any, *, timeouts: Timeouts | None = None, permissions: Permissions | None = None,
                 server: str = "") -> None:
        self._api = api
        self._bearer: str | None = None  # the Authorization header after a re-authentication (a 401)
        self.timeouts = timeouts or Timeouts.from_env()
        self.permissions = permissions
        self.server = server or str(getattr(getattr(api, "auth", None), "server", "") or "the API server")
        self.latency = Latency()
        # kr8s opens its HTTP session on the first request that finds none; requests sent at once on a fresh
        # connection (a pass lists 16 kinds, 8 at a time) each opened one and closed the one before, under a
        # request still using it. The first request goes alone; the rest share the session it opened.
        self._first = _FirstContact()

    @property
    def api(self) -> Any:
        """The kr8s API object (for tests that drive it directly)."""
        return self._api

    def with_permissions(self, permissions: Permissions | None) -> Kube:
        """The same connection, checked against ``permissions``."""
        other = Kube(self._api, timeouts=self.timeouts, permissions=permissions, server=self.server)
        other.latency = self.latency
        other._first = self._first
        return other

    @classmethod
    async def connect(cls, kubeconfig: str | None = None, context: str | None = None, *,
                      timeouts: Timeouts | None = None, permissions: Permissions | None = None) -> Kube:
        """Connect with the kubeconfig kr8s would read (or the pod's service account).

        A kubeconfig that cannot work is a ``KubeError`` naming the file and what is wrong, before kr8s fails on it
        less clearly. No request is made here (kr8s' version check would be one without a timeout): the first
        call's timeouts apply to the first contact.
        """
        import httpx
        from kr8s.asyncio import Api  # public (kr8s' own Api class); the range is pinned in pyproject.toml

        problem = kubeconfig_problem(kubeconfig, context)
        if problem:
            raise KubeError(None, problem)
        try:
            t = timeouts or Timeouts.from_env()
        except SourceError as exc:
            raise KubeError(None, str(exc)) from None
        where = f"--kubeconfig {kubeconfig}" if kubeconfig else "the kubeconfig or the pod's service account"
        api = Api(url=None, kubeconfig=kubeconfig, serviceaccount=None, namespace=None, context=context,
                  bypass_factory=True)
        api.timeout = httpx.Timeout(t.read, connect=t.connect)
        try:
            await asyncio.wait_for(api.auth, timeout=t.call)  # a credential plugin may run here
        except TimeoutError:
            raise TimedOut(None, f"{where}: loading the credentials took more than {t.call:g} s") from None
        except Exception as exc:  # kr8s raises many kinds for credentials it cannot load
            raise KubeError(None, f"{where}: cannot load the credentials ({type(exc).__name__}: {exc})") from None
        server = str(api.auth.server or "")
        return cls(api, timeouts=t, permissions=permissions, server=server)

    # ------------------------------------------------------------------------------------- requests

    def _check(self, method: str, api_version: str, rel: str, namespace: str | None, watch: bool) -> None:
        if self.permissions is None or not rel:  # not a resource (/version): every authenticated user may
            return
        parts = rel.split("/")
        name = parts[1] if len(parts) > 1 else None
        sub = parts[2] if len(parts) > 2 else ""
        g = Grant(group_of(api_version), parts[0], sub, verb_of(method, name, watch))
        if not self.permissions.allows(g, namespace):
            where = f" in namespace {namespace}" if namespace else ""
            raise Undeclared(
                None, f"{method} {_api_path(api_version, namespace, rel)}: {g.verb} on {g.rbac_resource}"
                f"{'.' + g.group if g.group else ''}{where} is not in the {self.permissions.component or 'client'}'s "
                "permission table (add it there: its rendered role grants only that table)",
                server=self.server, what=f"{method} {rel}")

    def _error(self, method: str, path: str, status: int | None, detail: str, kind: type[KubeError], *,
               reason: str = "", causes: tuple[dict[str, str], ...] = (),
               retry_after: float | None = None) -> KubeError:
        what = f"{method} {path}"
        code = f"HTTP {status}: " if status else ""
        return kind(status, f"{what} at {self.server}: {code}{detail}", server=self.server, what=what,
                    reason=reason, causes=causes, retry_after=retry_after)

    async def _reauthenticate(self) -> None:
        """Load the credentials again (a rotated service-account token, an expired exec-plugin token), as kr8s
        and kopf do on a 401."""
        t = self.timeouts
        try:
            await asyncio.wait_for(self._api.reauthenticate(), timeout=t.call)
        except Exception:  # the retry that follows says what the server thinks of the credentials
            return
        # kr8s' session keeps the header it was made with: from now on every request names the fresh token.
        token = getattr(self._api.auth, "token", None)
        self._bearer = f"Bearer {token}" if token else None

    async def _once(self, method: str, api_version: str, rel: str, namespace: str | None, timeout: float,
                    reauthenticated: bool = False, **kwargs: Any) -> Any:
        if not self._first.done:
            t0 = time.monotonic()
            try:
                async with asyncio.timeout(timeout):
                    await self._first.lock.acquire()
            except TimeoutError:
                raise self._error(method, str(kwargs.get("base") or _api_path(api_version, namespace, rel)), None,
                                  f"no answer within {time.monotonic() - t0:.3g} s (waiting for the first request "
                                  "on this connection)", TimedOut) from None
            try:
                if not self._first.done:
                    answer = await self._request(method, api_version, rel, namespace,
                                                 max(0.05, timeout - (time.monotonic() - t0)), reauthenticated,
                                                 **kwargs)
                    self._first.done = True
                    return answer
            finally:
                self._first.lock.release()
        return await self._request(method, api_version, rel, namespace, timeout, reauthenticated, **kwargs)

    async def _request(self, method: str, api_version: str, rel: str, namespace: str | None, timeout: float,
                       reauthenticated: bool = False, **kwargs: Any) -> Any:
        import httpx
        import kr8s

        path = str(kwargs.get("base") or _api_path(api_version, namespace, rel))
        if self._bearer is not None:
            kwargs["headers"] = {**(kwargs.get("headers") or {}), "Authorization": self._bearer}
        t0 = time.monotonic()
        try:
            async with asyncio.timeout(timeout):
                async with self._api.call_api(method, version=api_version, namespace=namespace, url=rel,
                                              raise_for_status=False, **kwargs) as resp:
                    status = resp.status_code
                    body = resp.content
                    retry_after = retry_after_seconds(resp.headers.get("Retry-After")) if status in (429, 503) else None
        except (TimeoutError, httpx.TimeoutException, kr8s.APITimeoutError):  # kr8s wraps httpx's in its own
            self.latency.observe(time.monotonic() - t0)  # no answer is a measurement too: at least this slow
            raise self._error(method, path, None, f"no answer within {time.monotonic() - t0:.3g} s",
                              TimedOut) from None
        except (httpx.TransportError, OSError) as exc:  # refused, reset, DNS, TLS
            raise self._error(method, path, None, f"cannot connect ({type(exc).__name__}: {exc})",
                              Unreachable) from None
        except Exception as exc:  # the edge: whatever else kr8s or httpx raise leaves typed
            raise self._error(method, path, None, f"request failed ({type(exc).__name__}: {exc})",
                              KubeError) from None
        self.latency.observe(time.monotonic() - t0)
        if status == 401 and not reauthenticated:
            # A 401 is not processed: load the credentials again and send it once more (any verb).
            await self._reauthenticate()
            left = max(0.05, timeout - (time.monotonic() - t0))
            return await self._request(method, api_version, rel, namespace, left, True, **kwargs)
        if status >= 400:
            detail, reason, causes = status_of(body)
            raise self._error(method, path, status, detail or "refused", BY_STATUS.get(status, KubeError),
                              reason=reason, causes=causes, retry_after=retry_after)
        try:
            return json.loads(body) if body else None
        except ValueError:
            raise self._error(method, path, status, f"the answer is not JSON: {body[:80]!r}", KubeError) from None

    async def _call(self, method: str, api_version: str, rel: str, namespace: str | None = None, *,
                    deadline: float | None = None, **kwargs: Any) -> Any:
        """One request; a read (GET) is retried on no answer, 429 and 5xx until its deadline."""
        self._check(method, api_version, rel, namespace, False)
        retry = method == "GET"
        t0 = time.monotonic()
        end = t0 + (deadline if deadline is not None else (self.timeouts.call if retry else self.timeouts.read))
        backoff = 0.25
        for attempt in range(1, ATTEMPTS + 1):
            left = end - time.monotonic()
            try:
                return await self._once(method, api_version, rel, namespace, max(0.05, left), **kwargs)
            except (Unreachable, TimedOut, KubeError) as exc:
                transient = isinstance(exc, Unreachable | TimedOut) or exc.status in RETRY_STATUSES
                if (not (retry and transient) or isinstance(exc, Undeclared) or attempt == ATTEMPTS
                        or end - time.monotonic() <= backoff):
                    if isinstance(exc, TimedOut) and retry:
                        # The time it waited, not the deadline: the last retry gives up when less than one
                        # backoff is left, so "30 s" would be said after 16-18 s (issue 24).
                        waited = time.monotonic() - t0
                        raise self._error(method, _api_path(api_version, namespace, rel), None,
                                          f"no answer within {waited:.3g} s ({attempt} attempt(s), deadline "
                                          f"{deadline or self.timeouts.call:.3g} s)", TimedOut) from None
                    raise
                wait = max(backoff, exc.retry_after or 0.0)
                if wait >= end - time.monotonic():  # the server asks for longer than the deadline leaves
                    raise
            await asyncio.sleep(wait)
            backoff = min(backoff * 2, 2.0)
        raise AssertionError("unreachable: the last attempt raises")  # pragma: no cover

    # ----------------------------------------------------------------------------------------- verbs

    async def version(self) -> dict[str, Any]:
        """The server's ``/version`` (a read: retried, within the get deadline)."""
        out = await self._call("GET", "", "", None, base="/version")
        return out if isinstance(out, dict) else {}

    async def get(self, api_version: str, plural: str, name: str,
                  namespace: str | None = None) -> dict[str, Any] | None:
        """The object, or None when it (or its resource type) does not exist."""
        try:
            obj = await self._call("GET", api_version, _path(plural, name), namespace)
        except NotFound:
            return None
        return obj if isinstance(obj, dict) else None

    async def served(self, api_version: str, plural: str, namespace: str | None = None) -> bool:
        """Whether the API server serves this resource (a CRD that is not installed is not)."""
        try:
            await self._call("GET", api_version, plural, namespace, params={"limit": 1})
        except NotFound:
            return False
        return True

    async def pages(self, api_version: str, plural: str, namespace: str | None = None, *,
                    label_selector: str | None = None, field_selector: str | None = None, limit: int = 500,
                    meta: dict[str, Any] | None = None, per_page: bool = False,
                    ) -> AsyncIterator[list[dict[str, Any]]]:
        """The list a page at a time (the server's continue token), all within the list deadline; items get
        their ``kind``/``apiVersion`` as kubectl shows them. ``meta`` receives the last page's list metadata
        (its ``resourceVersion``, to watch from). ``per_page``: the deadline holds for each page instead of
        the whole list, so a list of 200,000 pods that the server answers page after page always finishes
        (the server's continue token expires on its own, with 410, after about 5 minutes)."""
        cont: str | None = None
        end = time.monotonic() + self.timeouts.list
        kind = ""
        while True:
            params: dict[str, Any] = {"limit": limit}
            if label_selector:
                params["labelSelector"] = label_selector
            if field_selector:
                params["fieldSelector"] = field_selector
            if cont:
                params["continue"] = cont
            left = end - time.monotonic()
            if left <= 0:
                raise self._error("GET", _api_path(api_version, namespace, plural), None,
                                  f"the list did not finish within {self.timeouts.list:.3g} s", TimedOut)
            body = await self._call("GET", api_version, plural, namespace, deadline=left, params=params) or {}
            kind = kind or str(body.get("kind", "")).removesuffix("List")
            items = [i for i in body.get("items") or () if isinstance(i, dict)]
            for item in items:
                if kind:
                    item.setdefault("kind", kind)
                item.setdefault("apiVersion", api_version)
            md = body.get("metadata") or {}
            if meta is not None:
                meta.clear()
                meta.update(md)
            yield items
            cont = md.get("continue")
            if not cont:
                return
            if per_page:
                end = time.monotonic() + self.timeouts.list

    async def list_page(self, api_version: str, plural: str, namespace: str | None = None, *,
                        label_selector: str | None = None, field_selector: str | None = None,
                        ) -> tuple[list[dict[str, Any]], str]:
        """Every item (page by page) and the list's resourceVersion (to watch from), within the list deadline."""
        items: list[dict[str, Any]] = []
        meta: dict[str, Any] = {}
        async for page in self.pages(api_version, plural, namespace, label_selector=label_selector,
                                     field_selector=field_selector, meta=meta):
            items.extend(page)
        return items, str(meta.get("resourceVersion") or "")

    async def list(self, api_version: str, plural: str, namespace: str | None = None, *,
                   label_selector: str | None = None, field_selector: str | None = None) -> list[dict[str, Any]]:
        """Every item, page by page, within the list deadline."""
        items, _rv = await self.list_page(api_version, plural, namespace, label_selector=label_selector,
                                          field_selector=field_selector)
        return items

    async def watch(self, api_version: str, plural: str, namespace: str | None = None, *,
                    resource_version: str = "", label_selector: str | None = None,
                    field_selector: str | None = None, timeout_s: int = 300,
                    idle_s: float | None = None) -> AsyncIterator[dict[str, Any]]:
        """The watch events (``{"type", "object"}``) from ``resource_version`` until the server ends the stream.

        Two deadlines, so that no watch can hang: the stream ends (cleanly) by ``timeout_s`` plus the read
        timeout even where the server forgets its ``timeoutSeconds``; and a stream silent for ``idle_s`` (an
        API server host gone behind a load balancer after sending the headers) is ``TimedOut``. With
        ``allowWatchBookmarks`` a live API server sends a BOOKMARK about once a minute (the watch cache's
        ``bookmarkFrequency``), so a healthy quiet watch is never silent that long; ``idle_s`` None is
        ``timeout_s`` plus the read timeout. An ``ERROR`` event with 410 is ``Gone`` (list again). Whatever
        goes wrong leaves here as a :class:`KubeError` (kr8s' ``APITimeoutError`` included)."""
        self._check("GET", api_version, plural, namespace, True)
        params: dict[str, Any] = {"watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": timeout_s}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        if resource_version and resource_version != "...":
            params["resourceVersion"] = resource_version
        path = _api_path(api_version, namespace, plural)
        whole = timeout_s + self.timeouts.read
        idle = min(whole, idle_s) if idle_s is not None else whole
        import httpx
        import kr8s

        loop = asyncio.get_running_loop()
        started = False
        t0 = loop.time()
        holding = False  # the first-contact lock, when this watch is the connection's first request
        try:
            async with asyncio.timeout(self.timeouts.connect + self.timeouts.read) as cm:
                if not self._first.done:
                    await self._first.lock.acquire()
                    holding = not self._first.done
                    if not holding:
                        self._first.lock.release()
                # httpx's own read timeout only backs ours up: the deadlines above say which one ended it.
                async with self._api.call_api("GET", version=api_version, namespace=namespace, url=plural,
                                              params=params, stream=True, raise_for_status=False,
                                              timeout=httpx.Timeout(idle + 5.0, connect=self.timeouts.connect),
                                              **({"headers": {"Authorization": self._bearer}} if self._bearer
                                                 else {})) as resp:
                    if resp.status_code >= 400:
                        body = await resp.aread()
                        detail, reason, causes = status_of(body)
                        raise self._error("GET", path, resp.status_code, detail or "refused",
                                          BY_STATUS.get(resp.status_code, KubeError), reason=reason, causes=causes)
                    started = True
                    if holding:
                        self._first.done, holding = True, False
                        self._first.lock.release()
                    end = loop.time() + whole
                    cm.reschedule(min(loop.time() + idle, end))
                    async for line in resp.aiter_lines():
                        cm.reschedule(min(loop.time() + idle, end))
                        if not line.strip():
                            continue
                        try:
                            ev = json.loads(line)
                        except ValueError:
                            continue
                        if not isinstance(ev, dict):
                            continue
                        if ev.get("type") == "ERROR":
                            obj = ev.get("object")
                            status: dict[str, Any] = obj if isinstance(obj, dict) else {}
                            code = status.get("code")
                            kind = Gone if code == 410 else KubeError
                            raise self._error("GET", path, code if isinstance(code, int) else None,
                                              str(status.get("message", "")), kind)
                        cm.reschedule(None)  # the deadlines time the server, not the caller's work on an event
                        yield ev
                        cm.reschedule(min(loop.time() + idle, end))
        except TimeoutError:
            if not started:
                raise self._error("GET", path, None, "the watch did not start within "
                                  f"{self.timeouts.connect + self.timeouts.read:.3g} s", TimedOut) from None
            if loop.time() - t0 >= whole - 0.5:
                return  # the whole-watch deadline: an end like the server's own, watch again from here
            raise self._error("GET", path, None, f"the watch went silent: no event or bookmark for {idle:.3g} s",
                              TimedOut) from None
        except KubeError:
            raise
        except (kr8s.APITimeoutError, httpx.TimeoutException) as exc:  # kr8s wraps httpx's timeouts in its own
            raise self._error("GET", path, None, f"watch timed out ({type(exc).__name__}: {exc})",
                              TimedOut) from None
        except (httpx.TransportError, OSError) as exc:
            raise self._error("GET", path, None, f"watch ended ({type(exc).__name__}: {exc})", Unreachable) from None
        except Exception as exc:  # the edge: anything else leaves typed, never kills a caller
            raise self._error("GET", path, None, f"watch failed ({type(exc).__name__}: {exc})", KubeError) from None
        finally:
            if holding:
                self._first.lock.release()

    async def create(self, api_version: str, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        ns = (obj.get("metadata") or {}).get("namespace")
        out = await self._call("POST", api_version, plural, ns, json=obj)
        return out if isinstance(out, dict) else obj

    async def update(self, api_version: str, plural: str, obj: dict[str, Any], *,
                     fields: tuple[str, ...]) -> dict[str, Any]:
        """Overwrite ``fields`` of an object this program owns, guarded by its ``metadata.resourceVersion``.

        A JSON merge patch that carries the resourceVersion is refused with 409 when someone changed the object
        since it was read: optimistic concurrency without PUT's need to resend every field.
        """
        meta = obj.get("metadata") or {}
        body: dict[str, Any] = {f: obj[f] for f in fields if f in obj}
        if meta.get("resourceVersion"):
            body["metadata"] = {"resourceVersion": meta["resourceVersion"]}
        return await self.patch(api_version, plural, meta["name"], body, namespace=meta.get("namespace"),
                                patch_type="merge")

    async def patch(self, api_version: str, plural: str, name: str, body: Any, *, namespace: str | None = None,
                    patch_type: PatchType, subresource: str | None = None,
                    field_manager: str | None = None) -> dict[str, Any]:
        params = {"fieldManager": field_manager} if field_manager else {}
        out = await self._call("PATCH", api_version, _path(plural, name, subresource), namespace,
                               content=json.dumps(body), headers={"Content-Type": _CONTENT_TYPE[patch_type]},
                               params=params)
        return out if isinstance(out, dict) else {}

    async def apply(self, api_version: str, plural: str, name: str, body: dict[str, Any], *, field_manager: str,
                    namespace: str | None = None, subresource: str | None = None) -> dict[str, Any]:
        """Server-side apply of the fields in ``body`` as ``field_manager`` (forced): list entries keyed by the
        schema's map keys (a Workload's ``status.admissionChecks`` by name) are merged, so only ours changes."""
        out = await self._call("PATCH", api_version, _path(plural, name, subresource), namespace,
                               content=json.dumps(body), headers={"Content-Type": "application/apply-patch+yaml"},
                               params={"fieldManager": field_manager, "force": "true"})
        return out if isinstance(out, dict) else {}

    async def delete(self, api_version: str, plural: str, name: str, namespace: str | None = None, *,
                     propagation: str | None = None) -> bool:
        """Delete; False when it was already gone. ``propagation``: Background, Foreground or Orphan."""
        extra: dict[str, Any] = {}
        if propagation:
            extra = {"content": json.dumps({"propagationPolicy": propagation}),
                     "headers": {"Content-Type": "application/json"}}
        try:
            await self._call("DELETE", api_version, _path(plural, name), namespace, **extra)
        except NotFound:
            return False
        return True

    async def exec(self, namespace: str, pod: str, command: Sequence[str], *, container: str | None = None,
                   timeout: float = 60.0, max_bytes: int = 16 << 20) -> bytes:
        """Run ``command`` in a container of ``pod`` over the API server's websocket (``v5``/``v4.channel.k8s.io``,
        :mod:`fabricguard.kube_exec`) and return its stdout.

        Everything ends within ``timeout`` (upgrade, run, output): :class:`TimedOut` after it. A refused upgrade
        is typed by its status (403 :class:`Forbidden`, 404 :class:`NotFound`, 400 :class:`Invalid`: "container x
        is not valid for pod y") with the server's message; a non-zero exit is a :class:`KubeError` with reason
        ``NonZeroExitCode`` naming the code and stderr's tail; stdout past ``max_bytes`` stops the read and is a
        :class:`KubeError` (a cut answer is never returned as a whole one).

        Not kr8s' ``Pod.exec``: it first polls the pod's readiness every 0.1 s without end (a hung job's pod may
        be unready), collects output without a bound, and its errors leave inside an ExceptionGroup."""
        rel = f"pods/{pod}/exec"
        # A websocket exec is an HTTP GET: API servers before 1.35 authorize it as ``get`` on pods/exec, 1.35+
        # (AuthorizePodWebsocketUpgradeCreatePermission, kubernetes #134577) as ``create`` too; SPDY used POST.
        self._check("GET", "v1", rel, namespace, False)
        self._check("POST", "v1", rel, namespace, False)
        path = _api_path("v1", namespace, rel)
        params = (*(("command", c) for c in command), *((("container", container),) if container else ()),
                  ("stdout", "true"), ("stderr", "true"), ("stdin", "false"), ("tty", "false"))
        t0 = time.monotonic()
        try:
            async with asyncio.timeout(timeout):
                return await self._exec(path, params, t0 + timeout, max_bytes)
        except TimeoutError:
            raise self._error("GET", path, None, f"no answer within {time.monotonic() - t0:.3g} s", TimedOut
                              ) from None

    async def _exec(self, path: str, params: Sequence[tuple[str, str]], deadline: float, max_bytes: int,
                    reauthenticated: bool = False) -> bytes:
        import base64
        import secrets

        import httpx
        import httpx_ws
        import wsproto.events

        from fabricguard.kube_exec import SUBPROTOCOLS, ExecProtocolError, ExecStream

        session = getattr(self._api, "_session", None)
        if session is None or session.is_closed:
            await self._api._create_session()  # what kr8s' own requests do first (its pinned range: pyproject)
            session = self._api._session
        headers = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
                   "Sec-WebSocket-Key": base64.b64encode(secrets.token_bytes(16)).decode(),
                   "Sec-WebSocket-Protocol": ", ".join(SUBPROTOCOLS)}
        if self._bearer is not None:
            headers["Authorization"] = self._bearer
        sni = getattr(self._api.auth, "tls_server_name", None)
        stream = ExecStream(max_bytes)
        ended = ""  # why the stream ended without a status
        try:
            async with session.stream("GET", path, params=params, headers=headers,
                                      extensions={"sni_hostname": sni} if sni else None) as resp:
                if resp.status_code != 101:
                    body = bytearray()
                    async for chunk in resp.aiter_bytes():
                        body += chunk
                        if len(body) >= 64 << 10:
                            break
                    status = resp.status_code
                    if status == 401 and not reauthenticated:
                        await self._reauthenticate()
                        return await self._exec(path, params, deadline, max_bytes, True)
                    detail, reason, causes = status_of(bytes(body))
                    raise self._error("GET", path, status, detail or f"the exec upgrade was refused ({status})",
                                      BY_STATUS.get(status, KubeError), reason=reason, causes=causes)
                spoken = resp.headers.get("sec-websocket-protocol")
                if spoken not in SUBPROTOCOLS:
                    raise self._error("GET", path, 101, f"the server spoke {spoken or 'no subprotocol'}, not "
                                      f"{' or '.join(SUBPROTOCOLS)}", KubeError)
                ws = httpx_ws.AsyncWebSocketSession(resp.extensions["network_stream"], response=resp,
                                                    max_message_size_bytes=1 << 20,
                                                    keepalive_ping_interval_seconds=None)
                async with ws:  # errors are kept, not raised, in here: the session's task group would wrap them
                    while True:
                        try:
                            ev = await ws.receive(timeout=max(0.01, deadline - time.monotonic()))
                        except TimeoutError:
                            ended = "timeout"
                            break
                        except httpx_ws.WebSocketDisconnect as exc:
                            why = f": {exc.reason}" if exc.reason else ""
                            ended = f"the server closed the stream (code {exc.code}{why})"
                            break
                        except httpx_ws.HTTPXWSException as exc:
                            ended = f"the stream broke ({type(exc).__name__}: {exc})"
                            break
                        if not isinstance(ev, wsproto.events.BytesMessage):
                            ended = f"the server sent a {type(ev).__name__}, not a binary stream message"
                            break
                        try:
                            if stream.feed(bytes(ev.data)):
                                break
                        except ExecProtocolError as exc:
                            ended = str(exc)
                            break
        except KubeError:
            raise
        except (httpx.TimeoutException, TimeoutError):
            ended = "timeout"
        except (httpx.TransportError, OSError) as exc:
            raise self._error("GET", path, None, f"cannot connect ({type(exc).__name__}: {exc})",
                              Unreachable) from None
        except Exception as exc:  # the edge: whatever else httpx or the websocket raise leaves typed
            raise self._error("GET", path, None, f"exec failed ({type(exc).__name__}: {exc})", KubeError) from None
        said = f"{len(stream.stdout)} bytes of stdout so far"
        if ended == "timeout":
            raise TimeoutError(said)
        if stream.over:
            raise self._error("GET", path, None, f"stdout passed the cap of {max_bytes} bytes: reading stopped "
                              "there and the output is not used", KubeError, reason="OutputTooLarge")
        if stream.status is None:
            raise self._error("GET", path, None, f"no exit status came: {ended or 'the stream ended'} ({said})",
                              KubeError)
        code, message = stream.outcome()
        if code == 0:
            return bytes(stream.stdout)
        if code is None:
            raise self._error("GET", path, None, f"the command did not run: {message}", KubeError,
                              reason=str(stream.status.get("reason") or ""))
        err = stream.stderr_text()
        raise self._error("GET", path, None, f"exit {code}: {err or 'no stderr'}", KubeError,
                          reason="NonZeroExitCode")

    async def close(self) -> None:
        session = getattr(self._api, "_session", None)
        if session is not None and not session.is_closed:
            with contextlib.suppress(Exception):
                await session.aclose()


class _FirstContact:
    """Whether a connection's first request has been answered (kr8s then holds an open session), and the lock the
    requests that come before that wait on."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.done = False


class Latency:
    """Recent request latencies (seconds): the slowest of the last 20 answers sizes what must fit in a window."""

    def __init__(self, keep: int = 20) -> None:
        self.keep = keep
        self.samples: list[float] = []

    def observe(self, seconds: float) -> None:
        self.samples = [*self.samples[-(self.keep - 1):], seconds]

    @property
    def worst(self) -> float:
        return max(self.samples, default=0.0)
