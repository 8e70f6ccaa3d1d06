"""Which job a pod belongs to: the labels that controllers put on the pods they create, in one ordered list.

Admission reads the job name from these labels (it names the job's directory on Lustre and its NCCL logs), and
the doctor groups running pods into workloads with them; both must agree. Order matters when a pod carries
several: a JobSet's child Jobs are called ``<jobset>-<replicated job>-<index>``, so the JobSet label comes
before the batch Job label, and a TrainJob runs as a JobSet of the same name.

Pure: label keys and a lookup over a labels mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fabricguard import names

# (label key, the kind of the workload it names), most specific first.
JOB_LABELS: tuple[tuple[str, str], ...] = (
    (names.JOBSET_NAME, "JobSet"),
    (names.TRAINJOB_NAME, "TrainJob"),
    (names.PYTORCHJOB_NAME, "PyTorchJob"),
    (names.LWS_NAME, "LeaderWorkerSet"),
    (names.RAY_CLUSTER, "RayCluster"),  # a RayJob's pods too: they run in the RayCluster it made
    (names.KUEUE_POD_GROUP, "Workload"),
    (names.LABEL_JOB_NAME, "Job"),
    ("job-name", "Job"),  # before Kubernetes 1.27 the Job controller set only this one
    (names.LABEL_JOB, "Job"),  # set by fabricguard's webhook on the pods it admits
)
LABEL_KEYS: tuple[str, ...] = tuple(k for k, _ in JOB_LABELS)
KIND_OF_LABEL: dict[str, str] = dict(JOB_LABELS)

# Labels that only a controller sets: a pod carrying one was made by a workload, not submitted bare.
CONTROLLER_LABELS: frozenset[str] = frozenset(
    k for k in LABEL_KEYS if k not in (names.KUEUE_POD_GROUP, names.LABEL_JOB))


def job_of(labels: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """``(label key, job name)`` from the first label of :data:`JOB_LABELS` the pod carries, else None."""
    if not isinstance(labels, Mapping):
        return None
    for key in LABEL_KEYS:
        value = labels.get(key)
        if isinstance(value, str) and value:
            return key, value
    return None
