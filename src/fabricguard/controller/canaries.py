"""The canary part of a reconcile pass, per pool: adopt, judge, time out, record, and start the next canary.

State lives in the cluster and on Lustre only (the canary JobSet, the pool's FabricValidation and the run's
job directory), so a restarted controller picks up where the last one stopped: a running JobSet is adopted,
and a new canary starts only when none is running and the interval since the last start has passed.

A finished canary's outcome is recorded before anything that could lose it: its JobSet is deleted only by a
pass that reads the outcome back from the FabricValidation's status (the run's name in ``runs`` is the
record, keyed by the run id). Until then every pass judges the run again from its files on Lustre, and so
does a pass that finds a run whose JobSet is gone (its TTL, a person) but was never recorded: the files it
left are judged, and a run that left nothing is a failure. A status write that fails (an HTTP 500, a lost
Lease, a killed process) therefore costs one more pass, never the verdict: the pool's standing always comes
from its latest run, never from an older pass.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from fabricguard import names, times
from fabricguard import objects as o
from fabricguard.controller.actions import Action, Counters, Create, Delete, MergeStatus
from fabricguard.controller.canary import (
    CanarySpec,
    render_canary,
    spec_for,
    started_at,
)
from fabricguard.controller.facts import CanaryFiles, LustreFacts
from fabricguard.controller.outcome import JUDGED, CanaryRun, Outcome, creation_reason, scheduler_reason
from fabricguard.controller.storage_proof import StorageProof, StorageStanding
from fabricguard.controller.storage_proof import standing as storage_standing
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.profile.model import Canary, PlatformProfile, Pool

TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass
class PoolState:
    """A pool's standing after this pass: what the admission check and the exit code are decided from."""

    pool: str
    canary: bool
    ready: bool
    outcome: str | None
    message: str
    evidence: list[str] = field(default_factory=list)
    last_success: str | None = None
    interval_s: int = 0
    busbw: dict[str, float] = field(default_factory=dict)
    latest: str | None = None  # the newest run's outcome, `skipped` included (``outcome`` is the newest judged)
    inspector_busbw: dict[str, float] = field(default_factory=dict)  # the judged run's Inspector figures
    # Set by the pass after the canary part (controller/rootcause.py): the pool's critical doctor findings, its
    # nodes' FabricReady=False, and whether the pool is known broken (Retry) or only not yet proven (Pending).
    root_cause: str = ""
    broken: bool = False
    causes: list[str] = field(default_factory=list)  # each critical finding "rule: first sentence", cause first
    proof: Any = None  # controller.pairs.ProofOutcome of a pool with a proof goal
    # The pool's storage as its canaries' storage probe proved it (controller/storage_proof.py); None: no canary.
    storage: StorageStanding | None = None


@dataclass
class Inventory:
    """Indexes over the listed objects that every pool's pass reads."""

    pods_by_jobset: dict[tuple[str, str], list[dict[str, Any]]]
    used_gpus: dict[tuple[str, str], int]  # (node, resource) -> GPUs requested by live pods
    nodes: list[dict[str, Any]]
    events: list[dict[str, Any]]

    @classmethod
    def build(cls, nodes: list[dict[str, Any]], pods: list[dict[str, Any]], events: list[dict[str, Any]],
              gpu_resources: set[str], indexed: PodIndex | None = None) -> Inventory:
        """``indexed``: ``index_pods(pods, gpu_resources)`` when the caller kept it from a pass with the same
        pods (controller/incremental.py)."""
        by_js, used = indexed if indexed is not None else index_pods(pods, gpu_resources)
        return cls(by_js, used, nodes, events)

    def free_nodes(self, pool: Pool, gpus: int) -> int:
        """Nodes of the pool, Ready and schedulable, with ``gpus`` GPUs that no live pod requests."""
        count = 0
        for n in self.nodes:
            if not pool.matches(n):
                continue
            if (n.get("spec") or {}).get("unschedulable") or not o.condition_true(n, names.NODE_READY):
                continue
            alloc = o.count(((n.get("status") or {}).get("allocatable") or {}).get(pool.gpuResource, 0))
            if alloc - self.used_gpus.get((o.name_of(n), pool.gpuResource), 0) >= gpus:
                count += 1
        return count


PodIndex = tuple[dict[tuple[str, str], list[dict[str, Any]]], dict[tuple[str, str], int]]


