"""The proof part of a reconcile pass, per pool: observe the nodes and the pair tests, decide, and act.

``controller/proof.py`` decides over plain facts; this module builds those facts from the listed cluster (the
pool's Nodes, the live pods' GPUs, the pair JobSets and their pods, what the pairs left on Lustre) and turns the
decision into actions: pair JobSets (``canary.render_pair``), fabricguard's quarantine taint, the
``FabricProven`` node condition, the ``fabricguard.io/last-proven`` annotation, Events, and the pool's proof
table in ``FabricValidation.status.proof``.

State lives in that status (``active`` pairs, the per-node table, the day's spend, the breaker), so a restarted
controller picks up where the last one stopped. A pair's result is recorded before its JobSet is deleted: a
JobSet that the status no longer lists as active was recorded by an earlier pass and is deleted; one it lists
is judged (from its files on Lustre, as the pool canary is) and dropped from ``active`` in the same status
write that records its evidence.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fabricguard import names, proofmark, times
from fabricguard import objects as o
from fabricguard.controller import proof as pf
from fabricguard.controller.actions import Action, Annotate, ApplyStatus, Create, Delete, JsonPatch, event
from fabricguard.controller.canaries import CanaryConfig, Inventory, _evaluate
from fabricguard.controller.canary import CanarySpec, job_dir, pair_name, render_pair
from fabricguard.profile.model import PlatformProfile, Pool

if TYPE_CHECKING:  # the Lustre edge reads the files before the pass; this module only looks them up
    from fabricguard.controller.facts import LustreFacts

OWN_TAINTS = (names.TAINT_QUARANTINED, *names.TAINT_KEYS, names.TAINT_STARTUP_UNVERIFIED)
DTR_PLURAL = "devicetaintrules"  # resource.k8s.io/v1 DeviceTaintRule (GA in Kubernetes 1.37)
DTR_KIND = "DeviceTaintRule"
LABEL_NODE = "fabricguard.io/node"
ANN_EVIDENCE = "fabricguard.io/quarantine-evidence"
MAX_CONDITION_WRITES = 200  # FabricProven writes per pool and pass; the rest follow on the next passes


@dataclass
class ProofOutcome:
    """What the pass knows about a pool's proof: for the Kueue check, the metrics and ``pool coverage``."""

    decision: pf.Decision
    proven: int
    counted: int
    every_s: int
    gpus: int
    largest_gang: int
    evaluated: list[pf.PairResult] = field(default_factory=list)

    @property
    def broken(self) -> str:
        return self.decision.broken


def _hostname(node: dict[str, Any]) -> str:
    return o.labels_of(node).get(names.LABEL_HOSTNAME) or o.name_of(node)


def proof_basis(node: dict[str, Any], keys: list[str]) -> dict[str, str]:
    """What a node's proof rests on: its ``reproveOnLabels`` values and its kernel (``status.nodeInfo``)."""
    labels = o.labels_of(node)
    out = {k: labels[k] for k in keys if k in labels}
    kernel = ((node.get("status") or {}).get("nodeInfo") or {}).get("kernelVersion")
    if isinstance(kernel, str) and kernel:
        out[pf.KERNEL_KEY] = kernel
    return out


