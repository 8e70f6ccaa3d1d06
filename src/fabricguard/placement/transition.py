"""A node-pool transition as data: which pool leaves, which arrives, the four steps, and each step's judgement.

A reservation that moves between datacenter blocks is a platform transition (the field report): bring up a new
pool, move admissions to it, let the old pool's work finish, retire the old pool. This module is pure: it reads
two profiles and objects the workflow observed, and says what each step wants to write and whether it is done.
``workflow.py`` performs the writes and persists the state in the cluster.

1. ``new-pool-ready``: the new pool's nodes report ``FabricReady=True`` and its canary passed. A gate whose
   evidence does not exist in the cluster (no node agent, no controller) is *unverified*, and blocks unless the
   operator accepts it by name; it is never silently skipped.
2. ``switch-admissions``: the new pool's flavor goes first in the ClusterQueue, and the old flavor stays last with
   zero quota: Kueue admits nothing new there and leaves admitted workloads running (a lower quota does not evict).
3. ``drain-old-pool``: cordon the old nodes; never evict a running gang; done when no training pod is left, or
   blocked at the deadline with the list of what still runs.
4. ``retire``: the old flavor leaves the ClusterQueue; its ResourceFlavor and Topology (if fabricguard rendered
   them) are deleted.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from fabricguard import names, objects
from fabricguard.placement import kueue
from fabricguard.profile.model import PlatformProfile, Pool, Queue
from fabricguard.times import format_time
from fabricguard.workload_identity import job_of

STEPS = ("new-pool-ready", "switch-admissions", "drain-old-pool", "retire")
GATES = ("agent", "canary")
READY_CONDITION = names.FABRIC_READY  # written by the node agent
FABRIC_VALIDATION = (names.FV_API, names.FV_PLURAL)

Phase = Literal["InProgress", "Waiting", "Blocked", "Completed", "Aborted"]


class TransitionError(ValueError):
    """The two profiles do not describe a transition; the message says which option or field to change."""


@dataclass(frozen=True)
class TransitionSpec:
    old: Pool
    new: Pool
    queue: Queue
    target: PlatformProfile
    digest: str

    @property
    def name(self) -> str:
        return f"fabricguard-transition-{self.old.name}-to-{self.new.name}"


def _pick(name: str | None, candidates: list[str], known: list[str], option: str, what: str) -> str:
    if name is not None:
        if name not in known:
            raise TransitionError(f"{option} {name!r} is not a pool of the {what} profile; its pools: {known}")
        return name
    if len(candidates) != 1:
        raise TransitionError(
            f"cannot tell the {'old' if option == '--old-pool' else 'new'} pool: {len(candidates)} pools "
            f"({candidates}) are only in the {what} profile; name it with {option}"
        )
    return candidates[0]


def spec_from(source: PlatformProfile, target: PlatformProfile, source_text: str, target_text: str, *,
              old_pool: str | None = None, new_pool: str | None = None) -> TransitionSpec:
    """The transition from ``source`` (the profile in force) to ``target``; pools found by what differs."""
    a, b = source.pool_names, target.pool_names
    old = _pick(old_pool, [p for p in a if p not in b], a, "--old-pool", "--from")
    new = _pick(new_pool, [p for p in b if p not in a], b, "--new-pool", "--to")
    if old == new:
        raise TransitionError(f"--old-pool and --new-pool are both {old!r}; a transition moves to another pool")
    old_p, new_p = source.pool(old), target.pool(new)
    if new_p.queue is None or old_p.queue is None:
        raise TransitionError(f"pools {old!r} and {new!r} must both name a queue: the transition moves that "
                              "queue's admissions from one flavor to the other")
    if new_p.queue.name != old_p.queue.name:
        raise TransitionError(f"pool {old!r} is in queue {old_p.queue.name!r} and {new!r} in "
                              f"{new_p.queue.name!r}; a transition keeps the queue users submit to")
    if new_p.nodes is None:
        raise TransitionError(f"--to: pool {new!r} sets no nodes; its quota in the ClusterQueue needs them")
    digest = hashlib.sha256((source_text + "\0" + target_text).encode()).hexdigest()[:16]
    return TransitionSpec(old_p, new_p, new_p.queue, target, digest)


# --------------------------------------------------------------------------------------------------- state


class StepRecord(BaseModel):
    name: str
    done: str | None = None
    detail: str = ""


class TransitionState(BaseModel):
    """What the cluster remembers of one transition (stored as JSON in a ConfigMap), so any run can resume it."""

    oldPool: str
    newPool: str
    queue: str
    profiles: str = Field(description="Digest of the two profiles the transition was started with.")
    phase: Phase = "InProgress"
    message: str = ""
    started: str
    updated: str
    steps: list[StepRecord]
    drainDeadline: str | None = None
    cordoned: list[str] = Field(default_factory=list)
    previousClusterQueueSpec: dict[str, Any] | None = None
    acceptedUnverified: list[str] = Field(default_factory=list)

    def step(self, name: str) -> StepRecord:
        return next(s for s in self.steps if s.name == name)

    def next_step(self) -> str | None:
        return next((s.name for s in self.steps if s.done is None), None)


def new_state(spec: TransitionSpec, now: datetime) -> TransitionState:
    return TransitionState(oldPool=spec.old.name, newPool=spec.new.name, queue=spec.queue.name,
                           profiles=spec.digest, started=format_time(now), updated=format_time(now),
                           steps=[StepRecord(name=s) for s in STEPS])


# ------------------------------------------------------------------------------------------------ verdicts


@dataclass(frozen=True)
class StepResult:
    """A step's judgement: ``done``, ``waiting`` (time will do it), or ``blocked`` (an operator must act)."""

    status: Literal["done", "waiting", "blocked"]
    message: str
    unverified: tuple[str, ...] = field(default=())


