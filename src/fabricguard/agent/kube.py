"""The agent's only conversation with the API server: read its Node (and, on a DRA pool, its ResourceSlices),
patch its condition, patch its taints.

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

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from fabricguard import names
from fabricguard.kube import Conflict, Kube, KubeError, NotFound, TimedOut, Unreachable
from fabricguard.rbac import Grant, Permissions, grants

__all__ = ["SWEEPER_GRANTS", "KubeError", "NodeClient", "SweepResult", "agent_grants", "connect", "sweep_stale"]


def agent_grants(manage_taints: bool = False, dra: bool = True) -> frozenset[Grant]:
    """The agent's calls: read its Node, patch its condition; with ``--manage-taints`` patch the Node's taints,
    read its pool's FabricValidation (the controller's breakers, which it must not undo, and the node count its
    taint budget is sized by) and keep its pool's taint slots (Leases in its own namespace);
    list its node's ResourceSlices (a DRA pool's fabric is offered there, and GPUs a DRA driver offers are too,
    never in allocatable: the render always grants it, ``dra=False`` is for a caller that knows better)."""
    return frozenset([*grants("v1", "nodes", ["get"]), *grants("v1", "nodes", ["patch"], subresource="status"),
                      *(grants("v1", "nodes", ["patch"]) if manage_taints else []),
                      *(grants(names.FV_API, names.FV_PLURAL, ["get"]) if manage_taints else []),
                      # The pool's taint slots (agent/taint_slots.py), in the agent's own namespace: list to find a
                      # free one, create to take a new one (atomic), patch (rv-guarded) to take, renew, release.
                      *(grants(names.LEASE_API, "leases", ["list", "create", "patch"], scope="namespace")
                        if manage_taints else []),
                      *(grants(names.DRA_API, "resourceslices", ["list"]) if dra else [])])


# The staleness sweep: list every Node, patch the stale ones' condition.
SWEEPER_GRANTS: frozenset[Grant] = frozenset([*grants("v1", "nodes", ["list"]),
                                              *grants("v1", "nodes", ["patch"], subresource="status")])


async def connect(kubeconfig: str | None = None, context: str | None = None, *,
                  table: frozenset[Grant] | None = None, component: str = "agent",
                  namespace: str = "fabricguard-system") -> Kube:
    """A connection from the kubeconfig when given, else the usual discovery (in-cluster service account),
    checked against ``table`` (default: every call the agent can make)."""
    from fabricguard.kubeconfig import kubeconfig_problem

    problem = kubeconfig_problem(kubeconfig, context) if kubeconfig is not None else None
    if problem:  # a missing file, a FIFO, a directory, not a kubeconfig: named as what it is
        raise KubeError(None, problem)
    perms = Permissions(table if table is not None else agent_grants(True, True), namespace=namespace,
                        component=component)
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

    async def node_or_none(self, name: str) -> dict[str, Any] | None:
        """Another node's Node (a taint slot's holder), None when it is gone."""
        node: dict[str, Any] | None = await self.kube.get("v1", "nodes", name)
        return node

    async def resource_slices(self, name: str) -> list[dict[str, Any]]:
        """This node's ResourceSlices (resource.k8s.io/v1, field selector spec.nodeName)."""
        return await self.kube.list(names.DRA_API, "resourceslices", field_selector=f"spec.nodeName={name}")

    async def fabric_validation(self, pool: str) -> dict[str, Any] | None:
        """The pool's FabricValidation (its ``status.breakers``); None when the controller made none."""
        fv: dict[str, Any] | None = await self.kube.get(names.FV_API, names.FV_PLURAL, pool)
        return fv

    async def list_nodes(self) -> list[dict[str, Any]]:
        return await self.kube.list("v1", "nodes")

    async def patch_status(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.kube.patch("v1", "nodes", name, body, patch_type="strategic", subresource="status")

    async def patch_json(self, name: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
        return await self.kube.patch("v1", "nodes", name, ops, patch_type="json")


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
    patches = stale_patches(await client.list_nodes(), now, max_age)
    for name, body in patches:
        try:
            await client.patch_status(name, body)
        except Conflict:
            continue  # the agent reported meanwhile: its fresh condition stands
        except (Unreachable, TimedOut) as e:
            # The server stopped answering: the rest would each wait for the same timeout. Name them all.
            result.failed[name] = str(e)
            for rest, _body in patches[patches.index((name, body)) + 1:]:
                result.failed[rest] = f"not tried: {e.server or 'the API server'} stopped answering"
            break
        except KubeError as e:
            result.failed[name] = str(e)
            continue
        result.changed.append(name)
    return result