def pool_facts(pool: Pool, nodes: list[dict[str, Any]], inv: Inventory,
               device_quarantined: set[str] | frozenset[str] = frozenset()) -> dict[str, pf.NodeFacts]:
    """The pool's Nodes as the decisions see them; ``device_quarantined``: nodes whose bad NIC carries one of
    fabricguard's DeviceTaintRules (quarantined like a node taint, on just that NIC)."""
    proof = pool.proof
    assert proof is not None
    block_label = pool.topology_levels[0] if pool.topology_levels else pool.fabric.topologyLabel
    out: dict[str, pf.NodeFacts] = {}
    for n in nodes:
        if not pool.matches(n):
            continue
        name = o.name_of(n)
        labels = o.labels_of(n)
        fr = o.find_condition(n, names.FABRIC_READY)
        taints = o.taint_keys(n)
        out[name] = pf.NodeFacts(
            name=name,
            block=labels.get(block_label) if block_label and block_label != names.LABEL_HOSTNAME else None,
            ready=o.condition_true(n, names.NODE_READY),
            idle=inv.used_gpus.get((name, pool.gpuResource), 0) == 0,
            held=pf.held_elsewhere(n, OWN_TAINTS),
            quarantined=names.TAINT_QUARANTINED in taints or name in device_quarantined,
            bootstrapping=pool.bootstrap_taint in taints,
            fabric_ready=None if fr is None else fr.get("status") == "True",
            joined=o.created(n),
            labels=proof_basis(n, proof.reproveOnLabels),
        )
    return out


def largest_gang(profile: PlatformProfile, pool: Pool, workloads: list[dict[str, Any]]) -> int:
    """Nodes the largest admitted Workload on the pool's flavors holds (its GPUs over the pool's per node)."""
    flavors = set(profile.canary_flavors(pool))
    best = 0
    for wl in workloads:
        if not o.condition_true(wl, names.WL_ADMITTED) or o.condition_true(wl, names.WL_FINISHED):
            continue
        adm = (wl.get("status") or {}).get("admission") or {}
        assigned = {str(f) for psa in adm.get("podSetAssignments") or () for f in (psa.get("flavors") or {}).values()}
        if not assigned & flavors:
            continue
        gpus = 0
        for ps in (wl.get("spec") or {}).get("podSets") or ():
            spec = ((ps.get("template") or {}).get("spec")) or {}
            gpus += o.count(ps.get("count", 1)) * o.pod_gpus(spec, pool.gpuResource)
        best = max(best, math.ceil(gpus / pool.gpusPerNode))
    return best


def _busbw(run_busbw: dict[str, float]) -> float | None:
    if "all_reduce" in run_busbw:
        return run_busbw["all_reduce"]
    return max(run_busbw.values()) if run_busbw else None


def _preempted(js: dict[str, Any], pods: list[dict[str, Any]]) -> bool:
    """Kueue suspended it (its Workload evicted) or the scheduler preempted a pod: not a failure of the pair."""
    if (js.get("spec") or {}).get("suspend") and pods:
        return True
    for p in pods:
        st = p.get("status") or {}
        if st.get("reason") == "Preempted":
            return True
        c = o.find_condition(p, "DisruptionTarget")
        if c is not None and c.get("status") == "True" and "Preempt" in str(c.get("reason") or ""):
            return True
    return False


def _results(profile: PlatformProfile, pool: Pool, state: pf.ProofState, listed: dict[str, dict[str, Any]],
             inv: Inventory, now: datetime, cfg: CanaryConfig, lustre: LustreFacts, gpus: int) -> list[pf.PairResult]:
    canary = profile.canary(pool)
    assert canary is not None
    pair_canary = canary.model_copy(update={"nodes": 2})
    out: list[pf.PairResult] = []
    for a in state.active:
        started = times.parse_time(a.started) or now
        js = listed.get(a.name)
        outcome, msg, busbw, finished = "", "", None, now
        if js is None:
            files = lustre.canaries.get((cfg.namespace, a.name))
            if files is not None and files.judged is not None:
                j = files.judged
                outcome, msg, busbw = str(j.outcome), j.message, _busbw(j.busbw)
                finished = min(max(files.results_written or now, started), now)
            else:
                outcome, msg = "lost", "its JobSet is gone and it left nothing on Lustre to judge"
        else:
            pods = inv.pods_by_jobset.get((cfg.namespace, a.name), [])
            if _preempted(js, pods):
                outcome, msg = "preempted", "preempted by work (a scavenger test never takes work's place)"
            else:
                run = _evaluate(profile, pool, pair_canary, js, pods, inv, now, cfg.lustre_root, lustre)
                if run is None:
                    continue
                outcome, msg, busbw = str(run.outcome), run.message, _busbw(run.busbwGBps)
                finished = times.parse_time(run.finished) or now
        on_gpu = max(0.0, (finished - started).total_seconds()) if outcome not in ("unschedulable", "not-created",
                                                                                     "lost") else 0.0
        files = lustre.canaries.get((cfg.namespace, a.name))
        rails = list(files.judged.rails) if files is not None and files.judged is not None else []
        out.append(pf.PairResult(a.name, a.nodes, outcome, finished, a.purpose, busbw, msg[:300],
                                 2 * gpus * on_gpu / 3600, rails))
    return out