def index_pods(pods: list[dict[str, Any]], gpu_resources: set[str], snapshot: Snapshot | None = None) -> PodIndex:
    """(pods by JobSet, GPUs live pods request on each (node, resource)): what the inventory reads of pods. With
    ``snapshot`` (whose pods these are), what each pod adds is kept while it is the same object."""
    by_js: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    used: dict[tuple[str, str], int] = defaultdict(int)
    view = partial(_pod_part, tuple(gpu_resources))
    for p, (js, uses) in (snapshot.select("pod index", pods, view) if snapshot is not None
                          else [(p, v) for p in pods if (v := view(p))]):
        if js is not None:
            by_js[js].append(p)
        for where, n in uses:
            used[where] += n
    return dict(by_js), dict(used)


def _pod_part(gpu_resources: tuple[str, ...], p: dict[str, Any]
              ) -> tuple[tuple[str, str] | None, tuple[tuple[tuple[str, str], int], ...]] | None:
    """What one pod adds to the index: its JobSet's (namespace, name), and the GPUs it holds on its node by
    resource while it is live (None: nothing)."""
    js = o.labels_of(p).get(names.JOBSET_NAME)
    key = (o.namespace_of(p) or "", js) if js else None
    st = p.get("status") or {}
    spec = p.get("spec") or {}
    node = spec.get("nodeName")
    uses: tuple[tuple[tuple[str, str], int], ...] = ()
    if node and st.get("phase") not in TERMINAL_PHASES:
        uses = tuple(((node, r), n) for r in gpu_resources if (n := o.pod_gpus(spec, r)))
    return (key, uses) if key is not None or uses else None


def run_is_over(js: dict[str, Any], pods: list[dict[str, Any]], canary: Canary) -> bool:
    """The canary JobSet finished (its condition, or every pod terminal): its files are to be judged."""
    return _finished(js, pods, canary)[0]


def _finished(js: dict[str, Any], pods: list[dict[str, Any]], canary: Canary) -> tuple[bool, datetime | None]:
    for ctype in ("Completed", "Failed"):
        c = o.find_condition(js, ctype)
        if c is not None and c.get("status") == "True":
            return True, times.parse_time(c.get("lastTransitionTime"))
    phases = [(p.get("status") or {}).get("phase") for p in pods]
    if len(pods) >= canary.nodes and all(ph in TERMINAL_PHASES for ph in phases):
        return True, None
    return False, None


def _pending_since(js: dict[str, Any], pods: list[dict[str, Any]]) -> bool:
    """No pod of the canary has been placed on a node (missing pods count as not placed)."""
    return all(not (p.get("spec") or {}).get("nodeName") for p in pods)


def run_from_files(name: str, files: CanaryFiles, started: str, finished: str, nodes: list[str],
                   note: str = "") -> CanaryRun:
    """A finished run judged from what its pods left on Lustre; files that cannot be read make it a failure."""
    if files.judged is None:
        return CanaryRun(name, Outcome.failed, started, finished,
                         f"cannot judge the canary's files in {files.run_dir}: {files.error}"[:1000] + note,
                         nodes=nodes)
    j = files.judged
    return CanaryRun(name, j.outcome, started, finished, j.message + note, j.evidence, j.transport, j.busbw, nodes,
                     j.inspector, j.storage.to_dict() if j.storage is not None else None)


def _start_key(r: CanaryRun) -> datetime:
    return times.parse_time(r.started) or datetime.min.replace(tzinfo=UTC)


