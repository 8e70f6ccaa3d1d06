"""On DRA pools a job's verdict reads its pods' ResourceClaims and the kubelet's device health (issue 27, item 6).

Objects are written as the API server stores them (``resource.k8s.io/v1``): a claim generated from the pool's
template, named in the pod's ``status.resourceClaimStatuses``, ``status.allocation.devices.results``, the
driver's ``status.devices[]`` with ``conditions`` and ``networkData`` (KEP-4817), and the pod's
``containerStatuses[].allocatedResourcesStatus`` (KEP-4680).
"""

from __future__ import annotations

import copy
from typing import Any

from dra_objects import POOL, ROOT
from dra_objects import claim as _claim
from dra_objects import pod as _pod
from fabricguard.profile import load_profile
from fabricguard.verdict.claims import claim_findings


def _index(claims: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in claims}


def test_allocated_healthy_claims_list_the_path_each_pod_got() -> None:
    pods = [_pod("llm-0", "llm-0-fabric-x1"), _pod("llm-1", "llm-1-fabric-x2")]
    found = claim_findings(POOL, pods, _index([_claim("llm-0-fabric-x1", "llm-0"), _claim("llm-1-fabric-x2", "llm-1")]))
    assert [f.level for f in found] == ["info"]
    assert "llm-0: eth1 10.10.0.5/24" in found[0].message


def test_a_claim_never_allocated_degrades_the_job() -> None:
    # llm-1 never ran: the kubelet refused it because its claim was not allocated.
    pods = [_pod("llm-0", "llm-0-fabric-x1"), _pod("llm-1", "llm-1-fabric-x2", ran=False)]
    found = claim_findings(POOL, pods, _index([_claim("llm-0-fabric-x1", "llm-0"),
                                              _claim("llm-1-fabric-x2", "llm-1", allocated=False)]))
    bad = [f for f in found if f.level == "degraded"]
    assert len(bad) == 1 and "never allocated" in bad[0].message and "llm-1 (llm-1-fabric-x2)" in bad[0].message


def test_a_device_the_driver_reports_not_ready_is_unhealthy() -> None:
    pods = [_pod("llm-0", "llm-0-fabric-x1")]
    found = claim_findings(POOL, pods, _index([_claim("llm-0-fabric-x1", "llm-0", ready="False")]))
    bad = [f for f in found if f.level == "degraded"]
    assert bad and "eth1 has no carrier" in bad[0].message and "dra.net/gke-a4-0/eth1" in bad[0].message


def test_kubelet_allocated_resources_status_unhealthy() -> None:
    pods = [_pod("llm-0", "llm-0-fabric-x1", health="Unhealthy")]
    found = claim_findings(POOL, pods, _index([_claim("llm-0-fabric-x1", "llm-0")]))
    bad = [f for f in found if f.level == "degraded"]
    assert bad and "claim:fabric/nic dra.net/gke-a4-0/eth1" in bad[0].message
    healthy = claim_findings(POOL, [_pod("llm-0", "llm-0-fabric-x1", health="Healthy")],
                             _index([_claim("llm-0-fabric-x1", "llm-0")]))
    assert not [f for f in healthy if f.level == "degraded"]


def test_a_claim_that_is_gone_is_a_warning_not_a_pass_or_a_failure() -> None:
    found = claim_findings(POOL, [_pod("llm-0", "llm-0-fabric-x1", ran=False)], {})
    assert [f.level for f in found] == ["warning"]


def test_a_finished_pods_released_claim_is_said_not_held_against_the_job() -> None:
    # Once a pod is done, the DRA controller deallocates its claims and deletes the generated ones: a finished
    # job's claims are gone or unallocated by the time it is judged, and that is no fault of the fabric.
    pods = [_pod("llm-0", "llm-0-fabric-x1"), _pod("llm-1", "llm-1-fabric-x2")]
    found = claim_findings(POOL, pods, _index([_claim("llm-1-fabric-x2", "llm-1", allocated=False)]))
    assert [f.level for f in found] == ["info"]
    assert "released when their pods finished" in found[0].message
    assert "llm-0/llm-0-fabric-x1" in found[0].message and "llm-1/llm-1-fabric-x2" in found[0].message
    # A pod that failed after its container ran released its claim too; one refused at admission did not run.
    failed = _pod("llm-2", "llm-2-fabric-x3")
    failed["status"]["phase"] = "Failed"
    assert [f.level for f in claim_findings(POOL, [failed], {})] == ["info"]


def test_a_claim_of_another_device_class_is_not_the_fabric() -> None:
    pod = _pod("llm-0", "gpus")
    pod["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimName": "gpus"}]
    other = _claim("gpus", "llm-0", allocated=False)
    other = copy.deepcopy(other)
    other["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "gpu.nvidia.com"
    assert claim_findings(POOL, [pod], _index([other])) == []


def test_pools_without_dra_read_nothing() -> None:
    pool = load_profile(ROOT / "examples" / "profiles" / "onprem-infiniband.yaml").pool(None)
    assert claim_findings(pool, [_pod("llm-0", "x")], {}) == []
