"""The ResourceClaimTemplates a DRA pool's workloads claim their fabric from: one per opted-in namespace and pool.

The webhook adds ``resourceClaimTemplateName: fabricguard-<pool>-fabric`` to every GPU pod of a DRA claim pool
(admission/claims.py) and refuses the workload when the template is missing in its namespace; this pass keeps
the template (``admission.claims.claim_template``) in every namespace labelled ``fabricguard.io/enabled=true``.

Level-based: a missing template is created; one that fabricguard made but that no longer matches the profile
(its spec is immutable) is deleted, and the next pass creates it anew. Claims already made from it are untouched.
A template of that name that someone else made is left alone (the webhook checks that it asks for the pool's
DeviceClass). Templates are never deleted when a namespace opts out: pods of its running jobs may still need them.
"""

from __future__ import annotations

from typing import Any

from fabricguard import names
from fabricguard import objects as o
from fabricguard.admission.claims import claim_template, retest_claim_template
from fabricguard.admission.render import ENABLED_LABEL
from fabricguard.controller.actions import Action, Create, Delete
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.patching import stored
from fabricguard.profile.model import PlatformProfile

API = names.DRA_API
PLURAL = "resourceclaimtemplates"
MANAGED_BY = (names.LABEL_MANAGED_BY, "fabricguard")


def opted_in(snapshot: Snapshot) -> list[str]:
    """Namespaces labelled for the fabricguard webhook, sorted."""
    return sorted(o.name_of(ns) for ns in snapshot.kind("Namespace")
                  if (o.meta(ns).get("labels") or {}).get(ENABLED_LABEL) == "true"
                  and not o.meta(ns).get("deletionTimestamp"))


def claim_template_actions(profile: PlatformProfile, snapshot: Snapshot, canary_namespace: str | None = None,
                           ) -> list[Action]:
    """Create or replace templates; ``canary_namespace`` gets them too (the canaries claim the fabric there)."""
    pools = [p for p in profile.spec.pools if p.claim_template_name is not None]
    if not pools:
        return []
    have = {(o.namespace_of(t) or "", o.name_of(t)): t for t in snapshot.kind("ResourceClaimTemplate")}
    actions: list[Action] = []
    namespaces = opted_in(snapshot)
    if canary_namespace and canary_namespace not in namespaces and any(profile.canary(p) for p in pools):
        namespaces.append(canary_namespace)
    wanted = [(ns, t) for ns in namespaces for pool in pools if (t := claim_template(pool, ns)) is not None]
    # The controller's own namespace also gets each proof pool's re-test template (pairs.py: a node whose bad NIC
    # carries fabricguard's DeviceTaintRule is re-tested through it).
    if canary_namespace:
        wanted += [(canary_namespace, t) for pool in pools if pool.proof is not None and profile.canary(pool)
                   and (t := retest_claim_template(pool, canary_namespace, names.TAINT_QUARANTINED)) is not None]
    for ns, want in wanted:
        cur = have.get((ns, o.name_of(want)))
        if cur is None:
            actions.append(Create(API, PLURAL, ns, want))
            continue
        mine = (o.meta(cur).get("labels") or {}).get(MANAGED_BY[0]) == MANAGED_BY[1]
        if mine and stored(cur.get("spec")) != stored(want["spec"]):
            actions.append(Delete(API, PLURAL, ns, o.name_of(want)))
    return actions


def template_objects(profile: PlatformProfile, namespaces: list[str]) -> list[dict[str, Any]]:
    """The templates for ``namespaces`` (for ``kubectl apply`` where the controller does not run)."""
    return [t for ns in namespaces for p in profile.spec.pools if (t := claim_template(p, ns)) is not None]
