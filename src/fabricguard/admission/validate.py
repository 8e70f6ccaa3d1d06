"""Rejections: what would make a multi-node GPU workload silently run without its fabric.

Each finding says what to change. The checks run on the object as it will be stored (after the mutating
webhook), so a missing fabric resource or ``NCCL_NET`` here means the injection did not happen or was undone.
The explicit opt-out is annotation ``fabricguard.io/fabric: "none"``; it waives the fabric checks, never the
``hostNetwork``/``privileged`` ones.
"""

from __future__ import annotations

from typing import Any

from fabricguard.admission import workloads as wl
from fabricguard.admission.workloads import Workload
from fabricguard.profile.model import PlatformProfile, Pool

SILENT_NETS = frozenset({"socket"})


def _env_value(container: dict[str, Any], name: str) -> str | None:
    for e in container.get("env") or []:
        if isinstance(e, dict) and e.get("name") == name:
            v = e.get("value")
            return v if isinstance(v, str) else None
    return None


def _has_env(container: dict[str, Any], name: str) -> bool:
    return any(isinstance(e, dict) and e.get("name") == name for e in container.get("env") or [])


def _fabric_pools(profile: PlatformProfile) -> list[str]:
    return [p.name for p in profile.spec.pools if p.fabric.has_fabric]


def check_env(c: dict[str, Any], pool: Pool, where: str, allow: frozenset[str], need_net: bool) -> list[str]:
    out: list[str] = []
    off = f'or set annotation {wl.ANN_FABRIC}: "none" to run on sockets on purpose'
    ib_disable = _env_value(c, "NCCL_IB_DISABLE")
    if ib_disable is not None and ib_disable.strip() not in ("", "0"):
        out.append(f"env NCCL_IB_DISABLE={ib_disable} in {where} turns RDMA off and NCCL falls back to TCP "
                   f"sockets; remove it, {off}")
    want = pool.fabric.effective_nccl_net
    net = _env_value(c, "NCCL_NET")
    if net is not None and net.strip().lower() in SILENT_NETS:
        out.append(f"env NCCL_NET={net} in {where} forces TCP sockets on pool {pool.name}; remove it so "
                   f"NCCL_NET={want} is used, {off}")
    elif net is not None and want and net.strip().lower() != want.lower() and "NCCL_NET" not in allow:
        out.append(f"env NCCL_NET={net} in {where} is not the pool's network {want}; remove it, or list "
                   f"NCCL_NET in annotation {wl.ANN_ALLOW_OVERRIDE} if this plugin is really installed")
    elif net is None and want and need_net and not _has_env(c, "NCCL_NET"):
        out.append(f"env NCCL_NET is missing in {where}: without NCCL_NET={want} NCCL falls back to sockets "
                   f"when the fabric is absent; is the fabricguard mutating webhook installed?")
    return out


def check_resources(res: Any, pool: Pool, where: str) -> list[str]:
    out: list[str] = []
    res = res if isinstance(res, dict) else {}
    limits = res.get("limits") if isinstance(res.get("limits"), dict) else {}
    requests = res.get("requests") if isinstance(res.get("requests"), dict) else {}
    for name in pool.fabric.resources:
        got = max(wl.parse_quantity(limits.get(name)), wl.parse_quantity(requests.get(name)))
        if got <= 0:
            out.append(f"{where} asks for no {name}: its traffic would leave the fabric; request "
                       f"{name}: {pool.fabric.resources[name]} (the mutating webhook adds it)")
    return out


def check_security(spec: dict[str, Any], where: str) -> list[str]:
    out: list[str] = []
    if spec.get("hostNetwork") is True:
        out.append(f"spec.hostNetwork: true in {where}: RDMA networks are not attached to host-network pods; "
                   f"remove hostNetwork, the fabric's interfaces are injected")
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or []:
            if isinstance(c, dict) and ((c.get("securityContext") or {}).get("privileged") is True):
                out.append(f"securityContext.privileged: true in container {c.get('name')!r} of {where}: "
                           f"training pods need only the IPC_LOCK capability, which is added; remove privileged")
    return out


def findings(w: Workload, profile: PlatformProfile, pool: Pool) -> list[str]:
    """Every reason to reject the (multi-node GPU) workload ``w``; empty when it may run."""
    out: list[str] = []
    allow = w.allow_override
    fabric = pool.fabric
    check_fabric = not w.opted_out
    if check_fabric and not fabric.has_fabric:
        choices = ", ".join(_fabric_pools(profile)) or "none in this profile"
        out.append(f"pool {pool.name} has no fabric, so this multi-node GPU workload would talk over TCP "
                   f"sockets; choose a fabric pool with label {wl.LABEL_POOL} ({choices}), or set annotation "
                   f'{wl.ANN_FABRIC}: "none" to accept sockets')
        check_fabric = False
    gpu = pool.gpuResource
    if w.kind == "TrainJob":
        trainer = (w.obj.get("spec") or {}).get("trainer") or {}
        if check_fabric:
            out += check_resources(trainer.get("resourcesPerNode"), pool, "spec.trainer.resourcesPerNode")
            out += check_env(trainer, pool, "spec.trainer.env", allow, need_net=True)
        for p in (w.obj.get("spec") or {}).get("runtimePatches") or []:
            try:
                rjobs = p["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
                for rj in rjobs:
                    pspec = rj["template"]["spec"]["template"].get("spec") or {}
                    out += check_security(pspec, f"runtimePatches[{p.get('manager')}]")
            except (KeyError, TypeError, AttributeError):
                continue
        return out
    if w.kind == "Pod" and not w.owned and w.job is None:
        out.append(f"a plain multi-node pod needs a group name: label every pod with {wl.LABEL_JOB}=<job> or "
                   f"{wl.KUEUE_POD_GROUP}=<job> and set annotation {wl.KUEUE_GROUP_COUNT}")
    for t in w.templates:
        spec = t.spec
        if wl.pod_gpus(spec, gpu) <= 0:
            continue
        out += check_security(spec, t.where)
        if not check_fabric:
            continue
        for c in wl.containers(spec):
            if wl.container_gpus(c, gpu) <= 0:
                continue
            cw = f"container {c.get('name')!r} of {t.where}"
            out += check_resources(c.get("resources"), pool, cw)
            out += check_env(c, pool, cw, allow, need_net=True)
    return out
