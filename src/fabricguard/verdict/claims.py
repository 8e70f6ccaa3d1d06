"""On DRA pools, the path each pod really got: its NIC ResourceClaims and the health the kubelet reports.

A job's logs say which transport NCCL used; its pods' objects say which devices Kubernetes gave them. This
module reads, for every pod of a finished job, the fabric claims it holds (``spec.resourceClaims`` resolved
through ``status.resourceClaimStatuses``, and a KEP-5004 claim through ``status.extendedResourceClaimStatus``)
as the API server stores them (``resource.k8s.io/v1``):

* ``status.allocation.devices.results``: a claim without one was never allocated;
* ``status.devices[]`` (KEP-4817): per device, ``conditions`` (a ``Ready`` that is not ``True`` is unhealthy)
  and ``networkData`` (``interfaceName``, ``ips``): the interface and addresses the pod's traffic used;
* ``status.containerStatuses[].allocatedResourcesStatus[]`` (KEP-4680, where the kubelet reports it): a
  fabric resource or claim whose device reports ``Unhealthy``.

Pure: the objects are handed in (the controller's cache); what it says becomes the job's reasons, with the
object as evidence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fabricguard import objects as o
from fabricguard.profile.dra import claim_classes
from fabricguard.profile.model import Pool

MAX_PODS_NAMED = 5


def _l(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _d(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


@dataclass
class PodClaim:
    """One fabric claim of one pod: the name the pod gives it, the ResourceClaim's name, and the object."""

    pod: str
    pod_claim: str  # the entry's name in the pod's spec.resourceClaims ("" for a KEP-5004 claim)
    claim: str | None  # the ResourceClaim's name (None: the pod's status does not name one yet)
    obj: dict[str, Any] | None


def _pod_claims(pod: dict[str, Any], pool: Pool, claims: dict[tuple[str, str], dict[str, Any]]) -> list[PodClaim]:
    """The pod's claims of the pool's fabric DeviceClass (or made from the pool's template)."""
    d = pool.fabric.dra
    if d is None:
        return []
    ns, name = o.namespace_of(pod) or "default", o.name_of(pod)
    status = _d(pod.get("status"))
    generated = {_d(s).get("name"): _d(s).get("resourceClaimName") for s in _l(status.get("resourceClaimStatuses"))}
    out: list[PodClaim] = []
    for rc in map(_d, _l(_d(pod.get("spec")).get("resourceClaims"))):
        entry = str(rc.get("name") or "")
        cname = rc.get("resourceClaimName") or generated.get(entry)
        obj = claims.get((ns, str(cname))) if cname else None
        template = rc.get("resourceClaimTemplateName")
        ours = template is not None and template == pool.claim_template_name
        if ours or (obj is not None and d.deviceClassName in claim_classes(obj)):
            out.append(PodClaim(name, entry, str(cname) if cname else None, obj))
    ext = _d(status.get("extendedResourceClaimStatus")).get("resourceClaimName")
    if d.extended and ext:
        out.append(PodClaim(name, "", str(ext), claims.get((ns, str(ext)))))
    return out


def _unhealthy_devices(claim: dict[str, Any]) -> list[str]:
    """Devices of an allocated claim whose driver reports them not ready (KEP-4817 conditions)."""
    bad: list[str] = []
    for dev in map(_d, _l(_d(claim.get("status")).get("devices"))):
        for c in o.conditions_in(dev):
            t, s = str(c.get("type", "")), str(c.get("status", ""))
            if (t.lower() == "ready" and s != "True") or (t.lower() in ("unhealthy", "failed") and s == "True"):
                why = c.get("message") or c.get("reason") or f"{t}={s}"
                bad.append(f"{dev.get('driver', '?')}/{dev.get('pool', '?')}/{dev.get('device', '?')} ({why})")
                break
    return bad


def network_paths(claim: dict[str, Any]) -> list[str]:
    """``interface ips`` of each device the driver reported network data for."""
    out: list[str] = []
    for dev in map(_d, _l(_d(claim.get("status")).get("devices"))):
        nd = _d(dev.get("networkData"))
        if nd:
            ips = ",".join(str(x) for x in _l(nd.get("ips")))
            out.append(f"{nd.get('interfaceName') or dev.get('device', '?')}" + (f" {ips}" if ips else ""))
    return out