def pool_nodes(pool: Pool, nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [n for n in nodes if pool.matches(n)]


def canary_outcome(fabric_validation: dict[str, Any]) -> str | None:
    """The last canary outcome the controller recorded on a FabricValidation (``status.lastOutcome``), or None."""
    outcome = (fabric_validation.get("status") or {}).get("lastOutcome")
    return str(outcome) if outcome else None


def judge_new_pool(spec: TransitionSpec, nodes: list[dict[str, Any]], *, validation_served: bool,
                   validation: dict[str, Any] | None, accepted: list[str]) -> StepResult:
    """Gate 1: the new pool's nodes proved their fabric and its canary passed, or the operator accepted not knowing."""
    members = pool_nodes(spec.new, nodes)
    if not members:
        return StepResult("waiting", f"no node matches pool {spec.new.name}'s nodeSelector {spec.new.nodeSelector} yet")
    waiting: list[str] = []
    unverified: list[str] = []
    found: list[str] = []
    if not any(objects.find_condition(n, READY_CONDITION) for n in nodes):
        unverified.append("agent")
    else:
        not_ready = [objects.name_of(n) for n in members if not objects.condition_true(n, READY_CONDITION)]
        if not_ready:
            waiting.append(f"{len(not_ready)} of {len(members)} node(s) are not {READY_CONDITION}=True: "
                           f"{', '.join(not_ready[:10])}")
        else:
            found.append(f"{len(members)} node(s) {READY_CONDITION}=True")
    if not validation_served:
        unverified.append("canary")
    elif validation is None:
        waiting.append(f"no canary has run on pool {spec.new.name} yet (no FabricValidation {spec.new.name})")
    else:
        outcome = canary_outcome(validation)
        if outcome != "passed":
            waiting.append(f"pool {spec.new.name}'s last canary is {outcome or 'not finished'}, not passed")
        else:
            found.append("canary passed")
    if waiting:
        return StepResult("waiting", "; ".join(waiting))
    refused = [g for g in unverified if g not in accepted]
    if refused:
        why = {"agent": f"no node reports {READY_CONDITION} (the fabricguard node agent is not deployed)",
               "canary": "FabricValidation is not served (the fabricguard controller is not installed)"}
        return StepResult("blocked", "cannot tell whether the new pool is ready: " + "; ".join(why[g] for g in refused)
                       + f"; deploy it, or accept not knowing with --accept-unverified {','.join(refused)}",
                       tuple(unverified))
    notes = found + [f"{g} unverified, accepted by the operator" for g in unverified]
    return StepResult("done", "; ".join(notes), tuple(unverified))


def _flavor_entry(cq: dict[str, Any], flavor: str) -> tuple[int, dict[str, Any]] | None:
    for i, group in enumerate((cq.get("spec") or {}).get("resourceGroups") or ()):
        for f in group.get("flavors") or ():
            if f.get("name") == flavor:
                return i, f
    return None


def _as_target_renders(spec: TransitionSpec, current: dict[str, Any]) -> dict[str, Any]:
    """The current ClusterQueue with the spec the target profile renders for the queue."""
    pools = [p for p in spec.target.spec.pools if p.queue is not None and p.queue.name == spec.queue.name]
    out = copy.deepcopy(current)
    out["spec"] = {**(current.get("spec") or {}), **kueue.cluster_queue(spec.queue, pools, spec.target)["spec"]}
    return out


def switched_queue(spec: TransitionSpec, current: dict[str, Any]) -> dict[str, Any]:
    """The ClusterQueue with the target profile's flavors first and the old flavor last, at zero quota."""
    out = _as_target_renders(spec, current)
    group = out["spec"]["resourceGroups"][0]
    old = _flavor_entry(current, spec.old.name)
    if old is not None:
        old_resources = [r["name"] for r in old[1].get("resources") or ()]
        for r in old_resources:
            if r not in group["coveredResources"]:
                group["coveredResources"].append(r)
                for f in group["flavors"]:
                    f["resources"].append({"name": r, "nominalQuota": "0"})
        group["flavors"].append({"name": spec.old.name,
                                 "resources": [{"name": r, "nominalQuota": "0"} for r in group["coveredResources"]]})
    return out


def retired_queue(spec: TransitionSpec, current: dict[str, Any]) -> dict[str, Any]:
    """The ClusterQueue as the target profile renders it: the old flavor gone."""
    return _as_target_renders(spec, current)


def workload_of(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    job = job_of(meta.get("labels"))
    if job is not None:
        return f"{meta.get('namespace', '')}/{job[1]}"
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller"):
            return f"{meta.get('namespace', '')}/{ref.get('kind')}/{ref.get('name')}"
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _is_daemon(pod: dict[str, Any]) -> bool:
    return any(r.get("kind") == "DaemonSet" for r in (pod.get("metadata") or {}).get("ownerReferences") or ())


def still_running(old_node_names: list[str], pods: list[dict[str, Any]]) -> dict[str, int]:
    """Pods left on the old nodes by workload (DaemonSet pods and finished pods are not work to wait for)."""
    on = set(old_node_names)
    out: dict[str, int] = {}
    for pod in pods:
        if (pod.get("spec") or {}).get("nodeName") not in on or _is_daemon(pod):
            continue
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        key = workload_of(pod)
        out[key] = out.get(key, 0) + 1
    return out


def judge_drain(running: dict[str, int], now: datetime, deadline: datetime) -> StepResult:
    if not running:
        return StepResult("done", "no work left on the old pool")
    listed = ", ".join(f"{w} ({n} pod{'s' if n > 1 else ''})" for w, n in sorted(running.items()))
    if now < deadline:
        return StepResult("waiting", f"{len(running)} workload(s) still run on the old pool: {listed}; they finish on "
                                  f"their own (deadline {format_time(deadline)})")
    return StepResult("blocked", f"drain deadline {format_time(deadline)} passed and {len(running)} workload(s) still "
                              f"run on the old pool: {listed}. Nothing was evicted: let them finish, or stop them "
                              "yourself, then run apply again")
