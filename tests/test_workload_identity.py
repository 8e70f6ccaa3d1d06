"""One list of job labels: admission (FG_JOB, the Lustre directory) and the doctor (grouping running pods into
workloads) name the same job for the same pod."""

from __future__ import annotations

from typing import Any

import pytest

from fabricguard.admission.workloads import pod_job
from fabricguard.doctor.rules._common import workload_key
from fabricguard.workload_identity import CONTROLLER_LABELS, JOB_LABELS, KIND_OF_LABEL, job_of

PODS: list[tuple[dict[str, str], tuple[str, str]]] = [
    # A JobSet's pod also carries its child Job's name, which is not the job.
    ({"jobset.sigs.k8s.io/jobset-name": "llama", "batch.kubernetes.io/job-name": "llama-workers-0",
      "job-name": "llama-workers-0"}, ("jobset.sigs.k8s.io/jobset-name", "llama")),
    # The Trainer runs a TrainJob as a JobSet of the same name: both labels name it.
    ({"trainer.kubeflow.org/trainjob-name": "ft", "jobset.sigs.k8s.io/jobset-name": "ft"},
     ("jobset.sigs.k8s.io/jobset-name", "ft")),
    ({"training.kubeflow.org/job-name": "bert", "kueue.x-k8s.io/pod-group-name": "other"},
     ("training.kubeflow.org/job-name", "bert")),
    ({"kueue.x-k8s.io/pod-group-name": "sweep", "fabricguard.io/job": "sweep"},
     ("kueue.x-k8s.io/pod-group-name", "sweep")),
    ({"batch.kubernetes.io/job-name": "eval", "job-name": "eval"}, ("batch.kubernetes.io/job-name", "eval")),
    ({"job-name": "old"}, ("job-name", "old")),  # clusters before 1.27
    ({"fabricguard.io/job": "bare"}, ("fabricguard.io/job", "bare")),
]


@pytest.mark.parametrize(("labels", "expect"), PODS)
def test_admission_and_doctor_name_the_same_job(labels: dict[str, str], expect: tuple[str, str]) -> None:
    pod: dict[str, Any] = {"metadata": {"name": "p-0", "namespace": "ml", "labels": labels}}
    assert job_of(labels) == expect
    name, label = pod_job(pod["metadata"])
    assert (label, name) == expect
    assert workload_key(pod) == (expect[0], "ml", expect[1])


def test_the_list_is_consistent() -> None:
    keys = [k for k, _ in JOB_LABELS]
    assert len(keys) == len(set(keys)) == len(KIND_OF_LABEL)
    assert keys.index("jobset.sigs.k8s.io/jobset-name") < keys.index("batch.kubernetes.io/job-name")
    assert "fabricguard.io/job" not in CONTROLLER_LABELS and "kueue.x-k8s.io/pod-group-name" not in CONTROLLER_LABELS
    assert job_of({}) is None and job_of(None) is None and job_of({"job-name": ""}) is None