def _lost_runs(pool: Pool, cfg: CanaryConfig, runs: list[CanaryRun], listed: set[str], active: str | None,
               now: datetime, lustre: LustreFacts) -> list[CanaryRun]:
    """Runs that are over but whose outcome no status holds and whose JobSet is gone: judged from Lustre.

    Candidates are the pool's run directories on Lustre and the run the status last named as active. Runs older
    than everything the history keeps are not looked at once the history is full (they were recorded, then
    aged out), and at most ``history`` of them are judged in one pass."""
    recorded = {r.name for r in runs}
    starts = [t for t in (times.parse_time(r.started) for r in runs) if t is not None]
    floor = min(starts) if len(runs) >= cfg.history and starts else None
    on_lustre = lustre.runs.get(pool.name, []) if cfg.lustre_root else []
    names = list(dict.fromkeys(([active] if active else []) + on_lustre))
    out: list[CanaryRun] = []
    for name in names:
        when = started_at(pool, name)
        if name in recorded or name in listed or when is None or (floor is not None and when <= floor):
            continue
        if len(out) >= cfg.history:
            break
        gone = "; its JobSet was gone before its outcome was recorded, so it was judged from what it left on Lustre"
        if name not in on_lustre:
            out.append(CanaryRun(name, Outcome.failed, times.format_time(when), times.format_time(now),
                                 f"canary {name} is gone (its JobSet was deleted before its outcome was recorded) "
                                 "and left no job directory on Lustre to judge it from; the next canary will tell"))
            continue
        files = lustre.canaries.get((cfg.namespace, name))
        if files is None:
            continue  # not read this pass (the edge reads at most ``history`` of them): the next pass will
        finished = files.results_written or when
        finished = min(max(finished, when), now)
        out.append(run_from_files(name, files, times.format_time(when), times.format_time(finished), [], gone))
    return out


def _evaluate(
    profile: PlatformProfile,
    pool: Pool,
    canary: Canary,
    js: dict[str, Any],
    pods: list[dict[str, Any]],
    inv: Inventory,
    now: datetime,
    lustre_root: Path | None,
    lustre: LustreFacts | None = None,
) -> CanaryRun | None:
    """The run record of a canary JobSet that is over, or None while it still runs (or while its files were
    not read)."""
    name = o.name_of(js)
    cfg_ns = o.namespace_of(js) or ""
    started = o.created(js) or now
    nodes = sorted({str((p.get("spec") or {}).get("nodeName")) for p in pods if (p.get("spec") or {}).get("nodeName")})
    done, when = _finished(js, pods, canary)
    if done:
        if lustre_root is None:
            return CanaryRun(name, Outcome.failed, times.format_time(started), times.format_time(when or now),
                             "the controller has no Lustre root (--lustre-root) to read the canary's logs from",
                             nodes=nodes)
        files = (lustre or LustreFacts()).canaries.get((o.namespace_of(js) or "", name))
        if files is None:
            return None  # over, but its files were not read this pass: judged by the next
        return run_from_files(name, files, times.format_time(started), times.format_time(when or now), nodes)
    age = (now - started).total_seconds()
    if not pods and age >= canary.pending_timeout_s:
        # Nothing reached the scheduler: its own outcome, not "unschedulable" (which blames the resources).
        jobs_seen = bool((js.get("status") or {}).get("replicatedJobsStatus"))
        return CanaryRun(name, Outcome.not_created, times.format_time(started), times.format_time(now),
                         f"no pod of the canary was created in {int(age)} s (timeout {canary.pendingTimeout}): "
                         + creation_reason(name, cfg_ns, inv.events, jobs_seen), nodes=nodes)
    if _pending_since(js, pods) and age >= canary.pending_timeout_s:
        reason = scheduler_reason(pods, inv.events)
        return CanaryRun(name, Outcome.unschedulable, times.format_time(started), times.format_time(now),
                         f"Pending for {int(age)} s (timeout {canary.pendingTimeout}): {reason}",
                         [f"Pod {cfg_ns}/{o.name_of(p)}: FailedScheduling" for p in pods[:2]], nodes=nodes)
    if age >= canary.pending_timeout_s + canary.run_timeout_s + 60:
        return CanaryRun(name, Outcome.failed, times.format_time(started), times.format_time(now),
                         f"did not finish within pendingTimeout + runTimeout ({int(age)} s); its pods: "
                         + ", ".join(f"{o.name_of(p)} {(p.get('status') or {}).get('phase')}" for p in pods),
                         nodes=nodes)
    return None


def storage_of(pool: Pool, canary: Canary | None, runs: list[CanaryRun], previous: dict[str, Any] | None,
               now: datetime) -> StorageStanding | None:
    """The pool's storage standing from its runs (newest first) and the status's last ``storage``."""
    if canary is None:
        return None
    last = previous.get("lastProven") if isinstance(previous, dict) else None
    return storage_standing(pool, canary, [(r.name, r.finished, _proof_of(r)) for r in runs],
                            str(last) if last else None, now)


