"""The agent's only conversation with the API server: read its Node (and, on a DRA pool, its ResourceSlices),
patch its condition, patch its taints.

Requests go through ``fabricguard.kube.Kube`` (kr8s: kubeconfig, or the pod's service account in the
cluster). The condition is a strategic-merge patch on ``nodes/<name>/status``; taints are a JSON patch guarded
by a ``resourceVersion`` test (see ``taints``). ``sweep_stale`` is the staleness sweep a controller runs.

Every failure, including an unreachable API server, is a ``KubeError``: the agent turns it into a report
error (counted, logged) and the heartbeat ages; it never crashes the loop.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

from fabricguard import names
from fabricguard.kube import Kube, KubeError

__all__ = ["KubeError", "NodeClient", "SweepResult", "connect", "sweep_stale"]

T = TypeVar("T")


async def connect(kubeconfig: str | None = None, context: str | None = None) -> Kube:
    """A connection from the kubeconfig when given, else the usual discovery (in-cluster service account)."""
    from fabricguard.kube import kubeconfig_problem

    problem = kubeconfig_problem(kubeconfig, context) if kubeconfig is not None else None
    if problem:  # a missing file, a FIFO, a directory, not a kubeconfig: named as what it is
        raise KubeError(None, problem)
    try:
        return await Kube.connect(kubeconfig, context)
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

    @staticmethod
    async def _io(what: str, call: Awaitable[T]) -> T:
        try:
            return await call
        except KubeError:
            raise
        except Exception as e:  # connection refused, TLS, timeouts: the API server was not reached
            raise KubeError(None, f"{what}: {type(e).__name__}: {e}") from e

    async def get(self, name: str) -> dict[str, Any]:
        node = await self._io(f"read Node {name}", self.kube.get("v1", "nodes", name))
        if node is None:
            raise KubeError(404, f"Node {name} does not exist")
        return node

    async def resource_slices(self, name: str) -> list[dict[str, Any]]:
        """This node's ResourceSlices (resource.k8s.io/v1, field selector spec.nodeName)."""
        return await self._io(f"list ResourceSlices of Node {name}", self.kube.list(
            names.DRA_API, "resourceslices", field_selector=f"spec.nodeName={name}"))

    async def list_nodes(self) -> list[dict[str, Any]]:
        return await self._io("list Nodes", self.kube.list("v1", "nodes"))

    async def patch_status(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._io(
            f"patch Node {name} status",
            self.kube.patch("v1", "nodes", name, body, patch_type="strategic", subresource="status"),
        )

    async def patch_json(self, name: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
        return await self._io(f"patch Node {name}", self.kube.patch("v1", "nodes", name, ops, patch_type="json"))


@dataclass
class SweepResult:
    """What one sweep did: the nodes set ``Unknown``, and those it could not patch (name -> why)."""

    changed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


async def sweep_stale(client: NodeClient, now: datetime, max_age: timedelta) -> SweepResult:
    """Turn every stale ``FabricReady`` condition ``Unknown``, node by node; a node that cannot be patched (404,
    403, 500, a timeout) is reported and the sweep goes on to the next one.

    A node whose agent reported between the list and the patch answers 409 (its resourceVersion moved) and is
    left as the agent wrote it: neither changed nor failed. Listing the nodes failing raises ``KubeError``.
    """
    from fabricguard.agent.staleness import stale_patches

    result = SweepResult()
    for name, body in stale_patches(await client.list_nodes(), now, max_age):
        try:
            await client.patch_status(name, body)
        except KubeError as e:
            if e.status != 409:
                result.failed[name] = str(e)
            continue
        result.changed.append(name)
    return result
