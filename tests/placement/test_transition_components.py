"""``pool transition`` checks each component's profile at the step where it must have changed (kmock, real HTTP):
the agent and the controller must know the new pool before ``new-pool-ready``, the webhook must hold the target
profile before ``switch-admissions``; a component still on the old profile blocks the step, naming what to apply."""

from __future__ import annotations

from pathlib import Path

import pytest
from kmock import KubernetesEmulator, Server

from fabricguard.agent import render as agent_render
from fabricguard.placement import components
from fabricguard.placement.workflow import transition_roles
from kube_support import Emulator, Rbac, kubeconfig

from .test_transition import FROM, NS, TO, _apply, _spec, seed


def configmaps(k8s: KubernetesEmulator, *, agent: Path, controller: Path, webhook: Path) -> None:
    for comp, path in (("agent", agent), ("controller", controller), ("webhook", webhook)):
        name, key, _dir = components.CONFIGMAPS[comp]
        k8s.objects["v1/configmaps", NS, name] = {"metadata": {"name": name, "namespace": NS},
                                                  "data": {key: path.read_text()}}


def agent_daemonsets(k8s: KubernetesEmulator, profile_path: Path) -> None:
    from fabricguard.profile import load_profile

    for pool in load_profile(profile_path).spec.pools:
        name = f"{agent_render.NAME}-{pool.name}"
        k8s.objects["apps/v1/daemonsets", NS, name] = {"metadata": {"name": name, "namespace": NS}}


@pytest.fixture()
async def cluster(tmp_path: Path):
    # The rendered transition roles (render transition-rbac) enforced on every request, as in test_transition.
    rbac = Rbac().bind("platform-operator", transition_roles(NS))
    async with Emulator(rbac=rbac, tokens={"t": {"username": "platform-operator"}}) as k8s, Server(k8s) as server:
        yield k8s, kubeconfig(tmp_path, str(server.url).rstrip("/"))


async def test_an_agent_on_the_old_profile_blocks_new_pool_ready(cluster) -> None:
    k8s, cfg = cluster
    seed(k8s)
    configmaps(k8s, agent=FROM, controller=TO, webhook=FROM)
    agent_daemonsets(k8s, FROM)
    out = await _apply(cfg)
    assert out.state.phase == "Blocked"
    msg = out.state.message
    new = _spec().new.name
    assert f"has no pool {new}" in msg and "30-agent" in msg and f"fabricguard-agent-{new}" in msg
    assert "controller" not in msg  # the controller already holds the target profile


async def test_a_webhook_on_the_old_profile_blocks_the_switch_and_the_queue_is_untouched(cluster) -> None:
    k8s, cfg = cluster
    seed(k8s)
    configmaps(k8s, agent=TO, controller=TO, webhook=FROM)
    agent_daemonsets(k8s, TO)
    before = k8s.objects["kueue.x-k8s.io/v1beta2/clusterqueues", None, "h200"].raw["spec"]
    out = await _apply(cfg)
    assert out.state.step("new-pool-ready").done
    msg = out.state.message
    assert out.state.phase == "Blocked" and msg.startswith("switch-admissions:")
    assert "webhook" in msg and "20-admission" in msg
    assert k8s.objects["kueue.x-k8s.io/v1beta2/clusterqueues", None, "h200"].raw["spec"] == before

    configmaps(k8s, agent=TO, controller=TO, webhook=TO)  # the operator applies the new webhook profile
    out = await _apply(cfg)
    assert out.state.step("switch-admissions").done


async def test_agents_and_controller_on_the_two_pool_profile_pass_new_pool_ready(cluster) -> None:
    """The documented path (examples/transitions/README.md): agents and controller from gke-both-blocks.yaml keep
    the old pool checked and validated while the new one becomes ready; the blocked message points there, not at
    the --to profile alone (which would drop the old pool from the controller before admissions move)."""
    from fabricguard.profile import load_profile

    both = FROM.parent / "gke-both-blocks.yaml"
    names = load_profile(both).pool_names
    assert _spec().old.name in names and _spec().new.name in names
    k8s, cfg = cluster
    seed(k8s)
    configmaps(k8s, agent=FROM, controller=both, webhook=FROM)
    agent_daemonsets(k8s, FROM)
    out = await _apply(cfg)
    assert out.state.phase == "Blocked" and "gke-both-blocks.yaml" in out.state.message
    assert "not from the --to profile alone" in out.state.message
    configmaps(k8s, agent=both, controller=both, webhook=FROM)
    agent_daemonsets(k8s, both)
    out = await _apply(cfg)
    assert "has no pool" not in out.state.message, out.state.message
