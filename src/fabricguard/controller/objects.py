"""Names the controller shares with the cluster: API groups, labels, annotations, and small readers of objects.

Every key written or read by the controller is defined here once, so the renderer of the manifests, the
reconcile core and the tests agree on them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

# Times are read and written by the doctor's helpers: one parser of API-server timestamps.
from fabricguard.doctor.model import iso as iso
from fabricguard.doctor.model import parse_time as parse_time

GROUP = "fabricguard.io"
VERSION = "v1alpha1"
FV_API = f"{GROUP}/{VERSION}"
FV_KIND = "FabricValidation"
FV_PLURAL = "fabricvalidations"

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
KUEUE_API = "kueue.x-k8s.io/v1beta2"
BATCH_API = "batch/v1"
TRAINJOB_API = "trainer.kubeflow.org/v1alpha1"

CHECK_CONTROLLER = "fabricguard.io/fabric-validated"
CHECK_NAME = "fabric-validated"
FIELD_MANAGER = "fabricguard-controller"
COMPONENT = "fabricguard-controller"
LEASE_NAME = "fabricguard-controller"

LABEL_CANARY_POOL = "fabricguard.io/canary-pool"
LABEL_COMPONENT = "app.kubernetes.io/component"
ANN_VERDICT = "fabricguard.io/verdict"
ANN_VERDICT_DETAIL = "fabricguard.io/verdict-detail"

# Managed workload kinds whose completion gets a verdict: (apiVersion, plural, kind).
MANAGED_KINDS: tuple[tuple[str, str, str], ...] = (
    (JOBSET_API, "jobsets", "JobSet"),
    (BATCH_API, "jobs", "Job"),
    (TRAINJOB_API, "trainjobs", "TrainJob"),
)


def meta(obj: dict[str, Any]) -> dict[str, Any]:
    m = obj.get("metadata")
    return m if isinstance(m, dict) else {}


def name_of(obj: dict[str, Any]) -> str:
    return str(meta(obj).get("name", ""))


def namespace_of(obj: dict[str, Any]) -> str | None:
    ns = meta(obj).get("namespace")
    return str(ns) if ns else None


def labels(obj: dict[str, Any]) -> dict[str, str]:
    v = meta(obj).get("labels")
    return v if isinstance(v, dict) else {}


def annotations_of(obj: dict[str, Any]) -> dict[str, str]:
    v = meta(obj).get("annotations")
    return v if isinstance(v, dict) else {}


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if isinstance(c, dict) and c.get("type") == ctype:
            return c
    return None


def condition_true(obj: dict[str, Any], ctype: str) -> bool:
    c = condition(obj, ctype)
    return c is not None and c.get("status") == "True"


def created(obj: dict[str, Any]) -> datetime | None:
    return parse_time(meta(obj).get("creationTimestamp"))


def owner_ref(obj: dict[str, Any], api_version: str, kind: str, *, controller: bool = True) -> dict[str, Any]:
    """An ownerReference to ``obj`` (which must carry its uid, as the API server returns it)."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name_of(obj),
        "uid": str(meta(obj).get("uid", "")),
        "controller": controller,
        "blockOwnerDeletion": False,
    }
