"""Leader election on a coordination.k8s.io/v1 Lease, against kmock's emulator over real HTTP."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from controller_support import CANARY_IMAGE, NOW, NS, canaries, live

from fabricguard.controller.kube import controller_permissions
from fabricguard.controller.lease import Step, decide, try_lead
from fabricguard.kube import Kube


def test_decide_follows_client_go_rules() -> None:
    held = {"spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": "2025-09-30T12:00:00.000000Z"}}
    assert decide(None, "a", NOW) is Step.create
    assert decide(held, "a", NOW + timedelta(seconds=60)) is Step.renew
    assert decide(held, "b", NOW + timedelta(seconds=15)) is Step.follow  # not yet expired
    assert decide(held, "b", NOW + timedelta(seconds=16)) is Step.takeover
    assert decide({"spec": {"holderIdentity": ""}}, "b", NOW) is Step.takeover  # released


async def test_two_controllers_one_leads(cluster) -> None:
    k8s, kc = cluster
    api = await Kube.connect(kc, permissions=controller_permissions(NS))
    assert await try_lead(api, NS, "replica-a", NOW) is True
    assert await try_lead(api, NS, "replica-b", NOW + timedelta(seconds=1)) is False
    assert await try_lead(api, NS, "replica-a", NOW + timedelta(seconds=5)) is True  # renews
    assert await try_lead(api, NS, "replica-b", NOW + timedelta(seconds=19)) is False  # a renewed at +5
    # a stops renewing (crashed): b takes over once the lease has expired, and a then follows.
    assert await try_lead(api, NS, "replica-b", NOW + timedelta(seconds=21)) is True
    assert await try_lead(api, NS, "replica-a", NOW + timedelta(seconds=22)) is False
    (lease,) = live(k8s, "coordination.k8s.io/v1/leases")
    assert lease["spec"]["holderIdentity"] == "replica-b" and lease["spec"]["leaseTransitions"] == 1
    # Both writes after the create (a renews, b takes over) carry the resourceVersion they read.
    patches = [r for r in list(k8s) if r.method.value.upper() == "PATCH" and "/leases/" in r.url.path]
    assert len(patches) == 2 and all(r.data["metadata"]["resourceVersion"] for r in patches)


async def test_two_running_controllers_start_one_canary(cluster, profile_path, lustre) -> None:
    """Two full control loops on one cluster: one holds the Lease and acts; the other only waits."""
    from fabricguard.controller.metrics import Metrics
    from fabricguard.controller.runner import RunConfig, run_forever
    from fabricguard.profile import load_profile

    k8s, kc = cluster
    profile = load_profile(profile_path)
    stop = asyncio.Event()
    metrics = [Metrics(), Metrics()]
    loops = [asyncio.create_task(run_forever(
        RunConfig(profile, image=CANARY_IMAGE, kubeconfig=kc, lustre_root=lustre, identity=f"replica-{i}", resync_s=0.5,
                  lease_s=3, min_gap_s=0.5),
        metrics[i], stop)) for i in range(2)]
    await asyncio.sleep(4)
    stop.set()
    await asyncio.gather(*loops)
    leaders = [m.leader._value.get() for m in metrics]
    assert sorted(leaders) == [0, 1]
    assert len(canaries(k8s)) == 1
    assert sum(1 for r in list(k8s) if r.method.value.upper() == "POST" and r.url.path.endswith("/jobsets")) == 1
    passes = [m.last_pass._value.get() for m in metrics]
    assert (passes[0] > 0) != (passes[1] > 0)  # only the leader ever ran a pass
