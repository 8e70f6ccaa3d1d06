"""The agent's only conversation with the API server: read its Node, patch its condition, patch its taints.

Requests go through kr8s's HTTP session (kubeconfig, or the pod's service account in the cluster). The
condition is a strategic-merge patch on ``nodes/<name>/status``; taints are a JSON patch guarded by a
``resourceVersion`` test (see ``taints``). ``sweep_stale`` is the staleness sweep a controller runs.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"


class KubeError(RuntimeError):
    """The API server refused or could not be reached; ``status`` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


async def connect(kubeconfig: str | None = None, context: str | None = None) -> Any:
    """A kr8s API client: the kubeconfig when given, else the usual discovery (in-cluster service account)."""
    import os

    import kr8s.asyncio

    if kubeconfig is not None and not os.path.isfile(kubeconfig):
        raise KubeError(f"--kubeconfig {kubeconfig}: no such file")
    try:
        return await kr8s.asyncio.api(kubeconfig=kubeconfig, context=context)
    except Exception as e:
        where = (
            f"--kubeconfig {kubeconfig}"
            if kubeconfig
            else "no usable kubeconfig ($KUBECONFIG, ~/.kube/config) and no in-cluster service account"
        )
        raise KubeError(f"{where}: cannot connect ({type(e).__name__}: {e})") from e


def _error(what: str, exc: Exception) -> KubeError:
    resp = getattr(exc, "response", None)
    code = getattr(resp, "status_code", None)
    detail = ""
    if resp is not None:
        try:
            detail = resp.json().get("message", "")
        except Exception:
            detail = getattr(resp, "text", "")[:200]
    return KubeError(f"{what}: {f'HTTP {code} ' if code else ''}{detail or type(exc).__name__ + ': ' + str(exc)}", code)


class NodeClient:
    """Node reads and writes for one agent (or one sweeper)."""

    def __init__(self, api: Any) -> None:
        self.api = api

    async def _call(self, what: str, method: str, url: str, **kw: Any) -> Any:
        try:
            async with self.api.call_api(method, version="v1", url=url, **kw) as resp:
                return resp.json()
        except Exception as e:
            raise _error(what, e) from e

    async def get(self, name: str) -> dict[str, Any]:
        node: dict[str, Any] = await self._call(f"read Node {name}", "GET", f"nodes/{name}")
        return node

    async def list_nodes(self) -> list[dict[str, Any]]:
        data = await self._call("list Nodes", "GET", "nodes")
        return list(data.get("items") or [])

    async def patch_status(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        node: dict[str, Any] = await self._call(
            f"patch Node {name} status",
            "PATCH",
            f"nodes/{name}/status",
            content=json.dumps(body),
            headers={"Content-Type": STRATEGIC},
        )
        return node

    async def patch_json(self, name: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
        node: dict[str, Any] = await self._call(
            f"patch Node {name}",
            "PATCH",
            f"nodes/{name}",
            content=json.dumps(ops),
            headers={"Content-Type": JSON_PATCH},
        )
        return node


async def sweep_stale(client: NodeClient, now: datetime, max_age: timedelta) -> list[str]:
    """Turn every stale ``FabricReady`` condition ``Unknown``; the names of the nodes changed.

    A node whose agent reported between the list and the patch answers 409 (its resourceVersion moved) and is
    left as the agent wrote it.
    """
    from fabricguard.agent.staleness import stale_patches

    changed = []
    for name, body in stale_patches(await client.list_nodes(), now, max_age):
        try:
            await client.patch_status(name, body)
        except KubeError as e:
            if e.status == 409:
                continue
            raise
        changed.append(name)
    return changed