def _condition(node: dict[str, Any], row: pf.NodeProof, now: datetime) -> dict[str, Any] | None:
    """The FabricProven condition the node should carry, or None to leave it as it is."""
    if row.state in ("proven", "due") and row.lastProven:
        status, reason = "True", "PairTestPassed"
        msg = (f"proven at {row.lastProven} by pair {row.pair} with {row.partner} "
               f"({pf._bw(row.busbwGBps)}, {row.link or 'link unknown'})")
    elif row.state in ("quarantined", "convicted"):
        status, reason, msg = "False", "Convicted", f"convicted by pair bisection: {row.message}"
    elif row.state == "changed":
        status, reason, msg = "False", "ChangedSinceProof", row.message
    elif row.state == "timed-out":
        status, reason, msg = "False", "ProofTimedOut", row.message
    else:
        return None
    cur = o.find_condition(node, names.FABRIC_PROVEN)
    if cur is not None and cur.get("status") == status and cur.get("reason") == reason:
        return None
    return {"type": names.FABRIC_PROVEN, "status": status, "reason": reason, "message": msg[:1024],
            "lastTransitionTime": times.format_time(now), "lastHeartbeatTime": times.format_time(now)}


def last_proven_annotation(row: pf.NodeProof) -> str:
    return proofmark.format_last_proven(row.lastProven or "", row.pair, row.partner, row.busbwGBps, row.link)


def _taint_patch(node: dict[str, Any], quarantine: bool, pool: str) -> JsonPatch:
    """fabricguard's quarantine taint added or removed, every other taint kept as it is; the patch first tests the
    Node's ``resourceVersion``, so a taint anyone set meanwhile fails it (retried next pass) instead of being lost."""
    current = [t for t in (node.get("spec") or {}).get("taints") or () if isinstance(t, dict)]
    kept = [t for t in current if t.get("key") != names.TAINT_QUARANTINED]
    taints = [*kept, {"key": names.TAINT_QUARANTINED, "value": pool, "effect": "NoSchedule"}] if quarantine else kept
    ops: list[dict[str, Any]] = []
    rv = o.meta(node).get("resourceVersion")
    if rv:
        ops.append({"op": "test", "path": "/metadata/resourceVersion", "value": str(rv)})
    ops.append({"op": "add", "path": "/spec/taints", "value": taints})
    return JsonPatch(names.CORE_API, "nodes", None, o.name_of(node), ops)


def _rule_name(node: str, nic: str) -> str:
    """``fabricguard-<node>-<nic>``: a DNS subdomain (``_`` is not allowed), at most 253 characters."""
    return re.sub(r"[^a-z0-9.-]+", "-", f"fabricguard-{node}-{nic}".lower()).strip("-.")[:253]


def nic_devices(pool: Pool, node: str, row: pf.NodeProof, slices: list[dict[str, Any]]
                ) -> list[tuple[str, str, str, str]]:
    """(NIC, driver, ResourceSlice pool, device) of each bad NIC the row names, found in the node's ResourceSlices
    from the pool's DRA driver: the device whose name is the NIC's, or one of whose attributes is the NIC's PCI
    address (``dra.net/pciAddress``, ``resource.kubernetes.io/pciBusID``). A NIC not found is left out."""
    dra = pool.fabric.dra
    if dra is None or not row.nics:
        return []
    out: list[tuple[str, str, str, str]] = []
    for nic, pci in sorted(row.nics.items()):
        for s in slices:
            spec = s.get("spec") or {}
            if spec.get("driver") != dra.driver or spec.get("nodeName") != node:
                continue
            spool = str((spec.get("pool") or {}).get("name") or "")
            dev = next((d for d in spec.get("devices") or () if isinstance(d, dict) and (
                d.get("name") == nic or any(isinstance(v, dict) and v.get("string") == pci
                                            for v in (d.get("attributes") or {}).values()))), None)
            if dev is not None and spool:
                out.append((nic, dra.driver, spool, str(dev.get("name"))))
                break
    return out


