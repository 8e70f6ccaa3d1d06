"""Workloads of the kinds fabricguard.kinds added (LeaderWorkerSet, RayJob, RayCluster, MPIJob, PyTorchJob) as
a user writes them, their AdmissionReviews, and what the API server and each kind's CRD do before storing them.

Shapes and defaults from the kinds' own APIs: LeaderWorkerSet v1 (``replicas`` and ``leaderWorkerTemplate.size``
default 1, ``startupPolicy: LeaderCreated``, ``restartPolicy: RecreateGroupOnPodRestart``, ``rolloutStrategy``
RollingUpdate, ``networkConfig.subdomainPolicy: Shared``); KubeRay v1 RayJob/RayCluster (``numOfHosts`` 1,
``submissionMode: K8sJobMode``); mpi-operator v2beta1 MPIJob (``slotsPerWorker`` 1, ``runPolicy.cleanPodPolicy``
None, ``sshAuthMountPath: /root/.ssh``, ``mpiImplementation: OpenMPI``, ``launcherCreationPolicy: AtStartup``);
Kubeflow Training Operator v1 PyTorchJob (``runPolicy.cleanPodPolicy`` None, ``restartPolicy: OnFailure`` per
replica type). Pod templates get the core defaults of tests/admission/apiserver_defaults.py. Kueue's webhook
suspends a queued RayJob/RayCluster with ``spec.suspend`` and a Kubeflow job with ``spec.runPolicy.suspend``;
a LeaderWorkerSet is gated at its pods (scheduling gates), so its object is left as it is.
"""

from __future__ import annotations

import copy
from typing import Any

IMAGE = "us-docker.pkg.dev/acme/train/llm@sha256:" + "a" * 64
NEW_KINDS = ("LeaderWorkerSet", "RayJob", "RayCluster", "MPIJob", "PyTorchJob")
API = {"LeaderWorkerSet": ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets"),
       "RayJob": ("ray.io", "v1", "rayjobs"), "RayCluster": ("ray.io", "v1", "rayclusters"),
       "MPIJob": ("kubeflow.org", "v2beta1", "mpijobs"), "PyTorchJob": ("kubeflow.org", "v1", "pytorchjobs")}


def trainer(name: str = "trainer", gpus: int = 8, command: list[str] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "image": IMAGE,
        "command": command or ["torchrun", "--nnodes=4", "--nproc-per-node=8", "train.py"],
        "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}],
        "resources": {"requests": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": str(gpus)},
                      "limits": {"memory": "1Ti", "nvidia.com/gpu": str(gpus)}},
    }


def _tpl(*containers: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"spec": {"containers": list(containers)}}
    if labels:
        out["metadata"] = {"labels": labels}
    return out


def workload(kind: str, name: str = "llama-pretrain", namespace: str = "ml-team") -> dict[str, Any]:
    group, version, _ = API[kind]
    meta = {"name": name, "namespace": namespace, "labels": {"team": "foundation"}}
    if kind == "LeaderWorkerSet":
        spec: dict[str, Any] = {"replicas": 2, "leaderWorkerTemplate": {
            "size": 4,
            "leaderTemplate": _tpl(trainer("leader")),
            "workerTemplate": _tpl(trainer("worker")),
        }}
    elif kind in ("RayJob", "RayCluster"):
        cluster = {"headGroupSpec": {"rayStartParams": {}, "template": _tpl(
                       {"name": "ray-head", "image": IMAGE, "resources": {"requests": {"cpu": "4"}}})},
                   "workerGroupSpecs": [{"groupName": "gpu", "replicas": 4, "minReplicas": 4, "maxReplicas": 4,
                                         "rayStartParams": {}, "template": _tpl(trainer("ray-worker",
                                                                                    command=["ray", "start"]))}]}
        spec = ({"entrypoint": "python train.py --nodes 4", "shutdownAfterJobFinishes": True,
                 "rayClusterSpec": cluster} if kind == "RayJob" else cluster)
    elif kind == "MPIJob":
        spec = {"slotsPerWorker": 8, "runPolicy": {"cleanPodPolicy": "Running"}, "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": _tpl({"name": "launcher", "image": IMAGE,
                                                          "command": ["mpirun", "-np", "32", "python", "train.py"]})},
            "Worker": {"replicas": 4, "template": _tpl(trainer("worker", command=["/usr/sbin/sshd", "-De"]))},
        }}
    elif kind == "PyTorchJob":
        spec = {"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": _tpl(trainer("pytorch"))},
            "Worker": {"replicas": 3, "restartPolicy": "OnFailure", "template": _tpl(trainer("pytorch"))},
        }}
    else:
        raise AssertionError(kind)
    return {"apiVersion": f"{group}/{version}", "kind": kind, "metadata": meta, "spec": spec}


