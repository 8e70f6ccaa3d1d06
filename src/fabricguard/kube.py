"""The Kubernetes API as fabricguard's writers use it: get, list, create, update, patch, apply, delete (kr8s).

kr8s resolves the kubeconfig (file, context, in-cluster token) and owns the HTTP session; this module adds what its
object API leaves out for a workflow that must be exact: a 404 is ``None`` rather than an exception, an update
carries the ``resourceVersion`` so a concurrent writer is a conflict instead of a lost update, and every patch names
its type (a JSON merge patch replaces whole lists, so callers choose it only for objects they own).
"""

from __future__ import annotations

import json
from typing import Any, Literal

PatchType = Literal["merge", "strategic", "json"]
_CONTENT_TYPE = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
}


class KubeError(RuntimeError):
    """A request the API server refused; ``status`` is the HTTP status (409 conflict, 403 forbidden, ...)."""

    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(message)
        self.status = status


def _path(plural: str, name: str | None, sub: str | None = None) -> str:
    return "/".join(p for p in (plural, name, sub) if p)


class Kube:
    """One API server connection; create with ``await Kube.connect(kubeconfig, context)``."""

    def __init__(self, api: Any) -> None:
        self._api = api

    @property
    def api(self) -> Any:
        """The kr8s API object, for what this module does not wrap (a watch stream)."""
        return self._api

    @classmethod
    async def connect(cls, kubeconfig: str | None = None, context: str | None = None) -> Kube:
        """Connect with the kubeconfig kr8s would read; a kubeconfig that cannot work is a ``KubeError`` naming
        the file and what is wrong with it, before kr8s fails on it less clearly."""
        import kr8s.asyncio

        problem = kubeconfig_problem(kubeconfig, context)
        if problem:
            raise KubeError(None, problem)
        return cls(await kr8s.asyncio.api(kubeconfig=kubeconfig, context=context))

    async def _call(self, method: str, api_version: str, url: str, namespace: str | None = None,
                    **kwargs: Any) -> Any:
        import httpx
        import kr8s

        try:
            async with self._api.call_api(method, version=api_version, namespace=namespace, url=url,
                                          **kwargs) as resp:
                return resp.json() if resp.content else None
        except (httpx.HTTPStatusError, kr8s.ServerError) as exc:
            response = getattr(exc, "response", None)
            status = response.status_code if response is not None else None
            try:
                detail = response.json().get("message") if response is not None else None
            except ValueError:
                detail = None
            raise KubeError(status, f"{method} {api_version} {url}: {detail or exc}") from None

    async def get(self, api_version: str, plural: str, name: str,
                  namespace: str | None = None) -> dict[str, Any] | None:
        """The object, or None when it (or its resource type) does not exist."""
        try:
            obj = await self._call("GET", api_version, _path(plural, name), namespace)
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise
        return obj if isinstance(obj, dict) else None

    async def served(self, api_version: str, plural: str) -> bool:
        """Whether the API server serves this resource (a CRD that is not installed is not)."""
        try:
            await self._call("GET", api_version, plural, params={"limit": 1})
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    async def list(self, api_version: str, plural: str, namespace: str | None = None, *,
                   label_selector: str | None = None, field_selector: str | None = None) -> list[dict[str, Any]]:
        """Every item, page by page (the server's continue token)."""
        items: list[dict[str, Any]] = []
        cont: str | None = None
        while True:
            params: dict[str, Any] = {"limit": 500}
            if label_selector:
                params["labelSelector"] = label_selector
            if field_selector:
                params["fieldSelector"] = field_selector
            if cont:
                params["continue"] = cont
            body = await self._call("GET", api_version, plural, namespace, params=params) or {}
            items.extend(body.get("items") or ())
            cont = (body.get("metadata") or {}).get("continue")
            if not cont:
                return items

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
        out = await self._call("PATCH", api_version, _path(plural, name, subresource), namespace, json=body,
                               headers={"Content-Type": _CONTENT_TYPE[patch_type]}, params=params)
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
        body = {"propagationPolicy": propagation} if propagation else None
        try:
            await self._call("DELETE", api_version, _path(plural, name), namespace,
                             **({"json": body} if body else {}))
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    async def close(self) -> None:
        session = getattr(self._api, "_session", None)
        if session is not None and not session.is_closed:
            await session.aclose()


def kubeconfig_problem(kubeconfig: str | None, context: str | None = None) -> str | None:
    """What is wrong with the kubeconfig kr8s would read (``--kubeconfig``, ``$KUBECONFIG``, ``~/.kube/config``),
    naming the file; None when it looks usable or when there is none (in a cluster: the service account)."""
    from fabricguard.doctor.snapshot import check_kubeconfig, kubeconfig_path
    from fabricguard.userfiles import SourceError

    path = kubeconfig_path(kubeconfig)
    if path is None:
        return None
    try:
        check_kubeconfig(path, context)
    except SourceError as exc:
        return f"--kubeconfig {exc}"
    return None
