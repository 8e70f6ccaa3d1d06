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

A pod cannot start before its claims are allocated, and once it is done the DRA controller deallocates its
claims and deletes those generated from a template: a finished pod's claim that is gone or unallocated was
released, not refused, and is said at info level.

Pure: the objects are handed in (the controller's cache, or ``verify-job --objects``); what it says becomes the
job's reasons (:func:`claim_reasons` in ``verdict.job``), with the object as evidence.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabricguard import names
from fabricguard import objects as o
from fabricguard.kubectl_output import objects_in
from fabricguard.profile.dra import claim_classes
from fabricguard.profile.model import Pool
from fabricguard.yamlsource import SourceError

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


@dataclass
class JobObjects:
    """A job's pods and its namespace's ResourceClaims (by namespace and name)."""

    pods: list[dict[str, Any]]
    claims: dict[tuple[str, str], dict[str, Any]]

    @classmethod
    def of(cls, objs: list[dict[str, Any]]) -> JobObjects:
        return cls([x for x in objs if x.get("kind") == "Pod"],
                   {(o.namespace_of(c) or "default", o.name_of(c)): c for c in objs
                    if c.get("kind") == "ResourceClaim"})


def load_job_objects(paths: list[Path]) -> JobObjects:
    """The pods and ResourceClaims saved in ``paths`` (``kubectl get ... -o json|yaml``); ``SourceError`` naming
    the file that cannot be read, or the first when none holds a Pod."""
    objs = [x for p in paths for x in objects_in(p)]
    found = JobObjects.of(objs)
    if not found.pods:
        raise SourceError(str(paths[0]), None, "no Pod in it; save the job's pods with kubectl get pods -n NS "
                          f"-l {names.LABEL_JOB}=JOB -o json (and its claims with kubectl get resourceclaims "
                          "-n NS -o json)")
    return found


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


def ran_and_finished(pod: dict[str, Any]) -> bool:
    """A pod that is done after its containers ran: ``Succeeded``, or ``Failed`` with a container that started
    (a pod the kubelet refused at admission is Failed without one)."""
    status = _d(pod.get("status"))
    phase = status.get("phase")
    if phase == "Succeeded":
        return True
    if phase != "Failed":
        return False
    for cs in map(_d, _l(status.get("containerStatuses"))):
        for st in (_d(cs.get("state")), _d(cs.get("lastState"))):
            if _d(st.get("terminated")).get("startedAt") or st.get("running"):
                return True
    return False


@dataclass(frozen=True)
class ClaimFinding:
    """What the job's pods' objects say: a level (as a verdict reason's) and the message."""

    level: str  # "info", "warning" or "degraded"
    message: str
    evidence: tuple[dict[str, Any], ...]


def claim_findings(pool: Pool, pods: list[dict[str, Any]],
                   claims: dict[tuple[str, str], dict[str, Any]]) -> list[ClaimFinding]:
    """The job's fabric claims and device health, judged: a claim not allocated to a pod that never ran, or a
    device unhealthy, degrades the job; a finished pod's released claim is said, not held against it; the
    interfaces and addresses the pods got are listed. Empty when the pool claims nothing through
    DRA and no container reports the health of a fabric resource."""
    out: list[ClaimFinding] = []
    unallocated: list[tuple[str, str]] = []
    unknown: list[str] = []
    unhealthy: list[tuple[str, str]] = []
    paths: list[tuple[str, str]] = []
    released: list[str] = []
    for pod in pods:
        pname = o.name_of(pod)
        pcs = _pod_claims(pod, pool, claims)
        finished = ran_and_finished(pod)
        for c in pcs:
            allocated = c.obj is not None and bool(
                _l(_d(_d(_d(c.obj.get("status")).get("allocation")).get("devices")).get("results")))
            if not allocated and finished:
                # A pod that ran had its claims allocated (the kubelet starts no container before); once it is
                # done the DRA controller deallocates its claims and deletes the generated ones.
                released.append(f"{pname}/{c.claim or c.pod_claim}")
                continue
            if c.obj is None:
                unknown.append(f"{pname}/{c.claim or c.pod_claim}")
                continue
            if not allocated:
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
    if released:
        out.append(ClaimFinding("info", f"{len(released)} fabric claim(s) were released when their pods finished "
                                "(the DRA controller deallocates a finished pod's claims and deletes generated "
                                "ones), so their devices are judged from the pods' own status only: "
                                f"{', '.join(released[:MAX_PODS_NAMED])}", ()))
    if paths:
        shown = "; ".join(f"{p}: {w}" for p, w in paths[:MAX_PODS_NAMED])
        more = f" (and {len(paths) - MAX_PODS_NAMED} more)" if len(paths) > MAX_PODS_NAMED else ""
        out.append(ClaimFinding("info", f"the pods' fabric devices, as the DRA driver reported them: {shown}{more}",
                                tuple({"file": f"pod/{p}", "line": None, "why": w} for p, w in paths[:MAX_PODS_NAMED])))
    return out
