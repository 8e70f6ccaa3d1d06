"""Which profile each running component holds, checked at the transition step where it must have changed.

A pool transition (``transition.py``) moves admissions from an old pool to a new one; the components read the
profile from their ConfigMaps (and roll when it changes, ``fabricguard.io/profile-sha256``). Two steps depend on
them:

- ``new-pool-ready``: the agent must know the new pool (its DaemonSet ``fabricguard-agent-<new>`` and a profile
  with the pool, or the new nodes report ``NoPoolForNode`` and never pass), and so must the controller (or no
  canary ever runs on the new pool and its gate never passes);
- ``switch-admissions``: the webhook must inject the *new* pool's selector and resources before the ClusterQueue
  admits there; a webhook still on the old profile injects the old pool's nodeSelector into workloads that Kueue
  places on the new flavor, and they stay Pending.

A component that is not installed is not judged here (the step's own gates say what lacks evidence).
"""

from __future__ import annotations

from typing import Any

from fabricguard.admission import render as admission_render
from fabricguard.agent import render as agent_render
from fabricguard.controller import manifests as controller_manifests
from fabricguard.placement.install import ADMISSION, AGENT, CONTROLLER
from fabricguard.placement.transition import StepResult, TransitionSpec
from fabricguard.profile import ProfileError, loads_profile

# component -> (ConfigMap name, key, install directory)
CONFIGMAPS: dict[str, tuple[str, str, str]] = {
    "webhook": (f"{admission_render.NAME}-profile", admission_render.PROFILE_KEY, ADMISSION),
    "agent": (agent_render.NAME, agent_render.PROFILE_KEY, AGENT),
    "controller": (f"{controller_manifests.NAME}-profile", controller_manifests.PROFILE_KEY, CONTROLLER),
}
NEEDED_AT = {"new-pool-ready": ("agent", "controller"), "switch-admissions": ("webhook",)}


def judge(step: str, spec: TransitionSpec, configmaps: dict[str, dict[str, Any] | None],
          agent_daemonsets: list[str], namespace: str) -> StepResult | None:
    """A blocking verdict when a component needed at ``step`` holds the wrong profile; None when all are right."""
    problems: list[str] = []
    for comp in NEEDED_AT.get(step, ()):
        cm = configmaps.get(comp)
        name, key, directory = CONFIGMAPS[comp]
        where = f"ConfigMap {namespace}/{name}"
        if cm is None:
            continue
        text = (cm.get("data") or {}).get(key)
        if not text:
            problems.append(f"the {comp}'s {where} holds no {key}")
            continue
        try:
            held = loads_profile(text)
        except ProfileError as exc:
            problems.append(f"the {comp}'s {where} holds a profile that does not load ({exc})")
            continue
        if comp == "webhook":
            fix = f"apply {directory} rendered from the --to profile (fabricguard render install)"
        else:
            # Not the --to profile alone: the controller would stop validating the old pool (and the agents
            # stop checking its nodes) while its workloads still run and are admitted.
            fix = (f"apply {directory} rendered from a profile with both pools, {spec.old.name} and "
                   f"{spec.new.name} (as examples/transitions/gke-both-blocks.yaml; examples/transitions/README.md), "
                   "not from the --to profile alone")
        if comp == "webhook":
            if held.model_dump() != spec.target.model_dump():
                problems.append(f"the webhook's {where} is not the --to profile: it would keep injecting "
                                f"{spec.old.name}'s selector and resources into workloads admitted on "
                                f"{spec.new.name}; {fix}")
        elif spec.new.name not in held.pool_names:
            problems.append(f"the {comp}'s {where} has no pool {spec.new.name}; {fix}")
    if step == "new-pool-ready" and configmaps.get("agent") is not None:
        ds = f"{agent_render.NAME}-{spec.new.name}"
        if ds not in agent_daemonsets:
            problems.append(f"no agent DaemonSet {namespace}/{ds} for the new pool; apply {AGENT} rendered from "
                            "the --to profile")
    if problems:
        return StepResult("blocked", "; ".join(problems))
    return None
