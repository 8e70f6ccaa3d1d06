"""The canary JobSet: the pool's fabric exactly as the webhook injects it, two pods on two nodes, no Kueue hold."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import kubernetes_validate
import pytest
from controller_support import PROFILE

from fabricguard.admission.mutate import KUEUE_QUEUE, mutate_workload
from fabricguard.admission.workloads import locate
from fabricguard.controller.canary import render_canary, spec_for
from fabricguard.profile import load_profile, loads_profile

ROOT = Path(__file__).resolve().parents[2]
PROFILES = sorted((ROOT / "examples" / "profiles").glob("*.yaml"))
NOW = datetime(2025, 9, 30, 12, tzinfo=UTC)
OWNER = {"metadata": {"name": "p", "uid": "0b8e6c2a-1111-2222-3333-444455556666"}}


def _cases():
    for path in PROFILES:
        prof = load_profile(path)
        for pool in prof.spec.pools:
            if prof.canary(pool) is not None:
                yield pytest.param(prof, pool, id=f"{path.stem}-{pool.name}")


@pytest.mark.parametrize(("profile", "pool"), list(_cases()))
def test_canary_carries_the_webhooks_injection_and_validates(profile, pool) -> None:
    js = render_canary(profile, pool, spec_for(profile, pool, "fabricguard-system", NOW), image="img@sha256:" + "a" * 64,
                       owner=OWNER)
    # Running the webhook's own mutation over the canary changes nothing: it already has everything.
    again = mutate_workload(locate(js, "JobSet", "fabricguard-system"), profile, pool)
    assert (again.allowed and again.patch == []) or all(p["path"].endswith(KUEUE_QUEUE.replace("/", "~1"))
                                                      for p in again.patch)
    (rj,) = js["spec"]["replicatedJobs"]
    job = rj["template"]["spec"]
    pod = job["template"]["spec"]
    (c,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    for name, qty in pool.fabric.resources.items():
        assert c["resources"]["requests"][name] == c["resources"]["limits"][name] == str(qty)
    assert env["NCCL_NET"] == pool.fabric.effective_nccl_net
    assert env["NCCL_DEBUG"] == "INFO" and env["NCCL_DEBUG_FILE"].endswith("/%h.%p")
    assert job["parallelism"] == job["completions"] == 2 and job["completionMode"] == "Indexed"
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    assert js["spec"]["network"]["enableDNSHostnames"] is True
    assert js["spec"]["failurePolicy"]["maxRestarts"] == 0 and js["spec"]["ttlSecondsAfterFinished"] > 0
    assert pod["priorityClassName"] == "fabricguard-canary" and pod["restartPolicy"] == "Never"
    assert js["metadata"]["ownerReferences"][0]["kind"] == "FabricValidation"
    assert KUEUE_QUEUE not in js["metadata"]["labels"]  # never held by the check it feeds
    assert pod["nodeSelector"] == pool.nodeSelector
    # Pods of 63-character DNS names: <jobset>-workers-0-1.
    assert len(f"{js['metadata']['name']}-workers-0-1") <= 63
    kubernetes_validate.validate({"apiVersion": "batch/v1", "kind": "Job",
                                  "metadata": {"name": "x", "namespace": "fabricguard-system"}, "spec": job},
                                 kubernetes_validate.latest_version(), strict=True)


def test_canary_queue_replaces_the_pools_queue() -> None:
    prof = loads_profile(PROFILE.replace("runTimeout: 15m}", "runTimeout: 15m, queue: fabric-canaries}"))
    pool = prof.pool()
    js = render_canary(prof, pool, spec_for(prof, pool, "fg", NOW), image="img:1", owner=None)
    assert js["metadata"]["labels"][KUEUE_QUEUE] == "fabric-canaries"


def test_profile_check_validates_the_canary_block(tmp_path) -> None:
    from typer.testing import CliRunner

    from fabricguard.cli import app

    bad = PROFILE.replace("canary: {interval: 10m, pendingTimeout: 3m, runTimeout: 15m}",
                          "canary: {interval: 10, pendingTimeout: 20m, nodes: 1, gpusPerPod: 4}")
    p = tmp_path / "p.yaml"
    p.write_text(bad)
    r = CliRunner().invoke(app, ["profile", "check", str(p)])
    assert r.exit_code == 3, r.output
    assert "canary.interval" in r.output and "canary.nodes" in r.output
    no_lustre = PROFILE.replace("  storage:\n    lustre: {claimName: training-lustre, mountPath: /mnt/lustre}\n", "")
    p.write_text(no_lustre)
    r = CliRunner().invoke(app, ["profile", "check", str(p)])
    assert r.exit_code == 3 and "canary.enabled needs the pool's Lustre" in r.output
    p.write_text(PROFILE.replace("runTimeout: 15m}", "runTimeout: 15m, pendingTimeout: 10m}"))
    r = CliRunner().invoke(app, ["profile", "check", str(p)])
    assert r.exit_code == 3


def test_default_canary_only_on_fabric_pools_with_lustre() -> None:
    prof = load_profile(ROOT / "examples/profiles/aws-p5-efa.yaml")
    assert prof.canary(prof.pool("p5-efa")) is not None
    assert prof.canary(prof.pool("g6-single")) is None
    c = prof.canary(prof.pool("p5-efa"))
    assert c.interval_s == 600 and c.nodes == 2