def review(obj: dict[str, Any], uid: str = "3d1f7c2e-8b9a-4c5d-9e0f-1a2b3c4d5e6f") -> dict[str, Any]:
    group, version, plural = API[obj["kind"]]
    gvk = {"group": group, "version": version, "kind": obj["kind"]}
    gvr = {"group": group, "version": version, "resource": plural}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
        "name": obj["metadata"].get("name", ""), "namespace": obj["metadata"]["namespace"], "operation": "CREATE",
        "userInfo": {"username": "alice@example.com", "groups": ["system:authenticated", "ml-team"]},
        "object": copy.deepcopy(obj), "oldObject": None, "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}}}


def crd_defaults(obj: dict[str, Any]) -> dict[str, Any]:
    """The defaults each kind's CRD schema (or its operator's defaulting webhook) writes on create."""
    out = copy.deepcopy(obj)
    spec = out["spec"]
    kind = out["kind"]
    if kind == "LeaderWorkerSet":
        spec.setdefault("replicas", 1)
        spec.setdefault("startupPolicy", "LeaderCreated")
        spec.setdefault("rolloutStrategy", {"type": "RollingUpdate", "rollingUpdateConfiguration": {
            "maxSurge": 0, "maxUnavailable": 1}})
        spec.setdefault("networkConfig", {"subdomainPolicy": "Shared"})
        lwt = spec["leaderWorkerTemplate"]
        lwt.setdefault("size", 1)
        lwt.setdefault("restartPolicy", "RecreateGroupOnPodRestart")
    elif kind in ("RayJob", "RayCluster"):
        cluster = spec["rayClusterSpec"] if kind == "RayJob" else spec
        for g in cluster.get("workerGroupSpecs") or ():
            g.setdefault("numOfHosts", 1)
        if kind == "RayJob":
            spec.setdefault("submissionMode", "K8sJobMode")
    elif kind == "MPIJob":
        spec.setdefault("slotsPerWorker", 1)
        spec.setdefault("runPolicy", {}).setdefault("cleanPodPolicy", "None")
        spec.setdefault("sshAuthMountPath", "/root/.ssh")
        spec.setdefault("mpiImplementation", "OpenMPI")
        spec.setdefault("launcherCreationPolicy", "AtStartup")
    elif kind == "PyTorchJob":
        spec.setdefault("runPolicy", {}).setdefault("cleanPodPolicy", "None")
        for rs in spec["pytorchReplicaSpecs"].values():
            rs.setdefault("restartPolicy", "OnFailure")
    return out


def kueue_suspend(obj: dict[str, Any]) -> dict[str, Any]:
    """What Kueue's webhook does to a queued object of these kinds (the reinvocation trigger)."""
    out = copy.deepcopy(obj)
    if out["kind"] in ("RayJob", "RayCluster"):
        out["spec"]["suspend"] = True
    elif out["kind"] in ("MPIJob", "PyTorchJob"):
        out["spec"].setdefault("runPolicy", {})["suspend"] = True
    return out
