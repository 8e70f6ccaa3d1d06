"""The fabric as a DRA claim: ``spec.resourceClaims`` on GPU pod templates and ``resources.claims`` on GPU containers.

For a pool whose fabric is claimed through Dynamic Resource Allocation (``fabric.dra`` without
``extendedResourceName``), every GPU pod template gets one entry ``{name: fabricguard-fabric,
resourceClaimTemplateName: <pool's template>}`` and every GPU container ``resources.claims: [{name:
fabricguard-fabric}]``, so the ResourceClaim controller makes one claim per pod from the ResourceClaimTemplate the
fabricguard controller keeps in each opted-in namespace. Values are added, never changed, so the API server's stored
form of a patched object gets an empty patch.

Left alone: a pod that already claims the fabric's DeviceClass (its own ResourceClaimTemplate or ResourceClaim
asks for it), and KEP-5004 pools (the pod requests the extended resource; the scheduler makes the claim).

Refused: a pool whose template is missing in the namespace (the pods would stay Pending with a claim that is never
created), and, on ``countPer: node`` pools, a GPU pod that does not take the whole node. When GPUs and NICs are
claimed together (``alignWithGpus``), the claim carries the node's GPUs, so the GPU container's own
``<gpuResource>`` request is moved into the claim (asking for both would need twice the node's GPUs).

Whether a template exists, and what class a user's template asks for, comes from a :data:`Resolver` the caller
passes (the webhook's cache of ResourceClaimTemplates); without one the existence check is skipped with a warning.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fabricguard import names, objects
from fabricguard.profile.dra import claim_classes
from fabricguard.profile.model import Pool

CLAIM_NAME = "fabricguard-fabric"
TEMPLATE_KIND = "ResourceClaimTemplate"
CLAIM_KIND = "ResourceClaim"


class ResolverUnavailable(RuntimeError):
    """The resolver cannot answer now (no list of templates yet, the API server unreachable)."""


# (kind, namespace, name) -> the object, or None when it does not exist; raises ResolverUnavailable.
Resolver = Callable[[str, str, str], dict[str, Any] | None]


def _l(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def claims_pool(pool: Pool) -> bool:
    """The webhook injects a claim for this pool."""
    return pool.claim_template_name is not None


def already_claims(spec: dict[str, Any], pool: Pool, namespace: str, resolve: Resolver | None) -> bool:
    """The pod spec already references the pool's template, or a template/claim of the fabric's DeviceClass."""
    d = pool.fabric.dra
    assert d is not None
    for rc in _l(spec.get("resourceClaims")):
        if not isinstance(rc, dict):
            continue
        tmpl, claim = rc.get("resourceClaimTemplateName"), rc.get("resourceClaimName")
        if tmpl and tmpl == pool.claim_template_name:
            return True
        if resolve is None:
            continue
        try:
            obj = (resolve(TEMPLATE_KIND, namespace, str(tmpl)) if tmpl
                   else resolve(CLAIM_KIND, namespace, str(claim)) if claim else None)
        except ResolverUnavailable:
            continue
        if obj is not None and d.deviceClassName in claim_classes(obj):
            return True
    return False


def template_problem(pool: Pool, namespace: str, resolve: Resolver | None) -> tuple[str | None, str | None]:
    """(refusal, warning) about the pool's ResourceClaimTemplate in ``namespace``."""
    name = pool.claim_template_name
    if name is None:
        return None, None
    if resolve is None:
        return None, (f"ResourceClaimTemplate {namespace}/{name} was not checked (no API access here); the pods "
                      "stay Pending if it is missing")
    try:
        found = resolve(TEMPLATE_KIND, namespace, name)
    except ResolverUnavailable as exc:
        return (f"cannot check that ResourceClaimTemplate {name} exists in namespace {namespace} ({exc}); retry "
                "in a minute"), None
    if found is None:
        return (f"pool {pool.name} offers its fabric through DRA, but ResourceClaimTemplate {name} does not exist "
                f"in namespace {namespace}: the pods would stay Pending. The fabricguard controller creates it in "
                f"every namespace labelled fabricguard.io/enabled=true; label the namespace (or create the "
                f"template as docs/admission.md shows) and submit again"), None
    if pool.fabric.dra and pool.fabric.dra.deviceClassName not in claim_classes(found):
        return (f"ResourceClaimTemplate {namespace}/{name} does not ask for DeviceClass "
                f"{pool.fabric.dra.deviceClassName} (it asks for {sorted(claim_classes(found)) or 'nothing'}); "
                "delete it so that the controller recreates it"), None
    return None, None


