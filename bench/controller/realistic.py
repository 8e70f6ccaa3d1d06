"""Pods and nodes as the API server stores them: managed fields, status, the labels and volumes real ones carry.

The benchmarks' older generators made 4.5-9 KiB pods; a managed training pod on a real cluster costs several
times that, most of it in ``metadata.managedFields`` (one entry per writer, each a ``fieldsV1`` tree naming every
field that writer set). ``managed_fields`` derives those trees from the object itself, so their size follows the
object's. Used by bench_memory.py, bench_pass.py's --realistic (``dress``) and tests/controller/test_trim.py.
"""

from __future__ import annotations

import json
from typing import Any

T0 = "2026-11-20T10:00:00Z"


def _fields(v: Any) -> Any:
    """The fieldsV1 tree of a value: ``f:<key>`` per map key, ``k:{...}`` per keyed list item (by name)."""
    if isinstance(v, dict):
        return {f"f:{k}": _fields(x) for k, x in v.items()} or {}
    if isinstance(v, list) and v and all(isinstance(x, dict) and "name" in x for x in v):
        return {"k:" + json.dumps({"name": x["name"]}, separators=(",", ":")): {".": {}, **_fields(x)} for x in v}
    if isinstance(v, list) and v and all(isinstance(x, dict) and "type" in x for x in v):
        return {"k:" + json.dumps({"type": x["type"]}, separators=(",", ":")): {".": {}, **_fields(x)} for x in v}
    return {}


def managed_fields(entries: list[tuple[str, str, str | None, dict[str, Any]]]) -> list[dict[str, Any]]:
    """``[(manager, operation, subresource, part of the object it set)]`` -> ``metadata.managedFields``."""
    out = []
    for manager, op, sub, part in entries:
        e: dict[str, Any] = {"manager": manager, "operation": op, "apiVersion": "v1", "time": T0,
                             "fieldsType": "FieldsV1", "fieldsV1": _fields(part)}
        if sub:
            e["subresource"] = sub
        out.append(e)
    return out