def _unhealthy_allocated(pod: dict[str, Any], pool: Pool, pod_claims: list[PodClaim]) -> list[str]:
    """KEP-4680: the kubelet's health of each container's allocated fabric devices."""
    watched = {f"claim:{c.pod_claim}" for c in pod_claims if c.pod_claim} | set(pool.fabric.resources)
    bad: list[str] = []
    for cs in map(_d, _l(_d(pod.get("status")).get("containerStatuses"))):
        for ars in map(_d, _l(cs.get("allocatedResourcesStatus"))):
            rname = str(ars.get("name", ""))
            if not any(rname == w or rname.startswith(w + "/") for w in watched):
                continue
            for res in map(_d, _l(ars.get("resources"))):
                if res.get("health") == "Unhealthy":
                    bad.append(f"{cs.get('name', '?')}: {rname} {res.get('resourceID', '?')}")
    return bad


@dataclass(frozen=True)
class ClaimFinding:
    """What the job's pods' objects say: a level (as a verdict reason's) and the message."""

    level: str  # "info", "warning" or "degraded"
    message: str
    evidence: tuple[dict[str, Any], ...]


def claim_findings(pool: Pool, pods: list[dict[str, Any]],
                   claims: dict[tuple[str, str], dict[str, Any]]) -> list[ClaimFinding]:
    """The job's fabric claims and device health, judged: a claim not allocated or a device unhealthy degrades
    the job; the interfaces and addresses the pods got are listed. Empty when the pool claims nothing through
    DRA and no container reports the health of a fabric resource."""
    out: list[ClaimFinding] = []
    unallocated: list[tuple[str, str]] = []
    unknown: list[str] = []
    unhealthy: list[tuple[str, str]] = []
    paths: list[tuple[str, str]] = []
    for pod in pods:
        pname = o.name_of(pod)
        pcs = _pod_claims(pod, pool, claims)
        for c in pcs:
            if c.obj is None:
                unknown.append(f"{pname}/{c.claim or c.pod_claim}")
                continue
            if not _l(_d(_d(_d(c.obj.get("status")).get("allocation")).get("devices")).get("results")):
                unallocated.append((pname, c.claim or c.pod_claim))
                continue
            unhealthy += [(pname, f"claim {c.claim}: {d}") for d in _unhealthy_devices(c.obj)]
            paths += [(pname, p) for p in network_paths(c.obj)]
        unhealthy += [(pname, b) for b in _unhealthy_allocated(pod, pool, pcs)]
    ev = [{"file": f"pod/{p}", "line": None, "why": w} for p, w in (unallocated + unhealthy)[:MAX_PODS_NAMED]]
    if unallocated:
        named = ", ".join(f"{p} ({c})" for p, c in unallocated[:MAX_PODS_NAMED])
        out.append(ClaimFinding("degraded", f"{len(unallocated)} fabric ResourceClaim(s) were never allocated, so "
                                f"those pods ran without the fabric's NICs: {named}", tuple(ev)))
    if unhealthy:
        named = "; ".join(f"{p}: {w}" for p, w in unhealthy[:MAX_PODS_NAMED])
        out.append(ClaimFinding("degraded", f"{len(unhealthy)} fabric device(s) the job's pods held report "
                                f"unhealthy: {named}", tuple(ev)))
    if unknown:
        out.append(ClaimFinding("warning", f"{len(unknown)} fabric claim(s) of the job's pods could not be read "
                                f"(gone, or not yet named in the pod's status): {', '.join(unknown[:MAX_PODS_NAMED])}",
                                ()))
    if paths:
        shown = "; ".join(f"{p}: {w}" for p, w in paths[:MAX_PODS_NAMED])
        more = f" (and {len(paths) - MAX_PODS_NAMED} more)" if len(paths) > MAX_PODS_NAMED else ""
        out.append(ClaimFinding("info", f"the pods' fabric devices, as the DRA driver reported them: {shown}{more}",
                                tuple({"file": f"pod/{p}", "line": None, "why": w} for p, w in paths[:MAX_PODS_NAMED])))
    return out
