"""Pods and ResourceClaims of a finished job on the gke-a4-dranet pool, as the API server stores them
(``resource.k8s.io/v1``; KEP-4817 device status with networkData, KEP-4680 allocatedResourcesStatus)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fabricguard.profile import load_profile

ROOT = Path(__file__).resolve().parents[1]
PROFILE = load_profile(ROOT / "examples" / "profiles" / "gke-a4-dranet.yaml")
POOL = PROFILE.pool("b200-dranet")
NS = "team-a"


def pod(name: str, claim: str, health: str | None = None, *, ran: bool = True) -> dict[str, Any]:
    """A pod of the job: ``ran`` (default) Succeeded after its container ran; otherwise Failed at the kubelet's
    admission (``UnexpectedAdmissionError``: no container ever started, as when its claim was never allocated)."""
    pod: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}",
                     "labels": {"fabricguard.io/job": "llm", "jobset.sigs.k8s.io/jobset-name": "llm"}},
        "spec": {"containers": [{"name": "trainer", "image": "img", "resources": {"limits": {"nvidia.com/gpu": "8"},
                                                                                  "claims": [{"name": "fabric"}]}}],
                 "resourceClaims": [{"name": "fabric", "resourceClaimTemplateName": POOL.claim_template_name}]},
        "status": {"phase": "Succeeded",
                   "resourceClaimStatuses": [{"name": "fabric", "resourceClaimName": claim}],
                   "containerStatuses": [{"name": "trainer", "ready": False, "restartCount": 0, "image": "img",
                                          "imageID": "", "started": False,
                                          "state": {"terminated": {
                                              "exitCode": 0, "reason": "Completed",
                                              "startedAt": "2026-12-01T10:00:05Z",
                                              "finishedAt": "2026-12-01T11:49:00Z"}}}]},
    }
    if not ran:
        pod["status"] = {"phase": "Failed", "reason": "UnexpectedAdmissionError",
                         "message": "Pod was rejected: failed to prepare dynamic resources",
                         "resourceClaimStatuses": pod["status"]["resourceClaimStatuses"]}
    if health is not None:
        pod["status"]["containerStatuses"][0]["allocatedResourcesStatus"] = [
            {"name": "claim:fabric/nic", "resources": [{"resourceID": "dra.net/gke-a4-0/eth1", "health": health}]}]
    return pod


def claim(name: str, pod: str, *, allocated: bool = True, ready: str = "True") -> dict[str, Any]:
    dev = {"driver": "dra.net", "pool": "gke-a4-0", "device": "eth1"}
    claim: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}", "resourceVersion": "4711",
                     "annotations": {"resource.kubernetes.io/pod-claim-name": "fabric"},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": f"uid-{pod}",
                                          "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"devices": {"requests": [{"name": "nic", "exactly": {
            "deviceClassName": "mrdma.google.com", "allocationMode": "ExactCount", "count": 8}}]}},
        "status": {},
    }
    if allocated:
        claim["status"] = {
            "allocation": {"devices": {"results": [{"request": "nic", **dev}]},
                           "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                               {"key": "metadata.name", "operator": "In", "values": ["gke-a4-0"]}]}]}},
            "reservedFor": [{"resource": "pods", "name": pod, "uid": f"uid-{pod}"}],
            "devices": [{**dev, "conditions": [{"type": "Ready", "status": ready, "reason": "Configured" if ready ==
                                                "True" else "LinkDown", "message": "" if ready == "True" else
                                                "eth1 has no carrier", "lastTransitionTime": "2026-12-01T10:00:00Z"}],
                         "networkData": {"interfaceName": "eth1", "ips": ["10.10.0.5/24"],
                                         "hardwareAddress": "0a:58:0a:0a:00:05"}}],
        }
    return claim
