"""Runs a pool transition against the cluster, one idempotent step at a time, its state kept in a ConfigMap.

Every write is either idempotent (create-if-absent, overwrite with what the step computes from the current object,
cordon) or recorded in the state *before* it is made (the nodes this transition cordons), so a run that dies
between any two writes resumes where it stopped and ``abort`` undoes only what this transition did. The state is
updated with its ``resourceVersion``: two operators running ``apply`` at once get a conflict, not a mixed state.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fabricguard import names, objects, yamlout
from fabricguard.exitcodes import exit_code
from fabricguard.kube import Conflict, Kube
from fabricguard.placement import kueue
from fabricguard.placement.transition import (
    FABRIC_VALIDATION,
    STEPS,
    StepResult,
    TransitionSpec,
    TransitionState,
    judge_drain,
    judge_new_pool,
    new_state,
    pool_nodes,
    retired_queue,
    still_running,
    switched_queue,
)
from fabricguard.rbac import Grant, Permissions, grants
from fabricguard.times import format_time, parse_time

KUEUE = names.KUEUE_API
STATE_KEY = "state.json"
STATE_LABEL = names.LABEL_TRANSITION

# What a transition's calls need (the client refuses any other; render transition-rbac prints these as roles):
# its state ConfigMap (and the components' profile ConfigMaps) in its namespace; Nodes (read, cordon); pods per
# node (drain); Kueue's queue objects; the new pool's FabricValidation.
TRANSITION_GRANTS: frozenset[Grant] = frozenset([
    *grants("v1", "configmaps", ["get", "create", "patch"], scope="namespace"),
    # components.py: the agent's DaemonSets in the same namespace, to tell an agent still on the old profile.
    *grants(names.APPS_API, "daemonsets", ["list"], scope="namespace"),
    *grants("v1", "nodes", ["list", "get", "patch"]),
    *grants("v1", "pods", ["list"]),
    *grants(KUEUE, "clusterqueues", ["get", "patch"]),
    *grants(KUEUE, "topologies", ["get", "create", "delete"]),
    *grants(KUEUE, "resourceflavors", ["get", "create", "delete"]),
    *grants(FABRIC_VALIDATION[0], FABRIC_VALIDATION[1], ["list", "get"]),
])


def transition_permissions(namespace: str) -> Permissions:
    return Permissions(TRANSITION_GRANTS, namespace, "pool transition")


def transition_roles(namespace: str) -> list[dict[str, Any]]:
    """A ClusterRole and a Role (in ``namespace``) named fabricguard-transition, from TRANSITION_GRANTS."""
    from fabricguard.rbac import rbac_rules

    name = "fabricguard-transition"
    labels = {**kueue.MANAGED_BY, names.LABEL_APP_COMPONENT: "pool-transition"}
    return [
        {"apiVersion": names.RBAC_API, "kind": "ClusterRole",
         "metadata": {"name": name, "labels": labels}, "rules": rbac_rules(TRANSITION_GRANTS, "cluster")},
        {"apiVersion": names.RBAC_API, "kind": "Role",
         "metadata": {"name": name, "namespace": namespace, "labels": labels},
         "rules": rbac_rules(TRANSITION_GRANTS, "namespace")},
    ]


# Called with a point name after each write that matters ("<step>:applied" before the step is recorded,
# "<step>:recorded" after); the tests raise from it to crash the workflow exactly there.
Checkpoint = Callable[[str], None]


class TransitionConflict(RuntimeError):
    """The stored transition was started from other profiles, or another run changed it meanwhile."""


@dataclass
class TransitionRun:
    state: TransitionState
    verdicts: list[tuple[str, StepResult]] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return phase_verdict(self.state.phase)

    @property
    def exit_code(self) -> int:
        return exit_code(self.verdict)


def phase_verdict(phase: str) -> str:
    """Done is a pass; still moving (in progress, waiting) is degraded; blocked or aborted is failed."""
    return {"Completed": "pass", "InProgress": "degraded", "Waiting": "degraded"}.get(phase, "failed")


def _nothing(point: str) -> None:
    del point


class Workflow:
    def __init__(self, kube: Kube, spec: TransitionSpec, namespace: str, *, checkpoint: Checkpoint = _nothing) -> None:
        self.kube = kube
        self.spec = spec
        self.namespace = namespace
        self.checkpoint = checkpoint
        self._cm: dict[str, Any] | None = None

    # ---------------------------------------------------------------------------------------- state

    async def load(self) -> TransitionState | None:
        self._cm = await self.kube.get("v1", "configmaps", self.spec.name, self.namespace)
        if self._cm is None:
            return None
        raw = (self._cm.get("data") or {}).get(STATE_KEY)
        if not raw:
            raise TransitionConflict(f"ConfigMap {self.namespace}/{self.spec.name} holds no {STATE_KEY}")
        state = TransitionState.model_validate_json(raw)
        if state.profiles != self.spec.digest:
            raise TransitionConflict(
                f"transition {self.spec.name} was started from other profiles (digest {state.profiles}, these are "
                f"{self.spec.digest}); finish or abort it with the profiles it was started with")
        return state

    async def save(self, state: TransitionState, now: datetime) -> None:
        state.updated = format_time(now)
        data = {STATE_KEY: state.model_dump_json(indent=2)}
        if self._cm is None:
            obj = {"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": self.spec.name, "namespace": self.namespace,
                                "labels": {**kueue.MANAGED_BY, STATE_LABEL: "true"}},
                   "data": data}
            self._cm = await self.kube.create("v1", "configmaps", obj)
            return
        obj = {**self._cm, "data": data}
        try:
            self._cm = await self.kube.update("v1", "configmaps", obj, fields=("data",))
        except Conflict:
            raise TransitionConflict(f"another run changed {self.namespace}/{self.spec.name} meanwhile; "
                                     "run status, then apply again") from None

    # ---------------------------------------------------------------------------------------- steps

    async def _nodes(self) -> list[dict[str, Any]]:
        return await self.kube.list("v1", "nodes")

    async def _queue(self) -> dict[str, Any] | None:
        return await self.kube.get(KUEUE, "clusterqueues", self.spec.queue.name)

    async def _set_queue(self, current: dict[str, Any], spec: dict[str, Any]) -> None:
        # A merge patch keeps keys it does not mention: name the ones the new spec drops, with null, to remove them.
        dropped = {k: None for k in (current.get("spec") or {}) if k not in spec}
        await self.kube.update(KUEUE, "clusterqueues", {**current, "spec": {**spec, **dropped}}, fields=("spec",))

    async def _components(self, step: str) -> StepResult | None:
        """Blocked when a component this step needs still holds the wrong profile (``components.py``)."""
        from fabricguard.placement import components

        cms = {comp: await self.kube.get("v1", "configmaps", name, self.namespace)
               for comp, (name, _key, _dir) in components.CONFIGMAPS.items()
               if comp in components.NEEDED_AT.get(step, ())}
        agents: list[str] = []
        if step == "new-pool-ready" and cms.get("agent") is not None:
            agents = [str((d.get("metadata") or {}).get("name"))
                      for d in await self.kube.list(names.APPS_API, "daemonsets", self.namespace)]
        return components.judge(step, self.spec, cms, agents, self.namespace)

    async def step_new_pool_ready(self, state: TransitionState, now: datetime) -> StepResult:
        del now
        wrong = await self._components("new-pool-ready")
        if wrong is not None:
            return wrong
        served = await self.kube.served(*FABRIC_VALIDATION)
        validation = await self.kube.get(*FABRIC_VALIDATION, self.spec.new.name) if served else None
        return judge_new_pool(self.spec, await self._nodes(), validation_served=served, validation=validation,
                              accepted=state.acceptedUnverified)

    async def step_switch_admissions(self, state: TransitionState, now: datetime) -> StepResult:
        wrong = await self._components("switch-admissions")
        if wrong is not None:
            return wrong
        current = await self._queue()
        if current is None:
            return StepResult("blocked", f"ClusterQueue {self.spec.queue.name} does not exist; apply `fabricguard "
                                      "render kueue` of the --from profile first")
        if state.previousClusterQueueSpec is None:
            # Remembered before the first change, so that abort can put it back even after a crash.
            state.previousClusterQueueSpec = current.get("spec") or {}
            await self.save(state, now)
        for obj in (kueue.topology(self.spec.new), kueue.resource_flavor(self.spec.new)):
            if obj is None:
                continue
            plural = "topologies" if obj["kind"] == "Topology" else "resourceflavors"
            if await self.kube.get(KUEUE, plural, obj["metadata"]["name"]) is None:
                await self.kube.create(KUEUE, plural, obj)
        await self._set_queue(current, switched_queue(self.spec, current)["spec"])
        return StepResult("done", f"ClusterQueue {self.spec.queue.name} admits to {self.spec.new.name} first; "
                               f"{self.spec.old.name} stays last with zero quota for what already runs there")

    async def step_drain_old_pool(self, state: TransitionState, now: datetime, deadline: datetime) -> StepResult:
        if state.drainDeadline is None:
            state.drainDeadline = format_time(deadline)
            await self.save(state, now)
        old = pool_nodes(self.spec.old, await self._nodes())
        to_cordon = [n["metadata"]["name"] for n in old if not (n.get("spec") or {}).get("unschedulable")]
        fresh = [n for n in to_cordon if n not in state.cordoned]
        if fresh:
            # Recorded first: after a crash, abort still knows these nodes were ours to uncordon.
            state.cordoned.extend(fresh)
            await self.save(state, now)
        for name in to_cordon:
            await self.kube.patch("v1", "nodes", name, {"spec": {"unschedulable": True}}, patch_type="strategic")
        old_names = [n["metadata"]["name"] for n in old]
        pods: dict[tuple[str, str], dict[str, Any]] = {}
        for name in old_names:
            for pod in await self.kube.list("v1", "pods", field_selector=f"spec.nodeName={name}"):
                meta = pod.get("metadata") or {}
                pods[(meta.get("namespace", ""), meta.get("name", ""))] = pod
        # Written by this workflow (above, or by the run that crashed); unreadable only if edited by hand.
        drain_deadline = parse_time(state.drainDeadline) or deadline
        return judge_drain(still_running(old_names, list(pods.values())), now, drain_deadline)

    async def step_retire(self, state: TransitionState, now: datetime) -> StepResult:
        del state, now
        current = await self._queue()
        if current is not None:
            await self._set_queue(current, retired_queue(self.spec, current)["spec"])
        removed, kept = [], []
        for plural, kind in (("resourceflavors", "ResourceFlavor"), ("topologies", "Topology")):
            obj = await self.kube.get(KUEUE, plural, self.spec.old.name)
            if obj is None:
                continue
            labels = objects.labels_of(obj)
            if labels.get(names.LABEL_MANAGED_BY) != names.MANAGED_BY_VALUE:
                kept.append(f"{kind} {self.spec.old.name} (not rendered by fabricguard)")
                continue
            await self.kube.delete(KUEUE, plural, self.spec.old.name)
            removed.append(f"{kind} {self.spec.old.name}")
        msg = f"{self.spec.old.name} left ClusterQueue {self.spec.queue.name}"
        if removed:
            msg += f"; deleted {', '.join(removed)}"
        if kept:
            msg += f"; left {', '.join(kept)}"
        selector = ",".join(f"{k}={v}" for k, v in self.spec.old.nodeSelector.items())
        return StepResult("done", msg + f"; the old nodes ({selector}) stay cordoned: delete their node pool with "
                                     "the provider")

    # --------------------------------------------------------------------------------------- driver

    async def apply(self, now: datetime, *, deadline: datetime, accept: tuple[str, ...] = (),
                    one_step: bool = False) -> TransitionRun:
        state = await self.load()
        if state is None:
            state = new_state(self.spec, now)
            await self.save(state, now)
        out = TransitionRun(state)
        if state.phase in ("Completed", "Aborted"):
            return out
        for gate in accept:
            if gate not in state.acceptedUnverified:
                state.acceptedUnverified.append(gate)
        while (step := state.next_step()) is not None:
            if step == "new-pool-ready":
                verdict = await self.step_new_pool_ready(state, now)
            elif step == "switch-admissions":
                verdict = await self.step_switch_admissions(state, now)
            elif step == "drain-old-pool":
                verdict = await self.step_drain_old_pool(state, now, deadline)
            else:
                verdict = await self.step_retire(state, now)
            out.verdicts.append((step, verdict))
            self.checkpoint(f"{step}:applied")
            if verdict.status != "done":
                state.phase = "Waiting" if verdict.status == "waiting" else "Blocked"
                state.message = f"{step}: {verdict.message}"
                await self.save(state, now)
                return out
            record = state.step(step)
            record.done, record.detail = format_time(now), verdict.message
            state.phase, state.message = "InProgress", f"{step}: {verdict.message}"
            if state.next_step() is None:
                state.phase = "Completed"
            await self.save(state, now)
            self.checkpoint(f"{step}:recorded")
            if one_step:
                break
        return out

    async def abort(self, now: datetime) -> tuple[TransitionRun, list[str]]:
        state = await self.load()
        if state is None:
            raise TransitionConflict(f"no transition {self.spec.name} in namespace {self.namespace}")
        if state.step("retire").done:
            raise TransitionConflict(f"{self.spec.old.name} is retired already: nothing is safe to roll back; "
                                     "to go back, run a transition from the --to profile to the --from profile")
        undone: list[str] = []
        if state.previousClusterQueueSpec is not None:
            current = await self._queue()
            if current is not None:
                await self._set_queue(current, state.previousClusterQueueSpec)
                undone.append(f"ClusterQueue {self.spec.queue.name} restored")
        for name in state.cordoned:
            if await self.kube.get("v1", "nodes", name) is not None:
                await self.kube.patch("v1", "nodes", name, {"spec": {"unschedulable": False}}, patch_type="strategic")
                undone.append(f"Node {name} uncordoned")
        state.phase = "Aborted"
        state.message = "aborted: " + ("; ".join(undone) or "nothing had changed") + (
            f"; ResourceFlavor {self.spec.new.name} is left in place (unused)")
        await self.save(state, now)
        return TransitionRun(state), undone

    # ------------------------------------------------------------------------------------------ plan

    async def plan(self) -> list[str]:
        """Every change ``apply`` would make, step by step, as unified diffs of the objects (nothing is written)."""
        lines: list[str] = []
        new_objs = [o for o in (kueue.topology(self.spec.new), kueue.resource_flavor(self.spec.new)) if o]
        current = await self._queue()
        nodes = await self._nodes()
        lines.append(f"# 1. {STEPS[0]}: wait for {self.spec.new.name}'s nodes FabricReady=True and its canary passed")
        lines.append(f"# 2. {STEPS[1]}")
        for obj in new_objs:
            plural = "topologies" if obj["kind"] == "Topology" else "resourceflavors"
            if await self.kube.get(KUEUE, plural, obj["metadata"]["name"]) is None:
                lines.extend(_diff(None, obj, f"{obj['kind']}/{obj['metadata']['name']}"))
        if current is None:
            lines.append(f"# ClusterQueue {self.spec.queue.name} does not exist: apply fails here")
            switched = None
        else:
            switched = switched_queue(self.spec, current)
            lines.extend(_diff(current, switched, f"ClusterQueue/{self.spec.queue.name}"))
        lines.append(f"# 3. {STEPS[2]}: cordon, never evict")
        for n in pool_nodes(self.spec.old, nodes):
            if not (n.get("spec") or {}).get("unschedulable"):
                lines.append(f"Node/{n['metadata']['name']}: spec.unschedulable: false -> true")
        lines.append(f"# 4. {STEPS[3]}")
        if switched is not None:
            lines.extend(_diff(switched, retired_queue(self.spec, switched), f"ClusterQueue/{self.spec.queue.name}"))
        for plural, kind in (("resourceflavors", "ResourceFlavor"), ("topologies", "Topology")):
            if await self.kube.get(KUEUE, plural, self.spec.old.name) is not None:
                lines.append(f"delete {kind}/{self.spec.old.name}")
        return lines


def _clean(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items()
            if k not in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields")}
    return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": meta}


def _diff(before: dict[str, Any] | None, after: dict[str, Any], label: str) -> list[str]:
    a = yamlout.dump(_clean(before), sort_keys=False).splitlines() if before else []
    b = yamlout.dump(_clean(after), sort_keys=False).splitlines()
    return list(difflib.unified_diff(a, b, f"{label} (cluster)" if before else "/dev/null", f"{label} (after)",
                                     lineterm="", n=2))


def state_json(state: TransitionState) -> dict[str, Any]:
    """The stored state with the overall answer under ``verdict``, as every command's JSON has it."""
    return {"verdict": phase_verdict(state.phase), **json.loads(state.model_dump_json())}
