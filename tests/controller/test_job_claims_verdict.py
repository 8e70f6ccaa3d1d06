"""A finished job on a DRA pool: its pods' fabric claims join the verdict its logs earned (issue 27, item 6).

The logs are examples/jobs/rdma-healthy (a pass on the gke-a4-dranet pool on their own); the pods and
ResourceClaims are written as the API server stores them (tests/dra_objects.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from controller_support import NOW

from dra_objects import PROFILE, ROOT
from dra_objects import claim as _claim
from dra_objects import pod as _pod
from fabricguard.controller.actions import Annotate, Counters
from fabricguard.controller.jobs import judge_jobs
from fabricguard.controller.lustre import LustreFacts, load_jobs


def _verdict(tmp_path: Path, pods: list[dict], claims: list[dict]) -> dict[str, str]:
    d = tmp_path / "team-a" / "llm" / ".fabricguard" / "nccl"
    shutil.copytree(ROOT / "examples" / "jobs" / "rdma-healthy", d)
    js = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
          "metadata": {"name": "llm", "namespace": "team-a", "uid": "uid-llm",
                       "labels": {"fabricguard.io/managed": "true", "fabricguard.io/pool": "b200-dranet"}},
          "spec": {"replicatedJobs": []},
          "status": {"conditions": [{"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
                                     "lastTransitionTime": "2026-12-01T11:50:00Z"}]}}
    facts = LustreFacts(tmp_path)
    by_kind = {"JobSet": [js], "Pod": pods, "ResourceClaim": claims}
    load_jobs(facts, PROFILE, by_kind)
    actions = judge_jobs(PROFILE, by_kind, facts, NOW, Counters())
    (ann,) = [a for a in actions if isinstance(a, Annotate)]
    return ann.annotations


def test_healthy_claims_keep_the_pass(tmp_path: Path) -> None:
    ann = _verdict(tmp_path, [_pod("llm-0", "c0")], [_claim("c0", "llm-0")])
    assert ann["fabricguard.io/verdict"] == "pass", ann


def test_an_unallocated_fabric_claim_degrades_a_job_whose_logs_pass(tmp_path: Path) -> None:
    ann = _verdict(tmp_path, [_pod("llm-0", "c0"), _pod("llm-1", "c1", ran=False)],
                   [_claim("c0", "llm-0"), _claim("c1", "llm-1", allocated=False)])
    assert ann["fabricguard.io/verdict"] == "degraded"
    assert "never allocated" in ann["fabricguard.io/verdict-detail"]


def test_an_unhealthy_nic_degrades_it(tmp_path: Path) -> None:
    ann = _verdict(tmp_path, [_pod("llm-0", "c0", health="Unhealthy")], [_claim("c0", "llm-0")])
    assert ann["fabricguard.io/verdict"] == "degraded"
    assert "unhealthy" in ann["fabricguard.io/verdict-detail"]


def test_claims_released_after_the_pods_finished_keep_the_pass(tmp_path: Path) -> None:
    ann = _verdict(tmp_path, [_pod("llm-0", "c0"), _pod("llm-1", "c1")], [_claim("c1", "llm-1", allocated=False)])
    assert ann["fabricguard.io/verdict"] == "pass", ann


async def test_the_cache_keeps_a_finished_jobs_pods_for_its_verdict(cluster, profile_path, tmp_path: Path) -> None:
    """A job's pods leave the running-pods watch when they succeed; the managed jobs' Succeeded pods are read
    on their own, trimmed to the claims and the kubelet's device health, so the verdict still sees them."""
    import asyncio

    from controller_support import CANARY_IMAGE, admin_kubeconfig
    from controller_support import NS as CONTROLLER_NS

    from fabricguard.controller.kube import Cache
    from fabricguard.controller.runner import RunConfig, connect
    from fabricguard.profile import load_profile

    k8s, kc = cluster
    running = _pod("llm-0", "c0", health="Unhealthy")
    running["status"]["phase"] = "Running"
    k8s.objects["v1/pods", "team-a", "llm-0"] = running
    cfg = RunConfig(load_profile(profile_path), image=CANARY_IMAGE, kubeconfig=kc, identity="solo")
    cache = Cache(await connect(cfg), cfg.profile, CONTROLLER_NS)
    wake, stop = asyncio.Event(), asyncio.Event()
    cache.start(wake, stop)

    def held() -> list[dict]:
        return [p for p in cache.snapshot().kind("Pod") if p["metadata"]["name"] == "llm-0"]

    async def until(cond, seconds: float = 15.0) -> None:  # type: ignore[no-untyped-def]
        for _ in range(int(seconds / 0.05)):
            if cond():
                return
            await asyncio.sleep(0.05)
        raise AssertionError("timed out waiting")

    try:
        await until(lambda: cache.synced and len(held()) == 1)
        # The kubelet reports the pod done: a status patch through the API, streamed to the pods' watches.
        import json

        import kr8s.asyncio

        api = await kr8s.asyncio.api(kubeconfig=admin_kubeconfig(kc))
        async with api.call_api("PATCH", version="v1", namespace="team-a", url="pods/llm-0/status",
                                headers={"Content-Type": "application/merge-patch+json"},
                                content=json.dumps({"status": {"phase": "Succeeded"}})):
            pass
        await until(lambda: [p["status"].get("phase") for p in held()] == ["Succeeded"])
        [pod] = held()
        # Only what a verdict reads of a finished pod stays.
        assert pod["status"]["resourceClaimStatuses"] == [{"name": "fabric", "resourceClaimName": "c0"}]
        assert pod["status"]["containerStatuses"][0]["allocatedResourcesStatus"][0]["resources"][0][
            "health"] == "Unhealthy"
        assert "containers" not in pod["spec"] and pod["spec"]["resourceClaims"]
        ann = _verdict(tmp_path, [pod], [])
        assert ann["fabricguard.io/verdict"] == "degraded" and "unhealthy" in ann["fabricguard.io/verdict-detail"]
    finally:
        stop.set()
        await cache.close()