def _proof_of(r: CanaryRun) -> StorageProof | None:
    """A run's storage proof. A run recorded before storage proofs had its storage checks inside its outcome: a
    pass then proved the storage too (an upgrade must not hold every pool until the next canary)."""
    if r.storage is not None:
        return StorageProof.from_dict(r.storage)
    if r.outcome is Outcome.passed:
        return StorageProof("passed", "storage checked within the canary's outcome (a run recorded before storage "
                            "proofs)")
    return None


def _status(runs: list[CanaryRun], history: int, active: dict[str, Any] | None,
            previous_success: str | None, pool: Pool, storage: StorageStanding | None = None) -> dict[str, Any]:
    runs = runs[:history]
    success = next((r.finished for r in runs if r.outcome is Outcome.passed), previous_success)
    # Every key, None where absent: the merge patch then removes what no longer applies.
    return {
        "pool": pool.name,
        "runs": [r.to_dict() for r in runs],
        "lastOutcome": str(runs[0].outcome) if runs else None,
        "lastRun": runs[0].finished if runs else None,
        "lastSuccess": success,
        "active": {"jobSet": o.name_of(active), "started": o.meta(active).get("creationTimestamp")}
        if active is not None else None,
        "storage": storage.to_status() if storage is not None else None,
    }


def pool_state(pool: Pool, canary: Canary | None, runs: list[CanaryRun], last_success: str | None,
               now: datetime, storage: StorageStanding | None = None) -> PoolState:
    """The pool's standing: its fabric's from the newest judged run, then its storage's (both must hold)."""
    state = _fabric_state(pool, canary, runs, last_success, now)
    state.storage = storage
    if storage is not None and not storage.ready:
        if state.ready:
            state.message = storage.message
        elif storage.proof is not None and storage.proof.outcome != "passed":
            state.message += f"; {storage.message}"
        state.ready = False
    return state


def _fabric_state(pool: Pool, canary: Canary | None, runs: list[CanaryRun], last_success: str | None,
                  now: datetime) -> PoolState:
    if canary is None:
        return PoolState(pool.name, False, True, None, f"pool {pool.name} has no canary")
    judged = next((r for r in runs if r.outcome in JUDGED), None)
    last = runs[0] if runs else None
    stale_after = 2 * canary.interval_s
    success_t = times.parse_time(last_success)
    fresh = success_t is not None and (now - success_t).total_seconds() <= stale_after
    if judged is None:
        msg = f"pool {pool.name}: no canary has finished yet"
        if last is not None:
            msg += f" (last: {last.outcome}: {last.message})"
        return PoolState(pool.name, True, False, None, msg, interval_s=canary.interval_s,
                         latest=str(last.outcome) if last else None)
    base = PoolState(pool.name, True, False, str(judged.outcome), "", list(judged.evidence), last_success,
                     canary.interval_s, dict(judged.busbwGBps), str(last.outcome) if last else None,
                     dict(judged.inspectorBusbwGBps))
    if judged.outcome is Outcome.passed and fresh:
        base.ready = True
        base.message = f"pool {pool.name}: canary {judged.name} passed at {judged.finished} ({judged.message})"
    elif judged.outcome is Outcome.passed:
        base.message = (f"pool {pool.name}: no successful canary within two intervals ({2 * canary.interval_s} s); "
                        f"last success {last_success}"
                        + (f"; latest run {last.outcome}: {last.message}" if last is not None else ""))
    else:
        ev = f"; evidence: {judged.evidence[0]}" if judged.evidence else ""
        base.message = (f"pool {pool.name}: canary {judged.outcome} at {judged.finished}: {judged.message}{ev}")
    return base


@dataclass
class CanaryConfig:
    namespace: str
    image: str
    lustre_root: Path | None
    history: int = 10
    mode: str = "enforce"  # the install's mode (observe: the Kueue check reports, never holds); a pool's field wins


