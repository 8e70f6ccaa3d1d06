"""Declared permissions: the table of :class:`Grant` rows a component's code may use. The client refuses a request
its table does not declare (:class:`fabricguard.kube_errors.Undeclared`), and every rendered Role and ClusterRole is
built from the same table (:func:`rbac_rules`), so the code cannot make a call its rendered role would refuse."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

# cluster: a ClusterRole; namespace: a Role in the component's own namespace; watched: a Role in each of the
# namespaces it is told to look in (the controller's ConfigMaps: only where drift compares them).
Scope = Literal["cluster", "namespace", "watched"]
Verb = Literal["get", "list", "watch", "create", "update", "patch", "delete"]


@dataclass(frozen=True, order=True)
class Grant:
    """One permission a component's code uses: ``scope`` namespace means only in the component's own namespace
    (a Role there); cluster means a ClusterRole (every namespace, or a cluster-scoped resource)."""

    group: str
    resource: str
    subresource: str
    verb: str
    scope: Scope = "cluster"

    @property
    def rbac_resource(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


def grants(api_version: str, resource: str, verbs: Iterable[str], *, subresource: str = "",
           scope: Scope = "cluster") -> list[Grant]:
    """Rows of a permission table: ``grants("batch/v1", "jobs", ["list", "watch"])``."""
    return [Grant(group_of(api_version), resource, subresource, v, scope) for v in verbs]


def group_of(api_version: str) -> str:
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def rbac_rules(table: Iterable[Grant], scope: Scope) -> list[dict[str, Any]]:
    """The ``rules`` of a ClusterRole (``scope`` cluster) or Role (namespace) that grant ``table``'s rows of that
    scope: one rule per (group, verbs), resources sorted, so the output is stable."""
    by_resource: dict[tuple[str, str], set[str]] = {}
    for g in table:
        if g.scope == scope:
            by_resource.setdefault((g.group, g.rbac_resource), set()).add(g.verb)
    by_verbs: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for (group, res), verbs in sorted(by_resource.items()):
        by_verbs.setdefault((group, tuple(sorted(verbs))), []).append(res)
    return [{"apiGroups": [group], "resources": sorted(res), "verbs": list(verbs)}
            for (group, verbs), res in sorted(by_verbs.items())]


@dataclass(frozen=True)
class Permissions:
    """A component's permission table and the namespace its namespace-scoped rows (its Role) apply in."""

    table: frozenset[Grant]
    namespace: str = ""
    component: str = ""
    watched: frozenset[str] = frozenset()  # where the ``watched`` rows apply (a Role in each)

    def allows(self, grant: Grant, namespace: str | None) -> bool:
        if Grant(grant.group, grant.resource, grant.subresource, grant.verb, "cluster") in self.table:
            return True
        if namespace is None:
            return False
        if namespace == self.namespace and Grant(grant.group, grant.resource, grant.subresource, grant.verb,
                                                 "namespace") in self.table:
            return True
        return namespace in self.watched and Grant(grant.group, grant.resource, grant.subresource, grant.verb,
                                                   "watched") in self.table


def verb_of(method: str, name: str | None, watch: bool) -> str:
    if method == "GET":
        return "watch" if watch else ("get" if name else "list")
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]