def taint_rule(pool: Pool, node: str, nic: str, driver: str, spool: str, device: str, why: str) -> dict[str, Any]:
    """fabricguard's DeviceTaintRule on one bad NIC (``resource.k8s.io/v1``): NoSchedule, never NoExecute (a running
    gang is never drained); a claim that does not tolerate it is not allocated that NIC."""
    return {
        "apiVersion": names.DRA_API, "kind": DTR_KIND,
        "metadata": {"name": _rule_name(node, nic),
                     "labels": {names.LABEL_MANAGED_BY: "fabricguard", names.LABEL_PROOF_POOL: pool.name,
                                LABEL_NODE: node},
                     "annotations": {ANN_EVIDENCE: why[:1000]}},
        "spec": {"deviceSelector": {"driver": driver, "pool": spool, "device": device},
                 "taint": {"key": names.TAINT_QUARANTINED, "value": pool.name, "effect": "NoSchedule"}},
    }


def our_rules(pool: Pool, rules: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """fabricguard's DeviceTaintRules of this pool, by node."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rules:
        labels = o.labels_of(r)
        if labels.get(names.LABEL_PROOF_POOL) == pool.name and labels.get(LABEL_NODE):
            out.setdefault(labels[LABEL_NODE], []).append(r)
    return out


def reconcile_proof(profile: PlatformProfile, pool: Pool, fv: dict[str, Any] | None, jobsets: list[dict[str, Any]],
                    inv: Inventory, workloads: list[dict[str, Any]], now: datetime, cfg: CanaryConfig,
                    lustre: LustreFacts, *, slices: list[dict[str, Any]] | None = None,
                    device_rules: list[dict[str, Any]] | None = None
                    ) -> tuple[list[Action], dict[str, Any], ProofOutcome]:
    """One pool's proof step: (actions, the ``status.proof`` to write, the outcome). Pure.

    ``device_rules``: the cluster's DeviceTaintRules, None where it does not serve them. Where it does, on a DRA
    claim pool, a convicted node whose bad NIC was named and found in its ResourceSlices (``slices``) is
    quarantined by a DeviceTaintRule on just that NIC instead of a node taint; elsewhere by the node taint."""
    proof = pool.proof
    assert proof is not None
    status = (fv or {}).get("status") or {}
    previous = pf.ProofState.from_dict(status.get("proof"))
    nodes = {o.name_of(n): n for n in inv.nodes if pool.matches(n)}
    rules = our_rules(pool, device_rules or [])
    facts = pool_facts(pool, list(nodes.values()), inv, set(rules))
    gpus = proof.gpusPerPod or pool.gpusPerNode
    mine = {o.name_of(js): js for js in jobsets if o.labels_of(js).get(names.LABEL_PROOF_POOL) == pool.name
            and o.namespace_of(js) == cfg.namespace}
    actions: list[Action] = []
    active = {a.name for a in previous.active}
    for name in sorted(mine):
        if name not in active:  # recorded by an earlier pass (or never recorded as started): done with it
            actions.append(Delete(names.JOBSET_API, "jobsets", cfg.namespace, name))
    results = _results(profile, pool, previous, mine, inv, now, cfg, lustre, gpus)
    gang = largest_gang(profile, pool, workloads)
    hosts = {n: _hostname(nodes[n]) for n in nodes}
    decision = pf.decide(previous, facts, results, proof, gpus_per_node=pool.gpusPerNode, largest_gang=gang,
                         now=now, name_of=lambda i: pair_name(pool, now, i),
                         observe=profile.mode_of(pool, cfg.mode) == "observe")
    for p in decision.start:
        spec = CanarySpec(pool.name, p.name, cfg.namespace, job_dir(profile, cfg.namespace, p.name))
        tolerate = ([pool.bootstrap_taint] if p.tolerate_bootstrap else []) + (
            [names.TAINT_QUARANTINED] if p.tolerate_quarantine else [])
        body = render_pair(profile, pool, spec, (hosts[p.nodes[0]], hosts[p.nodes[1]]), image=cfg.image, owner=fv,
                           purpose=p.purpose, tolerate=tolerate)
        actions.append(Create(names.JOBSET_API, "jobsets", cfg.namespace, body,
                              owner=None if fv is not None else (names.FV_PLURAL, pool.name)))
    device_taints = device_rules is not None and pool.claim_template_name is not None
    for n in decision.taint:
        row = decision.state.nodes[n]
        devs = nic_devices(pool, n, row, slices or []) if device_taints else []
        if not devs:
            actions.append(_taint_patch(nodes[n], True, pool.name))
            continue
        for nic, driver, spool, device in devs:
            actions.append(Create(names.DRA_API, DTR_PLURAL, None,
                                  taint_rule(pool, n, nic, driver, spool, device, row.message)))
        actions.append(event(nodes[n], names.CORE_API, "Node", "FabricDeviceQuarantined", (
            f"pool {pool.name}: a DeviceTaintRule on just the bad NIC(s) "
            + ", ".join(f"{nic} (device {device} of {driver}, pool {spool})" for nic, driver, spool, device in devs)
            + "; the node's other devices stay in service"), now, warning=True))
    for n in decision.untaint:
        for r in rules.get(n, []):
            actions.append(Delete(names.DRA_API, DTR_PLURAL, None, o.name_of(r)))
        if names.TAINT_QUARANTINED in o.taint_keys(nodes[n]) or n not in rules:
            actions.append(_taint_patch(nodes[n], False, pool.name))
    writes = 0
    for n, row in sorted(decision.state.nodes.items()):
        if n not in nodes:
            continue
        node = nodes[n]
        cond = _condition(node, row, now)
        if cond is not None and writes < MAX_CONDITION_WRITES:
            writes += 1
            actions.append(ApplyStatus(names.CORE_API, "Node", "nodes", None, n, {"conditions": [cond]}))
        if row.lastProven:
            value = last_proven_annotation(row)
            if (o.meta(node).get("annotations") or {}).get(names.ANN_LAST_PROVEN) != value:
                actions.append(Annotate(names.CORE_API, "nodes", None, n, {names.ANN_LAST_PROVEN: value}))
    for node_name, reason, message, warning in decision.events:
        obj = nodes.get(node_name)
        if obj is not None:
            actions.append(event(obj, names.CORE_API, "Node", reason, f"pool {pool.name}: {message}", now,
                                 warning=warning))
        elif fv is not None:
            actions.append(event(fv, names.FV_API, names.FV_KIND, reason, f"pool {pool.name}: {message}", now,
                                 warning=warning))
    proven, counted = pf.coverage(decision.state, facts, proof, now)
    outcome = ProofOutcome(decision, proven, counted, proof.every_s, gpus, gang, results)
    return actions, decision.state.to_dict(decision.budget_gpu_hours), outcome


def avoided_nodes(fv: dict[str, Any] | None) -> list[str]:
    """Nodes the pool canary keeps off: under suspicion, convicted, quarantined, or changed since proven (a pool
    canary that lands on the bad node would hold the whole pool for one node's fault)."""
    state = pf.ProofState.from_dict(((fv or {}).get("status") or {}).get("proof"))
    return sorted(n for n, r in state.nodes.items() if r.state in ("suspect", "convicted", "quarantined", "changed"))

