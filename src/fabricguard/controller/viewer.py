"""Who may run ``kubectl fabricguard``: the plugin's permission table, and the roles rendered from it.

The plugin (``fabricguard.kubectl``) reads and never writes. :data:`PLUGIN_GRANTS` is every call it makes: the
client refuses anything outside it, and ``render install`` puts the roles built from the same rows into the
controller's component (:func:`viewer_roles`), so what ships can never drift from what the plugin calls:

- ClusterRole ``fabricguard-viewer``: get of the job kinds, list of Kueue Workloads, get and list of the pools'
  FabricValidations (cluster-scoped);
- Role ``fabricguard-viewer`` in the controller's namespace: get of ConfigMaps there (the controller's profile,
  for per-fabric fixes; the plugin reads no other namespace's ConfigMaps).

Nothing binds them: who may read is the cluster's decision (:func:`bind_commands` prints the two bindings).
Not aggregated to ``view`` (``rbac.authorization.k8s.io/aggregate-to-view``), on purpose:

- ``view`` is mostly granted per namespace (a RoleBinding), and a RoleBinding never grants a cluster-scoped
  resource: the FabricValidations the plugin needs would still be refused, so aggregation would not make the
  plugin work for the people it is for;
- aggregation widens every existing holder of ``view`` at once (cluster-wide viewers, dashboards' and CI's
  service accounts) without anyone binding anything; a named role is granted by a binding a person wrote, shows
  in ``kubectl get clusterrolebindings``, and is removed with the component.
"""

from __future__ import annotations

from typing import Any

from fabricguard import kinds, names
from fabricguard.controller.manifests import NAME as CONTROLLER_NAME
from fabricguard.rbac import Grant, Permissions, grants, rbac_rules

VIEWER = "fabricguard-viewer"
JOB_KINDS = tuple(k for k in kinds.KINDS if k.kind != "Pod")
PROFILE_CONFIGMAP = f"{CONTROLLER_NAME}-profile"

# Read only: what `why` and `pools` call, and nothing else. The profile ConfigMap is read only in the
# controller's namespace (scope "namespace": the Role there), never any other namespace's ConfigMaps.
PLUGIN_GRANTS: frozenset[Grant] = frozenset([
    *(g for k in JOB_KINDS for g in grants(k.api_version, k.plural, ["get"])),
    *grants(names.KUEUE_API, "workloads", ["list"]),
    *grants(names.FV_API, names.FV_PLURAL, ["get", "list"]),
    *grants("v1", "configmaps", ["get"], scope="namespace"),
])


def plugin_permissions(namespace: str) -> Permissions:
    """The plugin's table; ``namespace`` is where the controller runs (its profile ConfigMap)."""
    return Permissions(PLUGIN_GRANTS, namespace, "kubectl-fabricguard")


def viewer_roles(namespace: str) -> list[dict[str, Any]]:
    """ClusterRole and Role ``fabricguard-viewer`` (the cluster- and namespace-scope rows of PLUGIN_GRANTS)."""
    labels = {names.LABEL_APP_NAME: VIEWER, names.LABEL_APP_PART_OF: "fabricguard",
              names.LABEL_APP_COMPONENT: "kubectl-plugin"}
    return [
        {"apiVersion": names.RBAC_API, "kind": "ClusterRole", "metadata": {"name": VIEWER, "labels": dict(labels)},
         "rules": rbac_rules(PLUGIN_GRANTS, "cluster")},
        {"apiVersion": names.RBAC_API, "kind": "Role",
         "metadata": {"name": VIEWER, "namespace": namespace, "labels": dict(labels)},
         "rules": rbac_rules(PLUGIN_GRANTS, "namespace")},
    ]


def bind_commands(namespace: str, subject: str = "--group=<group>") -> list[str]:
    """The two bindings that let ``subject`` run the plugin (the ClusterRole cluster-wide: FabricValidations are
    cluster-scoped, and the job may be in any namespace)."""
    return [f"kubectl create clusterrolebinding {VIEWER}-<name> --clusterrole={VIEWER} {subject}",
            f"kubectl -n {namespace} create rolebinding {VIEWER}-<name> --role={VIEWER} {subject}"]
