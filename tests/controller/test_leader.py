"""Leader election on a coordination.k8s.io/v1 Lease, against kmock's emulator over real HTTP."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

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


def test_leadership_is_active_only_while_leading_and_inside_its_window() -> None:
    import time

    from fabricguard.controller.runner import Leadership

    who = Leadership()
    assert not who.active()
    who.leading, who.valid_until = True, time.monotonic() + 5
    assert who.active()
    who.valid_until = time.monotonic() - 0.001  # the window passed without a renewal: act on nothing
    assert not who.active()
    who.leading, who.valid_until = False, time.monotonic() + 5
    assert not who.active()


async def _one_round(monkeypatch, answer) -> tuple[float, float, float, Any]:  # type: ignore[no-untyped-def]
    """Run keep_lease for one election round whose request takes 0.2 s; (before, request start, after, who)."""
    import time
    from types import SimpleNamespace

    from fabricguard.controller import runner
    from fabricguard.controller.metrics import Metrics

    stop = asyncio.Event()
    seen: dict[str, float] = {}

    class FakeElector:
        held = None

        def __init__(self, *args: Any) -> None:
            pass

        async def round(self, now, duration_s):  # type: ignore[no-untyped-def]
            seen["start"] = time.monotonic()
            await asyncio.sleep(0.2)
            stop.set()
            if isinstance(answer, Exception):
                raise answer
            return answer

    monkeypatch.setattr(runner, "Elector", FakeElector)
    who, metrics = runner.Leadership(), Metrics()
    before = time.monotonic()
    kube = SimpleNamespace(latency=SimpleNamespace(worst=0.0))  # fast requests: the configured 3 s lease
    await runner.keep_lease(kube, SimpleNamespace(namespace=NS, lease_s=3), "me", who, metrics, stop)
    return before, seen["start"], time.monotonic(), (who, metrics)


async def test_a_won_round_counts_two_thirds_of_the_lease_from_before_the_request(monkeypatch) -> None:
    """The holder must stop acting before a follower may take over: the window starts when the renewal was
    sent (not when it was answered) and lasts two thirds of the lease, so a slow API server shortens it."""
    before, start, after, (who, metrics) = await _one_round(monkeypatch, True)
    assert who.leading and metrics.leader._value.get() == 1
    assert before + 2.0 <= who.valid_until <= start + 2.0 + 1e-6  # 3 s * 2/3, from before the 0.2 s request
    assert who.valid_until < after + 2.0 - 0.15


async def test_a_lost_or_failed_round_leads_nothing(monkeypatch) -> None:
    for answer in (False, RuntimeError("connection refused")):
        _, _, _, (who, metrics) = await _one_round(monkeypatch, answer)
        assert not who.leading and who.valid_until == 0.0 and not who.active()
        assert metrics.leader._value.get() == 0
