"""``verify-job --objects``: the job's pods and ResourceClaims, saved with kubectl, join its verdict as they do
the controller's (issue 27 item 6). The objects are the API server's lists (``PodList`` and
``ResourceClaimList`` items carry no ``kind``; tests/dra_objects.py writes them as stored); the logs are
examples/jobs/rdma-healthy, a pass on the gke-a4-dranet pool on their own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from dra_objects import ROOT
from dra_objects import claim as _claim
from dra_objects import pod as _pod
from fabricguard.cli import app

JOB = ROOT / "examples" / "jobs" / "rdma-healthy"
PROFILE = ROOT / "examples" / "profiles" / "gke-a4-dranet.yaml"


def _list(kind: str, api: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    stored = [{k: v for k, v in i.items() if k not in ("kind", "apiVersion")} for i in items]
    return {"kind": f"{kind}List", "apiVersion": api, "metadata": {"resourceVersion": "4711"}, "items": stored}


def _run(tmp_path: Path, pods: list[dict[str, Any]], claims: list[dict[str, Any]], *extra: str) -> Any:
    (tmp_path / "pods.json").write_text(json.dumps(_list("Pod", "v1", pods)))
    (tmp_path / "claims.json").write_text(json.dumps(_list("ResourceClaim", "resource.k8s.io/v1", claims)))
    return CliRunner().invoke(app, ["verify-job", str(JOB), "-p", str(PROFILE), "--pool", "b200-dranet",
                                    "--objects", str(tmp_path / "pods.json"), "--objects",
                                    str(tmp_path / "claims.json"), "--format", "json", *extra])


def _claims_reasons(r: Any) -> list[dict[str, Any]]:
    doc = json.loads(r.stdout)
    return [x for x in doc["reasons"] if x["check"] == "fabric-claims"]


def test_healthy_claims_keep_the_pass_and_name_the_path(tmp_path: Path) -> None:
    r = _run(tmp_path, [_pod("llm-0", "c0")], [_claim("c0", "llm-0")])
    assert r.exit_code == 0, r.output
    [info] = _claims_reasons(r)
    assert info["level"] == "info" and "llm-0: eth1 10.10.0.5/24" in info["message"]


def test_an_unhealthy_nic_degrades_the_job_as_in_the_controller(tmp_path: Path) -> None:
    r = _run(tmp_path, [_pod("llm-0", "c0", health="Unhealthy"), _pod("llm-1", "c1")],
             [_claim("c0", "llm-0"), _claim("c1", "llm-1", ready="False")])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "degraded" and doc["bound"] == "fabric"
    bad = [x for x in _claims_reasons(r) if x["level"] == "degraded"]
    assert bad and "llm-1: claim c1" in bad[0]["message"] and "eth1 has no carrier" in bad[0]["message"]
    assert "llm-0" in bad[0]["message"]


def test_a_claim_never_allocated_to_a_pod_that_never_ran_degrades(tmp_path: Path) -> None:
    r = _run(tmp_path, [_pod("llm-0", "c0"), _pod("llm-1", "c1", ran=False)],
             [_claim("c0", "llm-0"), _claim("c1", "llm-1", allocated=False)])
    assert r.exit_code == 1 and "never allocated" in r.stdout


def test_objects_that_cannot_be_used_are_one_line_naming_the_file(tmp_path: Path) -> None:
    r = _run(tmp_path, [], [_claim("c0", "llm-0")])
    assert r.exit_code == 3 and "--objects" in r.output and "pods.json: no Pod in it" in r.output
    bad = tmp_path / "broken.json"
    bad.write_text('{"kind": "PodList",\n "items": [}')
    r = CliRunner().invoke(app, ["verify-job", str(JOB), "-p", str(PROFILE), "--pool", "b200-dranet",
                                 "--objects", str(bad)])
    assert r.exit_code == 3 and f"{bad}:2: invalid JSON" in r.output and "Traceback" not in r.output
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    r = CliRunner().invoke(app, ["verify-job", str(JOB), "-p", str(PROFILE), "--pool", "b200-dranet",
                                 "--objects", str(deep)])
    assert r.exit_code == 3 and "nested too deeply" in r.output


async def test_verify_job_reads_the_pods_and_claims_from_the_cluster(tmp_path: Path) -> None:
    """``--job NS/NAME``: the same objects listed live (pods by the webhook's label, the namespace's claims),
    through the test API server over real HTTP; only what the permission table declares is asked."""
    import asyncio

    from kmock import Server

    from kube_support import Emulator, kubeconfig

    async with Emulator() as k8s, Server(k8s) as server:
        k8s["get /version/"] << {"major": "1", "minor": "33", "gitVersion": "v1.33.1", "platform": "linux/amd64"}
        for p in (_pod("llm-0", "c0"), _pod("llm-1", "c1")):
            k8s.objects["v1/pods", "team-a", p["metadata"]["name"]] = {
                k: v for k, v in p.items() if k not in ("kind", "apiVersion")}
        other = _pod("other-0", "c9")
        other["metadata"]["labels"]["fabricguard.io/job"] = "other"  # another job's pod: not this job's
        k8s.objects["v1/pods", "team-a", "other-0"] = other
        for c in (_claim("c0", "llm-0"), _claim("c1", "llm-1", ready="False")):
            k8s.objects["resource.k8s.io/v1/resourceclaims", "team-a", c["metadata"]["name"]] = c
        kc = kubeconfig(tmp_path, str(server.url).rstrip("/"))
        args = ["verify-job", str(JOB), "-p", str(PROFILE), "--pool", "b200-dranet", "--job", "team-a/llm",
                "--kubeconfig", kc, "--format", "json"]
        r = await asyncio.to_thread(CliRunner().invoke, app, args)
        assert r.exit_code == 1, r.output
        bad = [x for x in _claims_reasons(r) if x["level"] == "degraded"]
        assert bad and "llm-1: claim c1" in bad[0]["message"] and "other-0" not in r.stdout
        gone = await asyncio.to_thread(CliRunner().invoke, app, [*args[:-2], "--job", "team-a/finished-long-ago"])
        assert gone.exit_code == 3 and "no pod labelled fabricguard.io/job=finished-long-ago" in gone.output
    bad_arg = CliRunner().invoke(app, ["verify-job", str(JOB), "-p", str(PROFILE), "--job", "llm"])
    assert bad_arg.exit_code == 3 and "--job 'llm': use NAMESPACE/NAME" in bad_arg.output
