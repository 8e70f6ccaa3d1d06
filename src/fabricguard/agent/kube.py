"""The agent's only conversation with the API server: read its Node, patch its condition, patch its taints.

Requests go through ``fabricguard.kube.Kube`` (kr8s: kubeconfig, or the pod's service account in the cluster;
timeouts on every call, typed errors). The condition is a strategic-merge patch on ``nodes/<name>/status``;
taints are a JSON patch guarded by a ``resourceVersion`` test (see ``taints``). ``sweep_stale`` is the staleness
sweep a controller runs.

:func:`agent_grants` and :data:`SWEEPER_GRANTS` are the permission tables of the two: the client refuses a call
outside them, and ``render agent`` builds their ClusterRoles from them.

Every failure, including an unreachable API server, is a ``KubeError``: the agent turns it into a report
error (counted, logged) and the heartbeat ages; it never crashes the loop.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from typing import Any

from fabricguard.kube import Conflict, Grant, Kube, KubeError, NotFound, Permissions, grants

__all__ = ["SWEEPER_GRANTS", "KubeError", "NodeClient", "agent_grants", "connect", "sweep_stale"]


def agent_grants(manage_taints: bool = False) -> frozenset[Grant]:
    """The agent's calls: read its Node, patch its condition; with ``--manage-taints`` patch the Node's taints."""
    return frozenset([*grants("v1", "nodes", ["get"]), *grants("v1", "nodes", ["patch"], subresource="status"),
                      *(grants("v1", "nodes", ["patch"]) if manage_taints else [])])


# The staleness sweep: list every Node, patch the stale ones' condition.
SWEEPER_GRANTS: frozenset[Grant] = frozenset([*grants("v1", "nodes", ["list"]),
                                              *grants("v1", "nodes", ["patch"], subresource="status")])


async def connect(kubeconfig: str | None = None, context: str | None = None, *,
                  table: frozenset[Grant] | None = None, component: str = "agent") -> Kube:
    """A connection from the kubeconfig when given, else the usual discovery (in-cluster service account),
    checked against ``table`` (default: the agent's, taints included)."""
    if kubeconfig is not None and not os.path.isfile(kubeconfig):
        raise KubeError(None, f"--kubeconfig {kubeconfig}: no such file")
    perms = Permissions(table if table is not None else agent_grants(True), component=component)
    try:
        return await Kube.connect(kubeconfig, context, permissions=perms)
    except KubeError:
        raise  # already names the kubeconfig and what is wrong with it
    except Exception as e:
        where = (
            f"--kubeconfig {kubeconfig}"
            if kubeconfig
            else "no usable kubeconfig ($KUBECONFIG, ~/.kube/config) and no in-cluster service account"
        )
        raise KubeError(None, f"{where}: cannot connect ({type(e).__name__}: {e})") from e


class NodeClient:
    """Node reads and writes for one agent (or one sweeper)."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    async def get(self, name: str) -> dict[str, Any]:
        node = await self.kube.get("v1", "nodes", name)
        if node is None:
            raise NotFound(404, f"Node {name} does not exist at {self.kube.server}", server=self.kube.server)
        return node

    async def list_nodes(self) -> list[dict[str, Any]]:
        return await self.kube.list("v1", "nodes")

    async def patch_status(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.kube.patch("v1", "nodes", name, body, patch_type="strategic", subresource="status")

    async def patch_json(self, name: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
        return await self.kube.patch("v1", "nodes", name, ops, patch_type="json")


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
        except Conflict:
            continue
        changed.append(name)
    return changed
