"""Rejections: what would make a multi-node GPU workload silently run without its fabric.

Each finding says what to change. The checks run on the object as it will be stored (after the mutating
webhook), so a missing fabric resource or ``NCCL_NET`` here means the injection did not happen or was undone.
The explicit opt-out is annotation ``fabricguard.io/fabric: "none"``; it waives the fabric checks, never the
``hostNetwork``/``privileged`` ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from fabricguard import names, objects
from fabricguard.admission import claimmount, claims
from fabricguard.admission import workloads as wl
from fabricguard.admission.workloads import Workload
from fabricguard.profile.model import PlatformProfile, Pool

Rule = Literal["silent-env", "unreadable-env", "wrong-network", "fabric-missing", "no-fabric-pool", "security",
               "no-group-name", "claim-mount"]


@dataclass(frozen=True)
class Finding:
    """One reason to refuse a workload: which rule, and the message that says what to change."""

    rule: Rule
    message: str

    def __str__(self) -> str:
        return self.message


# Rules whose findings are explained before any conflict: they are what makes a job silently slow.
SILENT_RULES: frozenset[Rule] = frozenset({"silent-env", "unreadable-env"})
SILENT_NETS = frozenset({"socket"})
SILENT_KEYS = frozenset({"NCCL_NET", "NCCL_IB_DISABLE"})


Env = dict[str, dict[str, Any]]


def effective_env(container: dict[str, Any]) -> Env:
    """The env entries the kubelet uses, by name: for a name listed twice, the last entry wins."""
    env = container.get("env")
    if not isinstance(env, list):
        return {}
    return {e["name"]: e for e in env if isinstance(e, dict) and isinstance(e.get("name"), str)}


def _env_value(env: Env, name: str) -> str | None:
    e = env.get(name)
    if e is None or "valueFrom" in e:
        return None
    v = e.get("value")
    return v if isinstance(v, str) else ""


def _source(value_from: Any) -> str:
    if isinstance(value_from, dict) and value_from:
        ref = next(iter(value_from))
        inner = value_from[ref] if isinstance(value_from[ref], dict) else {}
        name = inner.get("name")
        return f"{ref}{f' {name!r}' if isinstance(name, str) else ''}"
    return "valueFrom"


def check_unreadable(env: Env, where: str, keys: frozenset[str]) -> list[Finding]:
    """Keys whose value comes from a ConfigMap, Secret or field: admission cannot see what NCCL will get."""
    out = []
    for key in sorted(k for k in keys if k in env):
        e = env[key]
        if "valueFrom" in e:
            source = _source(e.get("valueFrom"))
            out.append(Finding("unreadable-env", f"env {key} in {where} comes from {source}, which cannot be read "
                                                 "at admission and may hold a value that turns the fabric off; "
                                                 "write the value in env, or set annotation "
                                                 f'{names.ANN_FABRIC}: "none"'))
    return out


def _fabric_pools(profile: PlatformProfile) -> list[str]:
    return [p.name for p in profile.spec.pools if p.fabric.has_fabric]


def check_env(c: dict[str, Any], pool: Pool, where: str, allow: frozenset[str], need_net: bool) -> list[Finding]:
    out: list[Finding] = []
    off = f'or set annotation {names.ANN_FABRIC}: "none" to run on sockets on purpose'
    env = effective_env(c)
    # The silent-path keys, and every key the user took over, must be readable here to be judged.
    out += check_unreadable(env, where, SILENT_KEYS | allow)
    ib_disable = _env_value(env, "NCCL_IB_DISABLE")
    if ib_disable is not None and ib_disable.strip() not in ("", "0"):
        out.append(Finding("silent-env", f"env NCCL_IB_DISABLE={ib_disable} in {where} turns RDMA off and NCCL "
                                         f"falls back to TCP sockets; remove it, {off}"))
    want = pool.fabric.effective_nccl_net
    net = _env_value(env, "NCCL_NET")
    if net is not None and net.strip().lower() in SILENT_NETS:
        out.append(Finding("silent-env", f"env NCCL_NET={net} in {where} forces TCP sockets on pool {pool.name}; "
                                         f"remove it so NCCL_NET={want} is used, {off}"))
    elif net is not None and want and net.strip().lower() != want.lower() and "NCCL_NET" not in allow:
        out.append(Finding("wrong-network", f"env NCCL_NET={net} in {where} is not the pool's network {want}; "
                                            f"remove it, or list NCCL_NET in annotation {names.ANN_ALLOW_OVERRIDE} if "
                                            "this plugin is really installed"))
    elif net is None and want and need_net and "NCCL_NET" not in env:
        out.append(Finding("fabric-missing", f"env NCCL_NET is missing in {where}: without NCCL_NET={want} NCCL "
                                             "falls back to sockets when the fabric is absent; is the fabricguard "
                                             "mutating webhook installed?"))
    return out


def check_resources(res: Any, pool: Pool, where: str) -> list[Finding]:
    out: list[Finding] = []
    res = res if isinstance(res, dict) else {}
    limits = res.get("limits") if isinstance(res.get("limits"), dict) else {}
    requests = res.get("requests") if isinstance(res.get("requests"), dict) else {}
    for name in pool.fabric.resources:
        got = max(objects.count(limits.get(name)), objects.count(requests.get(name)))
        if got <= 0:
            out.append(Finding("fabric-missing", f"{where} asks for no {name}: its traffic would leave the fabric; "
                                                 f"request {name}: {pool.fabric.resources[name]} (the mutating "
                                                 "webhook adds it)"))
    return out


def check_security(spec: dict[str, Any], where: str) -> list[Finding]:
    out: list[Finding] = []
    if spec.get("hostNetwork") is True:
        out.append(Finding("security", f"spec.hostNetwork: true in {where}: RDMA networks are not attached to "
                                       "host-network pods; remove hostNetwork, the fabric's interfaces are injected"))
    for c in objects.containers(spec):
        sc = c.get("securityContext")
        if isinstance(sc, dict) and sc.get("privileged") is True:
            out.append(Finding("security", f"securityContext.privileged: true in {wl.container_label(spec, c)} of "
                                           f"{where}: training pods need only the IPC_LOCK capability, which is "
                                           "added; remove privileged"))
    return out


def silent_findings(w: Workload, pool: Pool) -> list[Finding]:
    """Only the findings of :data:`SILENT_RULES`: env that turns the fabric off, or that cannot be read."""
    if w.opted_out or not pool.fabric.has_fabric:
        return []
    allow = w.allow_override
    out: list[Finding] = []
    if w.kind == "TrainJob":
        trainer = (w.obj.get("spec") or {}).get("trainer") or {}
        out += check_env(trainer, pool, "spec.trainer.env", allow, need_net=False)
    for t in w.templates:
        for c in t.gpu_containers(pool.gpuResource):
            out += check_env(c, pool, f"{wl.container_label(t.spec, c)} of {t.where}", allow, need_net=False)
    return [f for f in out if f.rule in SILENT_RULES]


def check_claim_mounts(profile: PlatformProfile, spec: dict[str, Any], namespace: str, where: str,
                       inherited_env: list[Any] | None = None) -> list[Finding]:
    """Mounts of the Lustre claim other than the job's directory (``admission/claimmount.py``)."""
    rule = claimmount.rule_of(profile)
    if rule is None:
        return []
    return [Finding("claim-mount", str(e))
            for e in claimmount.problems(rule, spec, namespace, where, inherited_env)]


