"""One reconcile pass as pure logic: the listed cluster, the profile and a clock in; actions and standings out.

The pass is level-based: it reads the whole state every time (a missed watch event is repaired by the next
pass) and asks only for the changes that bring the cluster to what it should be, so running it twice with
nothing new in between asks for nothing the second time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from fabricguard import names, times
from fabricguard import objects as o
from fabricguard.controller.actions import Action, Counters, MergeStatus
from fabricguard.controller.blast import PoolBreakers, judge_breakers, scan_nodes
from fabricguard.controller.canaries import CanaryConfig, Inventory, PoolState, index_pods, reconcile_pool
from fabricguard.controller.claims import claim_template_actions
from fabricguard.controller.facts import LustreFacts, served
from fabricguard.controller.gate import GateMemo, gate_workloads, keep_active
from fabricguard.controller.incremental import Incremental, PassStats
from fabricguard.controller.jobs import judge_jobs
from fabricguard.controller.live import RunningJob, running_jobs
from fabricguard.controller.outcome import Outcome
from fabricguard.controller.pairs import avoided_nodes, reconcile_proof
from fabricguard.controller.rootcause import apply_standing, critical_by_pool, fv_actions, nodes_say
from fabricguard.controller.validation import FabricValidationStatus
from fabricguard.doctor.diff import diff_snapshots, drift_scope
from fabricguard.doctor.model import Finding
from fabricguard.doctor.reference import Reference
from fabricguard.doctor.rules import run_rules
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.profile.model import PlatformProfile


@dataclass
class PassResult:
    now: datetime
    actions: list[Action]
    pools: dict[str, PoolState]
    findings: list[Finding]
    pending: dict[str, int]
    counters: Counters = field(default_factory=Counters)
    running: list[RunningJob] = field(default_factory=list)  # managed jobs whose logs are followed live
    workloads: list[dict[str, Any]] = field(default_factory=list)
    drift: list[Finding] = field(default_factory=list)  # against the reference environment, when one is given
    reference: Reference | None = None
    held: list[tuple[str, str, str]] = field(default_factory=list)  # (namespace, workload, pool) the check holds
    stale: str = ""  # why the pass's view was too old to admit on ("" when fresh)
    breakers: dict[str, PoolBreakers] = field(default_factory=dict)  # pool -> its checks' breakers
    would_hold: dict[str, int] = field(default_factory=dict)  # observe mode: pool -> workloads enforce would hold
    observing: frozenset[str] = frozenset()  # pools in observe mode this pass
    pods: list[dict[str, Any]] = field(default_factory=list)  # running managed jobs' pods (rank -> pod -> node)
    stats: PassStats | None = None  # incremental passes: full or incremental, and what was judged again

    @property
    def unhealthy_pools(self) -> list[str]:
        """Pools that are not validated (controller/rootcause.py: one meaning for the exit code, the Kueue
        check and fabricguard_pool_fabric_validated), and pools outside the profile a critical finding names."""
        bad = {p for p, s in self.pools.items() if not s.ready}
        bad |= {p for p in critical_by_pool(self.findings) if p not in self.pools}
        return sorted(bad)

    @property
    def exit_code(self) -> int:
        return 1 if self.unhealthy_pools else 0

    def summary(self) -> dict[str, Any]:
        return {
            "verdict": "degraded" if self.unhealthy_pools else "pass",
            "now": times.format_time(self.now),
            "pools": {
                p: {"ready": s.ready, "canary": s.canary, "outcome": s.outcome, "latest": s.latest,
                    "message": s.message, "rootCause": s.root_cause or None, "broken": s.broken,
                    "lastSuccess": s.last_success, "heldWorkloads": self.pending.get(p, 0),
                    "wouldHold": self.would_hold.get(p, 0),
                    "openBreakers": self.breakers[p].open_checks if p in self.breakers else [],
                    "storage": s.storage.to_status() if s.storage is not None else None}
                for p, s in self.pools.items()
            },
            "findings": [f.to_dict() | {"pools": f.pools} for f in self.findings],
            "drift": [f.to_dict() for f in self.drift],
            "actions": [type(a).__name__ for a in self.actions],
        }


def reconcile(snapshot: Snapshot, profile: PlatformProfile, now: datetime, cfg: CanaryConfig,
              reference: Reference | None = None, *, lustre: LustreFacts | None = None,
              stale: str = "", incremental: Incremental | None = None) -> PassResult:
    """One pass. Pure: what Lustre holds (canary results, finished jobs' logs) is read before, at the edge
    (``controller.lustre.load``), and comes in ``lustre``; without it nothing on Lustre is judged this pass.
    ``stale`` says why the snapshot is too old to admit on (the gate then holds: ``gate_workloads``).

    ``incremental`` (the loop's, kept between passes: controller/incremental.py): the parts of the pass that
    nothing changed for are last pass's; the results are those of a full pass over the same snapshot."""
    if incremental is None:
        return _reconcile(snapshot, profile, now, cfg, reference, lustre, stale, None)
    incremental.begin(snapshot, (profile, cfg, stale), now)
    result = _reconcile(snapshot, profile, now, cfg, reference, lustre, stale, incremental)
    incremental.finish()
    result.stats = incremental.stats
    return result


def _reconcile(snapshot: Snapshot, profile: PlatformProfile, now: datetime, cfg: CanaryConfig,
               reference: Reference | None, lustre: LustreFacts | None, stale: str,
               inc: Incremental | None) -> PassResult:
    lustre = lustre if lustre is not None else LustreFacts(cfg.lustre_root)
    counters = Counters()
    actions: list[Action] = []
    gpu_resources = {p.gpuResource for p in profile.spec.pools}
    indexed = (inc.keep("pod index", ("Pod",), lambda: index_pods(snapshot.pods, gpu_resources, snapshot))
               if inc else None)
    inv = Inventory.build(snapshot.nodes, snapshot.pods, snapshot.events, gpu_resources, indexed)
    fvs = {o.name_of(fv): fv for fv in snapshot.kind(names.FV_KIND)}
    jobsets = snapshot.kind("JobSet")
    states: dict[str, PoolState] = {}
    proof_actions: list[Action] = []
    for pool in profile.spec.pools:
        fv = fvs.get(pool.name)
        avoid = avoided_nodes(fv) if pool.proof is not None else None
        acts, state = reconcile_pool(profile, pool, fv, jobsets, inv, now, cfg, counters, lustre, avoid)
        if pool.proof is not None and profile.canary(pool) is not None:
            dtr_served = served(snapshot.notes, "devicetaintrules", names.DRA_API)
            p_acts, proof_status, state.proof = reconcile_proof(
                profile, pool, fv, jobsets, inv, snapshot.kind("Workload"), now, cfg, lustre,
                slices=snapshot.kind("ResourceSlice"),
                device_rules=snapshot.kind("DeviceTaintRule") if dtr_served else None)
            if proof_status != ((fv or {}).get("status") or {}).get("proof"):
                record = next((a for a in acts if isinstance(a, MergeStatus) and a.plural == names.FV_PLURAL), None)
                if record is not None:
                    record.status["proof"] = proof_status
                else:
                    acts.append(MergeStatus(names.FV_API, names.FV_PLURAL, None, pool.name, {"proof": proof_status}))
            proof_actions += p_acts
        actions += acts
        states[pool.name] = state
    # The doctor first: its critical findings and the nodes' FabricReady are part of the pool's one standing.
    findings = inc.rules(snapshot, profile, now) if inc is not None else run_rules(snapshot, profile, now)
    # The blast-radius breakers (controller/blast.py): nodes behind an open breaker do not count against the pool.
    scanned = (inc.keep("breaker scan", ("Node",), lambda: scan_nodes(profile, snapshot.nodes, snapshot))
               if inc else None)
    blast = judge_breakers(profile, snapshot.nodes, fvs, snapshot.kind("Workload"),
                           snapshot.kind("NodeReadinessRule"), now, cfg.mode, scanned, snapshot)
    # An open breaker releases its nodes' taints at once, but excuses them from holding the pool only once a canary
    # has passed after it opened: a typo of ours then costs at most one canary interval of held work, while a fabric
    # that really broke on every node at once (a switch, the 271-day plugin) stays held (never fail open).
    proven_after = {name: _canary_passed_after(states.get(name), pb) for name, pb in blast.pools.items()}
    withheld = {n for name, pb in blast.pools.items() if proven_after[name] for n in pb.withheld}
    # Nodes proof quarantined are out of service already: they do not hold the pool (controller/proof.py).
    withheld |= {n for st in states.values() if st.proof is not None for n in st.proof.decision.quarantined}
    said = inc.keep("agents say", ("Node",), lambda: nodes_say(profile, snapshot.nodes, withheld, snapshot),
                    key=frozenset(withheld)) if inc else None
    apply_standing(profile, snapshot, states, findings, withheld, said)
    for name, pb in blast.pools.items():
        if pb.open_checks and name in states:
            holding = ("not holding" if proven_after[name] else
                       "holding until a canary passes after it opened")
            states[name].message = (f"breaker open for check(s) {', '.join(pb.open_checks)} (not tainting, "
                                    f"{holding}, until `fabricguard breaker reset`); " + states[name].message)
    for st in states.values():
        if st.proof is not None and st.proof.broken:
            # Only a pool that is itself broken is held: fewer healthy nodes than its largest gang, or every pair
            # failing. One bad node is quarantined instead (controller/proof.py).
            st.ready, st.broken = False, True
            st.message = f"pool {st.pool}: node proof: {st.proof.broken}; " + st.message
            st.root_cause = (st.root_cause + "; " if st.root_cause else "") + f"node proof: {st.proof.broken}"
    root = fv_actions(profile, snapshot, states, findings, now)
    root += [MergeStatus(names.FV_API, names.FV_PLURAL, None, pool, status)
             for pool, status in blast.fv_status.items() if pool in fvs]
    for a in [a for a in root if isinstance(a, MergeStatus)]:
        # One status write per FabricValidation and pass: the conditions ride on the run record when there is one.
        record = next((b for b in actions if isinstance(b, MergeStatus) and b.plural == a.plural and b.name == a.name),
                      None)
        if record is not None:
            record.status.update(a.status)
        else:
            actions.append(a)
    for write in actions:  # every status write conforms to the typed status the CRD's schema is generated from
        if isinstance(write, MergeStatus) and write.plural == names.FV_PLURAL:
            FabricValidationStatus.model_validate({k: v for k, v in write.status.items() if v is not None})
    checks = snapshot.kind("AdmissionCheck")
    actions += keep_active(checks, now)
    memo: GateMemo | None = None
    if inc is not None:
        memo = inc.gate = inc.gate if isinstance(inc.gate, GateMemo) else GateMemo()
    gate = gate_workloads(profile, snapshot.kind("Workload"), checks, states, now, stale, cfg.mode, memo)
    if inc is not None and memo is not None:
        inc.stats.workloads_decided, inc.stats.workloads_kept = memo.decided, memo.kept
        inc.stats.reevaluated += memo.decided
    actions += gate.actions
    actions += judge_jobs(profile, snapshot.by_kind, lustre, now, counters, snapshot)
    actions += claim_template_actions(profile, snapshot, cfg.namespace)
    actions += [a for a in blast.actions if not isinstance(a, MergeStatus)]
    actions += proof_actions  # pair tests, quarantine taints, FabricProven, last-proven, their Events
    actions += [a for a in root if not isinstance(a, MergeStatus)]  # Events on the objects at fault, last
    drift = (diff_snapshots(reference.snapshot, snapshot, drift_scope([profile]), reference.environment,
                            "this cluster") if reference is not None else [])
    running = running_jobs(profile, snapshot.by_kind, snapshot)
    namespaces = frozenset(j.namespace for j in running)
    pods = ([p for p, _ in snapshot.select("pods of running jobs", snapshot.kind("Pod"), partial(_in, namespaces))]
            if namespaces else [])
    return PassResult(now, actions, states, findings, gate.pending, counters, running, snapshot.kind("Workload"),
                      drift, reference, gate.held, stale, breakers=blast.pools, would_hold=gate.would_hold,
                      observing=frozenset(p.name for p in profile.spec.pools
                                          if profile.mode_of(p, cfg.mode) == "observe"), pods=pods)


def _in(namespaces: frozenset[str], obj: dict[str, Any]) -> bool:
    return o.namespace_of(obj) in namespaces


def _canary_passed_after(state: PoolState | None, pb: PoolBreakers) -> bool:
    """Whether the pool's canary passed after its newest open breaker opened (the fabric works: the breaker's
    failures are then taken as ours, and its nodes stop holding the pool)."""
    opened = [st.since for st in pb.states.values() if st.open and st.since is not None]
    if state is None or not opened or state.outcome != str(Outcome.passed) or not state.last_success:
        return False
    passed = times.parse_time(state.last_success)
    return passed is not None and passed > max(opened)