def reconcile_pool(
    profile: PlatformProfile,
    pool: Pool,
    fv: dict[str, Any] | None,
    jobsets: list[dict[str, Any]],
    inv: Inventory,
    now: datetime,
    cfg: CanaryConfig,
    counters: Counters,
    lustre: LustreFacts | None = None,
    avoid: list[str] | None = None,
) -> tuple[list[Action], PoolState]:
    """One pool's canary step. Pure: what Lustre holds comes in ``lustre`` (read by ``controller.lustre``).
    ``avoid``: nodes the canary keeps off (proof's suspects and convicts: controller/pairs.py)."""
    lustre = lustre or LustreFacts(cfg.lustre_root)
    canary = profile.canary(pool)
    actions: list[Action] = []
    status = (fv or {}).get("status") or {}
    runs = [r for r in (CanaryRun.from_dict(d) for d in status.get("runs") or () if isinstance(d, dict)) if r]
    previous_success = status.get("lastSuccess")
    if fv is None:
        actions.append(Create(names.FV_API, names.FV_PLURAL, None, {
            "apiVersion": names.FV_API, "kind": names.FV_KIND,
            "metadata": {"name": pool.name, "labels": {names.LABEL_CANARY_POOL: pool.name}},
            "spec": {"pool": pool.name, "interval": canary.interval if canary else None},
        }))
    # The record is keyed by the run id (the JobSet's name); a status that holds one twice keeps the first.
    runs = list({r.name: r for r in reversed(runs)}.values())[::-1]
    recorded = {r.name for r in runs}
    mine = sorted(
        (js for js in jobsets if o.labels_of(js).get(names.LABEL_CANARY_POOL) == pool.name
         and o.namespace_of(js) == cfg.namespace),
        key=lambda js: (o.meta(js).get("creationTimestamp") or "", o.name_of(js)),
    )
    active: dict[str, Any] | None = None
    new_runs: list[CanaryRun] = []
    for js in mine:
        name = o.name_of(js)
        if name in recorded or canary is None:
            # Only a run whose outcome this pass read back from the status is deleted: the record came first.
            actions.append(Delete(names.JOBSET_API, "jobsets", cfg.namespace, name))
            continue
        pods = inv.pods_by_jobset.get((cfg.namespace, name), [])
        run = _evaluate(profile, pool, canary, js, pods, inv, now, cfg.lustre_root, lustre)
        if run is not None:
            # Recorded by this pass's status write; the JobSet stays until a later pass reads that record back.
            new_runs.append(run)
        elif active is None:
            active = js  # adopted: a restarted controller waits for it instead of starting another
        else:
            actions.append(Delete(names.JOBSET_API, "jobsets", cfg.namespace, name))  # at most one per pool
    if canary is not None:
        was_active = ((status.get("active") or {}).get("jobSet") if isinstance(status.get("active"), dict)
                      else None)
        new_runs += _lost_runs(pool, cfg, runs, {o.name_of(js) for js in mine},
                               str(was_active) if was_active else None, now, lustre)
    if canary is not None and active is None:
        starts = [times.parse_time(r.started) for r in new_runs + runs]
        last_start = max((t for t in starts if t is not None), default=None)
        if last_start is None or (now - last_start) >= timedelta(seconds=canary.interval_s):
            free = inv.free_nodes(pool, canary.gpusPerPod)
            if free < canary.nodes:
                new_runs.append(CanaryRun(
                    f"skipped-{int(now.timestamp())}", Outcome.skipped, times.format_time(now), times.format_time(now),
                    f"pool saturated: {free} node(s) of pool {pool.name} have {canary.gpusPerPod} free "
                    f"{pool.gpuResource}; the canary needs {canary.nodes}",
                ))
            else:
                spec: CanarySpec = spec_for(profile, pool, cfg.namespace, now)
                body = render_canary(profile, pool, spec, image=cfg.image, owner=fv, avoid=avoid)
                actions.append(Create(names.JOBSET_API, "jobsets", cfg.namespace, body,
                                      owner=None if fv is not None else (names.FV_PLURAL, pool.name)))
                # ``status.active`` names it once a pass lists it: a run named there existed, so if it is ever
                # gone unrecorded it is judged (a create that failed leaves nothing to judge and no record).
    for r in new_runs:
        counters.canary_runs.append((pool.name, str(r.outcome)))
    # Newest run first, by start (a run id carries its start): the pool stands on its latest run.
    all_runs = sorted(new_runs + runs, key=_start_key, reverse=True)
    storage = storage_of(pool, canary, all_runs[: cfg.history], status.get("storage"), now)
    want = _status(all_runs, cfg.history, active, previous_success, pool, storage)
    if want != {k: status.get(k) for k in want}:
        actions.append(MergeStatus(names.FV_API, names.FV_PLURAL, None, pool.name, want))
    state = pool_state(pool, canary, all_runs[: cfg.history], want.get("lastSuccess"), now, storage)
    return actions, state