def inject(inj: Any, pool: Pool, spec: dict[str, Any], gpu_containers: list[dict[str, Any]], where: str,
           namespace: str, resolve: Resolver | None) -> None:
    """Add the pool's claim to one pod spec (``inj`` is the mutation's Injector: conflicts go through it)."""
    d = pool.fabric.dra
    if d is None or not claims_pool(pool) or not gpu_containers:
        return
    if already_claims(spec, pool, namespace, resolve):
        return
    if d.countPer == "node":
        gpus = objects.pod_gpus(spec, pool.gpuResource)
        if 0 < gpus < pool.gpusPerNode:
            inj.conflict(CLAIM_NAME, f"{where} asks for {gpus} GPUs, but pool {pool.name} offers its fabric per "
                                     f"node: a GPU pod takes the whole node ({pool.gpusPerNode} GPUs)")
            return
    if d.alignWithGpus and len(gpu_containers) != 1:
        inj.conflict(CLAIM_NAME, f"{where} has {len(gpu_containers)} GPU containers, but pool {pool.name} claims "
                                 "the node's GPUs and NICs together: put the GPUs in one container")
        return
    entries = spec.get("resourceClaims")
    if not isinstance(entries, list):
        entries = inj.patch.set(spec, "resourceClaims", [])
    mine = {"name": CLAIM_NAME, "resourceClaimTemplateName": pool.claim_template_name}
    for e in entries:
        if isinstance(e, dict) and e.get("name") == CLAIM_NAME and e != mine:
            inj.conflict(CLAIM_NAME, f"resourceClaims entry {CLAIM_NAME} in {where} is {e} but the pool needs "
                                     f"{mine}")
            return
    if mine not in entries:
        inj.patch.append(entries, mine)
        unseen = [str(e.get("resourceClaimName")) for e in entries
                  if isinstance(e, dict) and e.get("resourceClaimName")]
        if unseen:
            inj.warnings.append(f"{where} also names ResourceClaim(s) {', '.join(unseen)}, whose DeviceClass the "
                                f"webhook does not read; if one asks for {d.deviceClassName}, the pod claims the NICs "
                                "twice and stays Pending: drop it and let the pool's claim carry the fabric")
    for c in gpu_containers:
        res = c.get("resources")
        if not isinstance(res, dict):
            res = inj.patch.set(c, "resources", {})
        claims = res.get("claims")
        if not isinstance(claims, list):
            claims = inj.patch.set(res, "claims", [])
        if not any(isinstance(x, dict) and x.get("name") == CLAIM_NAME for x in claims):
            inj.patch.append(claims, {"name": CLAIM_NAME})
        if d.alignWithGpus:
            for part in ("requests", "limits"):
                m = res.get(part)
                if isinstance(m, dict):
                    inj.patch.pop(m, pool.gpuResource)
                    if not m:
                        inj.patch.pop(res, part)


def missing_claim(spec: dict[str, Any], container: dict[str, Any], pool: Pool, where: str) -> list[str]:
    """On a claim pool: the GPU container must use one of the pod's ResourceClaims (ours or the user's own)."""
    if not claims_pool(pool):
        return []
    pod_claims = {e.get("name") for e in _l(spec.get("resourceClaims")) if isinstance(e, dict)}
    res = container.get("resources") if isinstance(container.get("resources"), dict) else {}
    used = {x.get("name") for x in _l((res or {}).get("claims")) if isinstance(x, dict)}
    if used & pod_claims:
        return []
    return [f"{where} uses no ResourceClaim, but pool {pool.name} offers its fabric only through DRA (DeviceClass "
            f"{pool.fabric.dra.deviceClassName if pool.fabric.dra else '?'}): its traffic would leave the fabric; "
            f"add resourceClaims [{{name: {CLAIM_NAME}, resourceClaimTemplateName: {pool.claim_template_name}}}] "
            f"and resources.claims [{{name: {CLAIM_NAME}}}] (the mutating webhook adds them)"]


def trainjob_note(pool: Pool) -> str:
    """What the webhook does with a TrainJob on a claim pool, and why (a warning the user sees)."""
    return (f"pool {pool.name} offers its fabric as a DRA claim, which a TrainJob cannot carry yet (Trainer v2 "
            "runtimePatches carry no container resources.claims; resourceClaimsPerNode is an open Trainer PR): "
            f"the webhook adds the claim (ResourceClaimTemplate {pool.claim_template_name}) to each of its pods as "
            "they are created, so they get their NICs, but Kueue does not count the claim for this TrainJob; put "
            f"resourceClaims [{{name: {CLAIM_NAME}, resourceClaimTemplateName: {pool.claim_template_name}}}] and "
            f"the node container's resources.claims [{{name: {CLAIM_NAME}}}] in the training runtime to have it "
            "counted")


RETEST_SUFFIX = "-retest"


def retest_claim_template(pool: Pool, namespace: str, taint_key: str) -> dict[str, Any] | None:
    """The pool's template for the controller's re-test of a node whose bad NIC carries fabricguard's device
    taint (a DeviceTaintRule): the same requests, each tolerating ``taint_key`` (NoSchedule), so the re-test
    can claim the very NIC it must prove again. Only the controller's own pair tests use it."""
    t = claim_template(pool, namespace)
    if t is None:
        return None
    t["metadata"]["name"] += RETEST_SUFFIX
    for req in t["spec"]["spec"]["devices"]["requests"]:
        req["exactly"]["tolerations"] = [{"key": taint_key, "operator": "Exists", "effect": "NoSchedule"}]
    return t


def claim_template(pool: Pool, namespace: str) -> dict[str, Any] | None:
    """The ResourceClaimTemplate the controller keeps for ``pool`` in ``namespace`` (None: the pool claims nothing).

    ``resource.k8s.io/v1``: one ``exactly`` request for the NICs (``nic``) and, when aligned, one for the node's
    GPUs (``gpu``) with a ``matchAttribute`` constraint on the PCIe root.
    """
    d = pool.fabric.dra
    name = pool.claim_template_name
    if d is None or name is None:
        return None
    nic: dict[str, Any] = {"deviceClassName": d.deviceClassName, "allocationMode": d.allocationMode}
    if d.allocationMode == "ExactCount":
        nic["count"] = d.count
    requests: list[dict[str, Any]] = [{"name": "nic", "exactly": nic}]
    devices: dict[str, Any] = {"requests": requests}
    if d.alignWithGpus:
        requests.insert(0, {"name": "gpu", "exactly": {"deviceClassName": d.alignWithGpus,
                                                       "allocationMode": "ExactCount", "count": pool.gpusPerNode}})
        devices["constraints"] = [{"requests": ["gpu", "nic"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}]
    return {
        "apiVersion": names.DRA_API,
        "kind": TEMPLATE_KIND,
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {names.LABEL_MANAGED_BY: "fabricguard", names.LABEL_POOL: pool.name}},
        "spec": {"spec": {"devices": devices}},
    }
