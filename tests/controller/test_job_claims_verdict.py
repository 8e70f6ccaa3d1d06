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
    ann = _verdict(tmp_path, [_pod("llm-0", "c0"), _pod("llm-1", "c1")],
                   [_claim("c0", "llm-0"), _claim("c1", "llm-1", allocated=False)])
    assert ann["fabricguard.io/verdict"] == "degraded"
    assert "never allocated" in ann["fabricguard.io/verdict-detail"]


def test_an_unhealthy_nic_degrades_it(tmp_path: Path) -> None:
    ann = _verdict(tmp_path, [_pod("llm-0", "c0", health="Unhealthy")], [_claim("c0", "llm-0")])
    assert ann["fabricguard.io/verdict"] == "degraded"
    assert "unhealthy" in ann["fabricguard.io/verdict-detail"]