def pod(i: int, node: str, *, job: str | None = None, namespace: str = "ml-training", gpus: int = 8,
        managed: bool = True) -> dict[str, Any]:
    """A running rank pod of a JobSet the webhook mutated (NCCL variables, the Lustre log mount, RDMA)."""
    job = job or f"train-{i // 2:05d}"
    name = f"{job}-workers-0-{i % 2}-{i:05x}"
    labels = {
        "batch.kubernetes.io/controller-uid": f"c0ffee00-0000-4000-8000-{i:012x}",
        "batch.kubernetes.io/job-completion-index": str(i % 2), "batch.kubernetes.io/job-name": f"{job}-workers-0",
        "controller-uid": f"c0ffee00-0000-4000-8000-{i:012x}", "job-name": f"{job}-workers-0",
        "jobset.sigs.k8s.io/job-index": "0", "jobset.sigs.k8s.io/job-key": f"{i:040x}",
        "jobset.sigs.k8s.io/jobset-name": job, "jobset.sigs.k8s.io/replicatedjob-name": "workers",
        "jobset.sigs.k8s.io/replicatedjob-replicas": "1", "jobset.sigs.k8s.io/restart-attempt": "0",
        "kueue.x-k8s.io/queue-name": "gpu", "kueue.x-k8s.io/podset": "workers",
        "fabricguard.io/managed": "true", "fabricguard.io/pool": "h200-rdma",
    }
    annotations = {
        "batch.kubernetes.io/job-completion-index": str(i % 2), "jobset.sigs.k8s.io/job-index": "0",
        "jobset.sigs.k8s.io/jobset-name": job, "jobset.sigs.k8s.io/replicatedjob-name": "workers",
        "kueue.x-k8s.io/workload": f"jobset-{job}-{i:05x}", "fabricguard.io/injected": "nccl,lustre,rdma",
        "networking.gke.io/interfaces": json.dumps([{"interfaceName": f"eth{k}", "network": f"rdma-{k}"}
                                                   for k in range(9)]),
    }
    env = [{"name": k, "value": v} for k, v in {
        "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET", "NCCL_DEBUG_FILE": f"/lustre/{namespace}/{job}/%h.%p",
        "NCCL_NET": "gIB", "NCCL_CROSS_NIC": "0", "NCCL_NET_GDR_LEVEL": "PIX", "NCCL_P2P_NET_CHUNKSIZE": "131072",
        "NCCL_NVLS_CHUNKSIZE": "524288", "NCCL_IB_ADAPTIVE_ROUTING": "1", "NCCL_IB_QPS_PER_CONNECTION": "4",
        "NCCL_IB_TC": "52", "NCCL_IB_FIFO_TC": "84", "NCCL_TUNER_CONFIG_PATH": "/usr/local/gib/configs/tuner.txtpb",
        "NCCL_SOCKET_IFNAME": "eth0", "MASTER_ADDR": f"{job}-workers-0-0.{job}", "MASTER_PORT": "29500",
        "WORLD_SIZE": "16", "NNODES": "2", "NPROC_PER_NODE": str(gpus), "LD_LIBRARY_PATH": "/usr/local/nvidia/lib64",
        "PYTHONUNBUFFERED": "1", "HF_HOME": "/lustre/cache/hf", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        "JOBSET_NAME": job, "REPLICATED_JOB_NAME": "workers", "JOB_INDEX": "0", "JOB_COMPLETION_INDEX": str(i % 2),
    }.items()]
    env.append({"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}})
    mounts = [{"name": "dshm", "mountPath": "/dev/shm"}, {"name": "lustre", "mountPath": "/lustre"},
              {"name": "gib", "mountPath": "/usr/local/gib"}, {"name": "nvidia", "mountPath": "/usr/local/nvidia"},
              {"name": "kube-api-access-x", "readOnly": True,
               "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]
    resources = {"limits": {"nvidia.com/gpu": str(gpus), "cpu": "200", "memory": "1800Gi"},
                 "requests": {"nvidia.com/gpu": str(gpus), "cpu": "200", "memory": "1800Gi"}}
    container = {"name": "trainer", "image": "us-docker.pkg.dev/acme/train/llama:2026.11.3",
                 "command": ["bash", "-c"], "args": ["torchrun --nnodes=2 --nproc-per-node=8 train.py --config "
                                                     "/lustre/configs/llama-70b.yaml"],
                 "env": env, "resources": resources, "volumeMounts": mounts, "imagePullPolicy": "IfNotPresent",
                 "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                 "securityContext": {"capabilities": {"add": ["IPC_LOCK", "SYS_RESOURCE"]}},
                 "readinessProbe": {"exec": {"command": ["cat", "/tmp/ready"]}, "periodSeconds": 10,
                                    "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3}}
    volumes = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "256Gi"}},
        {"name": "lustre", "persistentVolumeClaim": {"claimName": "lustre-training"}},
        {"name": "gib", "hostPath": {"path": "/home/kubernetes/bin/gib", "type": ""}},
        {"name": "nvidia", "hostPath": {"path": "/home/kubernetes/bin/nvidia", "type": ""}},
        {"name": "kube-api-access-x", "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1",
                                                                         "fieldPath": "metadata.namespace"}}]}}]}},
    ]
    spec = {"containers": [container], "volumes": volumes, "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst", "serviceAccountName": "default",
            "serviceAccount": "default", "nodeName": node, "hostname": f"{job}-workers-0-{i % 2}",
            "subdomain": job, "securityContext": {}, "schedulerName": "default-scheduler",
            "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-h200-141gb",
                             "cloud.google.com/gke-nodepool": "h200-rdma"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                             "tolerationSeconds": 300},
                            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                             "tolerationSeconds": 300}],
            "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchExpressions": [{"key": "jobset.sigs.k8s.io/jobset-name",
                                                        "operator": "In", "values": [job]}]},
                "topologyKey": "cloud.google.com/gce-topology-block"}]}},
            "priority": 0, "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority"}
    status = {
        "phase": "Running",
        "conditions": [{"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": T0}
                       for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                                 "PodScheduled")],
        "hostIP": f"10.8.{i // 250 % 250}.{i % 250}", "hostIPs": [{"ip": f"10.8.{i // 250 % 250}.{i % 250}"}],
        "podIP": f"10.64.{i // 250 % 250}.{i % 250}", "podIPs": [{"ip": f"10.64.{i // 250 % 250}.{i % 250}"}],
        "startTime": T0, "qosClass": "Guaranteed",
        "containerStatuses": [{"name": "trainer", "state": {"running": {"startedAt": T0}}, "lastState": {},
                               "ready": True, "restartCount": 0,
                               "image": "us-docker.pkg.dev/acme/train/llama:2026.11.3",
                               "imageID": "us-docker.pkg.dev/acme/train/llama@sha256:" + "ab" * 32,
                               "containerID": f"containerd://{i:064x}", "started": True,
                               "volumeMounts": [{"name": m["name"], "mountPath": m["mountPath"]} for m in mounts]}],
    }
    meta: dict[str, Any] = {
        "name": name, "generateName": f"{job}-workers-0-{i % 2}-", "namespace": namespace,
        "uid": f"0d0d0d0d-0000-4000-8000-{i:012x}", "resourceVersion": str(100000 + i), "creationTimestamp": T0,
        "labels": labels, "annotations": annotations, "finalizers": ["batch.kubernetes.io/job-tracking"],
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": f"{job}-workers-0",
                             "uid": f"c0ffee00-0000-4000-8000-{i:012x}", "controller": True,
                             "blockOwnerDeletion": True}],
    }
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}
    if managed:
        meta["managedFields"] = managed_fields([
            ("kube-controller-manager", "Update", None, {"metadata": {k: meta[k] for k in (
                "generateName", "labels", "annotations", "finalizers", "ownerReferences")}, "spec": spec}),
            ("kube-scheduler", "Update", "status", {"status": {"conditions": status["conditions"][-1:]}}),
            ("kubelet", "Update", "status", {"status": status}),
        ])
    return obj


