"""Leader election on a coordination.k8s.io/v1 Lease, against kmock's emulator over real HTTP."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from controller_support import CANARY_IMAGE, NOW, NS, canaries, live

from fabricguard.controller.kube import controller_permissions
from fabricguard.controller.lease import Elector, Step, decide, decide_observed
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
    a, b = Elector(api, NS, "replica-a"), Elector(api, NS, "replica-b")
    assert await a.round(NOW, 15, mono=0.0) is True
    assert await b.round(NOW + timedelta(seconds=1), 15, mono=1.0) is False
    assert await a.round(NOW + timedelta(seconds=5), 15, mono=5.0) is True  # renews (one request)
    assert await b.round(NOW + timedelta(seconds=19), 15, mono=19.0) is False  # b saw a's renewal at 19 s
    # a stops renewing (crashed): b takes over a full lease after it last saw the record change, and a follows.
    assert await b.round(NOW + timedelta(seconds=33), 15, mono=33.0) is False  # 14 s since b saw it change
    assert await b.round(NOW + timedelta(seconds=35), 15, mono=35.0) is True
    assert await a.round(NOW + timedelta(seconds=36), 15, mono=36.0) is False
    (lease,) = live(k8s, "coordination.k8s.io/v1/leases")
    assert lease["spec"]["holderIdentity"] == "replica-b" and lease["spec"]["leaseTransitions"] == 1
    # Every write after the create carries the resourceVersion it read: a renews, b takes over, and a's renewal
    # at 36 s (one request, with the version a last wrote) is refused with 409, so a reads and follows.
    patches = [r for r in list(k8s) if r.method.value.upper() == "PATCH" and "/leases/" in r.url.path]
    assert len(patches) == 3 and all(r.data["metadata"]["resourceVersion"] for r in patches)
    await api.close()


async def test_a_follower_whose_clock_runs_ahead_never_takes_over_a_live_holder(cluster) -> None:
    """Two electors whose wall clocks disagree by 40 s, more than a third of the 15 s lease (and more than the
    whole lease): the follower judges expiry by when it saw the Lease change on its own monotonic clock, so
    while the holder renews every 5 s the follower never takes over; once the holder stops, it takes over after
    one lease duration of its own time, whatever the holder wrote."""
    k8s, kc = cluster
    api = await Kube.connect(kc, permissions=controller_permissions(NS))
    a, b = Elector(api, NS, "replica-a"), Elector(api, NS, "replica-b")
    ahead = timedelta(seconds=40)
    for t in range(0, 61, 5):
        assert await a.round(NOW + timedelta(seconds=t), 15, mono=1000.0 + t) is True
        assert await b.round(NOW + ahead + timedelta(seconds=t + 1), 15, mono=50.0 + t + 1) is False, t
    # The old rule (renewTime + duration against the follower's own wall clock) would have taken over here:
    (lease,) = live(k8s, "coordination.k8s.io/v1/leases")
    assert decide(lease, "replica-b", NOW + ahead + timedelta(seconds=61)) is Step.takeover
    # a stops; b's last sight of a change was at mono 111 (a's renewal at t=60): it waits a full lease.
    assert await b.round(NOW + ahead + timedelta(seconds=75), 15, mono=125.0) is False
    assert await b.round(NOW + ahead + timedelta(seconds=77), 15, mono=127.0) is True
    # A follower whose clock runs behind takes over no sooner than its own lease either (never early).
    c = Elector(api, NS, "replica-c")
    assert await c.round(NOW - ahead, 15, mono=0.0) is False
    assert await c.round(NOW - ahead + timedelta(seconds=100), 15, mono=14.0) is False
    await api.close()


def test_decide_observed_reads_no_written_time() -> None:
    held = {"spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": "1999-01-01T00:00:00.000000Z"},
            "metadata": {"resourceVersion": "7"}}
    assert decide_observed(held, "b", observed_at=100.0, mono_now=114.0) is Step.follow
    assert decide_observed(held, "b", observed_at=100.0, mono_now=115.5) is Step.takeover
    assert decide_observed(held, "a", observed_at=0.0, mono_now=1e9) is Step.renew
    assert decide_observed({"spec": {"holderIdentity": ""}}, "b", 100.0, 100.0) is Step.takeover
    assert decide_observed(None, "b", 0.0, 0.0) is Step.create


async def test_a_replica_that_loses_the_lease_mid_pass_writes_nothing_more(cluster) -> None:
    from fabricguard.controller.actions import Annotate
    from fabricguard.controller.kube import apply_actions

    k8s, kc = cluster
    api = await Kube.connect(kc, permissions=controller_permissions(NS))
    for i in range(3):
        k8s.objects["jobset.x-k8s.io/v1alpha2/jobsets", "ml", f"j{i}"] = {
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": f"j{i}", "namespace": "ml"}}
    asked: list[int] = []

    def leading() -> bool:  # the Lease is lost after the first write
        asked.append(1)
        return len(asked) == 1

    acts = [Annotate("jobset.x-k8s.io/v1alpha2", "jobsets", "ml", f"j{i}", {"fabricguard.io/verdict": "pass"})
            for i in range(3)]
    errors = await apply_actions(api, acts, {}, leading)
    patched = [r for r in list(k8s) if r.method.value.upper() == "PATCH" and "/jobsets/" in r.url.path]
    assert [r.url.path.rsplit("/", 1)[-1] for r in patched] == ["j0"]
    assert errors == ["lost the Lease: 2 action(s) left to the new leader"]
    assert len(asked) == 2  # asked before each write, and the first refusal stops the pass
    await api.close()


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
                  lease_s=10, min_gap_s=0.5),
        metrics[i], stop)) for i in range(2)]
    # Wait for the leader's canary rather than a fixed time (a loaded CI machine makes election rounds slow), then
    # give the follower a few more resync periods in which it could wrongly act.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while not canaries(k8s) and loop.time() < deadline:
        await asyncio.sleep(0.1)
    await asyncio.sleep(2)
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