def findings(w: Workload, profile: PlatformProfile, pool: Pool) -> list[Finding]:
    """Every reason to reject the (multi-node GPU) workload ``w``; empty when it may run."""
    out: list[Finding] = []
    allow = w.allow_override
    fabric = pool.fabric
    check_fabric = not w.opted_out
    if check_fabric and not fabric.has_fabric:
        choices = ", ".join(_fabric_pools(profile)) or "none in this profile"
        out.append(Finding("no-fabric-pool", f"pool {pool.name} has no fabric, so this multi-node GPU workload "
                                             f"would talk over TCP sockets; choose a fabric pool with label "
                                             f"{names.LABEL_POOL} ({choices}), or set annotation "
                                             f'{names.ANN_FABRIC}: "none" to accept sockets'))
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
                    out += check_claim_mounts(profile, pspec, w.namespace, f"runtimePatches[{p.get('manager')}]",
                                              trainer.get("env") if isinstance(trainer.get("env"), list) else None)
            except (KeyError, TypeError, AttributeError):
                continue
        return out
    if w.kind == "Pod" and not w.owned and w.job is None:
        out.append(Finding("no-group-name", f"a plain multi-node pod needs a group name: label every pod with "
                                            f"{names.LABEL_JOB}=<job> or {names.KUEUE_POD_GROUP}=<job> and set "
                                            f"annotation {names.KUEUE_GROUP_COUNT}"))
    for t in w.templates:
        spec = t.spec
        out += check_claim_mounts(profile, spec, w.namespace, t.where)
        if t.gpus(gpu) <= 0:
            continue
        out += check_security(spec, t.where)
        if not check_fabric:
            continue
        for c in t.gpu_containers(gpu):
            cw = f"{wl.container_label(spec, c)} of {t.where}"
            out += check_resources(c.get("resources"), pool, cw)
            out += [Finding("fabric-missing", m) for m in claims.missing_claim(spec, c, pool, cw)]
            out += check_env(c, pool, cw, allow, need_net=True)
    return out