def node(i: int, *, gpus: int = 8, pool: str = "h200-rdma", managed: bool = True) -> dict[str, Any]:
    """An H200 node with the labels its node pool, NFD and GPU feature discovery put on it, and its images."""
    name = f"gke-h200-{pool}-{i:05d}"
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "node.kubernetes.io/instance-type": "a3-ultragpu-8g", "topology.kubernetes.io/zone": "us-east5-a",
              "topology.kubernetes.io/region": "us-east5", "cloud.google.com/gke-nodepool": pool,
              "cloud.google.com/gke-accelerator": "nvidia-h200-141gb", "cloud.google.com/gke-os-distribution": "cos",
              "cloud.google.com/gce-topology-block": f"block-{i // 64}", "cloud.google.com/gce-topology-subblock":
              f"sub-{i // 16}", "cloud.google.com/gce-topology-host": f"host-{i}",
              "fabricguard.io/pool": pool}
    labels |= {f"nvidia.com/gpu.{k}": v for k, v in {
        "count": str(gpus), "product": "NVIDIA-H200", "memory": "143771", "family": "hopper", "compute.major": "9",
        "compute.minor": "0", "machine": "a3-ultragpu-8g", "replicas": "1", "sharing-strategy": "none",
        "mode": "compute", "present": "true", "deploy.driver": "pre-installed", "deploy.gpu-feature-discovery":
        "true", "deploy.device-plugin": "true", "deploy.dcgm-exporter": "true"}.items()}
    labels |= {f"feature.node.kubernetes.io/cpu-cpuid.{f}": "true" for f in (
        "ADX", "AESNI", "AMXBF16", "AMXINT8", "AMXTILE", "AVX", "AVX2", "AVX512BF16", "AVX512BITALG", "AVX512BW",
        "AVX512CD", "AVX512DQ", "AVX512F", "AVX512FP16", "AVX512IFMA", "AVX512VBMI", "AVX512VBMI2", "AVX512VL",
        "AVX512VNNI", "AVX512VPOPCNTDQ", "CMPXCHG8", "FMA3", "FSRM", "GFNI", "SHA", "VAES", "VPCLMULQDQ")}
    labels |= {f"feature.node.kubernetes.io/pci-{p}.present": "true" for p in ("10de", "15b3", "8086")}
    annotations = {"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach":
                   "true", "container.googleapis.com/instance_id": str(7000000000000 + i),
                   "nfd.node.kubernetes.io/feature-labels": ",".join(k.split("/", 1)[1] for k in labels
                                                                    if k.startswith("feature.node")),
                   "csi.volume.kubernetes.io/nodeid": json.dumps({"lustre.csi.storage.gke.io": name,
                                                                  "pd.csi.storage.gke.io": f"projects/p/{name}"})}
    resources = {"cpu": "224", "ephemeral-storage": "4060335596Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0",
                 "memory": "2952855184Ki", "nvidia.com/gpu": str(gpus), "pods": "110"}
    conditions = [{"type": t, "status": s, "lastHeartbeatTime": T0, "lastTransitionTime": T0, "reason": r,
                   "message": m} for t, s, r, m in (
        ("FrequentUnregisterNetDevice", "False", "NoFrequentUnregisterNetDevice", "node is functioning properly"),
        ("KernelDeadlock", "False", "KernelHasNoDeadlock", "kernel has no deadlock"),
        ("ReadonlyFilesystem", "False", "FilesystemIsNotReadOnly", "Filesystem is not read-only"),
        ("CorruptDockerOverlay2", "False", "NoCorruptDockerOverlay2", "docker overlay2 is functioning properly"),
        ("FrequentKubeletRestart", "False", "NoFrequentKubeletRestart", "kubelet is functioning properly"),
        ("FrequentContainerdRestart", "False", "NoFrequentContainerdRestart", "containerd is functioning properly"),
        ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        ("FabricReady", "True", "FabricHealthy", "8 of 8 RDMA ports active; GPUDirect RDMA loaded"))]
    images = [{"names": [f"us-docker.pkg.dev/acme/img{k}@sha256:{k:064x}", f"us-docker.pkg.dev/acme/img{k}:v{k}"],
               "sizeBytes": 100000000 + k} for k in range(40)]
    status = {"capacity": resources, "allocatable": resources, "conditions": conditions,
              "addresses": [{"type": "InternalIP", "address": f"10.8.{i // 250 % 250}.{i % 250}"},
                            {"type": "Hostname", "address": name}],
              "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
              "nodeInfo": {"machineID": f"{i:032x}", "systemUUID": f"{i:032x}", "bootID": f"{i:032x}",
                           "kernelVersion": "6.1.100+", "osImage": "Container-Optimized OS from Google",
                           "containerRuntimeVersion": "containerd://1.7.24", "kubeletVersion": "v1.32.2-gke.1",
                           "kubeProxyVersion": "v1.32.2-gke.1", "operatingSystem": "linux", "architecture": "amd64"},
              "images": images, "volumesInUse": [f"kubernetes.io/csi/lustre^vol-{k}" for k in range(3)],
              "volumesAttached": [{"name": f"kubernetes.io/csi/lustre^vol-{k}", "devicePath": ""} for k in range(3)]}
    spec = {"podCIDR": f"10.64.{i % 250}.0/24", "podCIDRs": [f"10.64.{i % 250}.0/24"],
            "providerID": f"gce://p/us-east5-a/{name}",
            "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}
    meta: dict[str, Any] = {"name": name, "uid": f"0e0e0e0e-0000-4000-8000-{i:012x}",
                            "resourceVersion": str(200000 + i), "creationTimestamp": T0, "labels": labels,
                            "annotations": annotations}
    obj = {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec, "status": status}
    if managed:
        meta["managedFields"] = managed_fields([
            ("kubelet", "Update", None, {"metadata": {"labels": {k: v for k, v in labels.items()
                                                                 if k.startswith(("kubernetes.io", "node."))},
                                                      "annotations": annotations}}),
            ("kube-controller-manager", "Update", None, {"spec": {"podCIDR": 1, "podCIDRs": 1}}),
            ("nfd-master", "Update", None, {"metadata": {"labels": {k: v for k, v in labels.items()
                                                                    if k.startswith("feature.")}}}),
            ("gpu-feature-discovery", "Update", None, {"metadata": {"labels": {k: v for k, v in labels.items()
                                                                               if k.startswith("nvidia.com")}}}),
            ("node-problem-detector", "Update", "status", {"status": {"conditions": conditions[:6]}}),
            ("kubelet", "Update", "status", {"status": status}),
            ("fabricguard-agent", "Apply", "status", {"status": {"conditions": conditions[-1:]}}),
        ])
    return obj


def dress(obj: dict[str, Any], i: int) -> dict[str, Any]:
    """A generated node or pod (bench/doctor/gen_snapshot.py's, whose labels the benchmarks' profile selects) made
    the size the API server stores: what ``node``/``pod`` above carry besides the selection (images, node info,
    problem-detector conditions, volumes; the pod's env, mounts and probes), and managed fields derived from it.
    The fields the pass reads are left as they were, so the pass judges the same cluster (bench_pass.py prints the
actions and findings of both forms)."""
    meta, spec, status = obj["metadata"], obj.setdefault("spec", {}), obj.setdefault("status", {})
    if obj.get("kind") == "Node":
        real = node(i, managed=False)
        have = {c.get("type") for c in status.get("conditions") or []}
        # The node-problem-detector's and kubelet's conditions; FabricReady is ours, and says whether the node is gated.
        status.setdefault("conditions", []).extend(c for c in real["status"]["conditions"]
                                                   if c["type"] not in have and c["type"] != "FabricReady")
        for k in ("images", "nodeInfo", "volumesInUse", "volumesAttached", "daemonEndpoints", "addresses"):
            status.setdefault(k, real["status"][k])
        meta.setdefault("annotations", {}).update(real["metadata"]["annotations"])
        meta["labels"] = {**{k: v for k, v in real["metadata"]["labels"].items()
                             if k.startswith(("feature.node", "topology.", "kubernetes.io/os"))}, **meta["labels"]}
        writers = [("kubelet", "Update", None, {"metadata": {"annotations": meta["annotations"]}}),
                   ("nfd-master", "Update", None, {"metadata": {"labels": meta["labels"]}}),
                   ("kubelet", "Update", "status", {"status": status})]
    else:
        real = pod(i, spec.get("nodeName") or "n", managed=False)
        real_c = real["spec"]["containers"][0]
        for c in spec.get("containers") or []:
            for k in ("env", "volumeMounts", "ports", "readinessProbe", "livenessProbe", "command", "args"):
                if k in real_c:
                    c.setdefault(k, real_c[k])
        for k in ("volumes", "affinity", "dnsPolicy", "schedulerName"):
            if k in real["spec"]:
                spec.setdefault(k, real["spec"][k])
        for k in ("podIPs", "hostIPs", "qosClass"):
            if k in real["status"]:
                status.setdefault(k, real["status"][k])
        writers = [("kube-controller-manager", "Update", None, {"metadata": {"labels": meta.get("labels", {})},
                                                                "spec": spec}),
                   ("kubelet", "Update", "status", {"status": status})]
    meta["managedFields"] = managed_fields(writers)
    return obj
