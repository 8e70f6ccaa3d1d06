"""Write the example snapshots: the 271-day incident (production and staging) and a healthy cluster.

Every file has the shape ``kubectl get <kind> -A -o json`` writes (a ``List`` whose items carry ``kind``
and ``apiVersion``); each snapshot directory also holds the profile it is audited against
(``profile.yaml``, which the doctor skips as a snapshot file and uses as the default ``--profile``).
The builders are reused by ``bench/doctor/gen_snapshot.py`` and the tests.

    python examples/snapshots/generate.py        # rewrites examples/snapshots/*/
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

NOW = datetime(2025, 9, 30, 12, 0, 0, tzinfo=UTC)  # the fixed --now of the examples
HERE = Path(__file__).resolve().parent
PLUGIN_NS = "network-operator"
PLUGIN = "rdma-shared-dp-ds"
RDMA = "rdma/rdma_shared_device_a"
MIRROR = "registry.corp.example.com/mirror/mellanox/k8s-rdma-shared-dev-plugin"
ARM64_DIGEST = "sha256:" + hashlib.sha256(b"k8s-rdma-shared-dev-plugin v1.5.2 linux/arm64").hexdigest()
AMD64_DIGEST = "sha256:" + hashlib.sha256(b"k8s-rdma-shared-dev-plugin v1.5.2 linux/amd64").hexdigest()
EXEC_FORMAT = (
    "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create "
    'failed: unable to start container process: exec: "/bin/k8s-rdma-shared-dp": exec format error: unknown'
)


def ts(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def uid(*parts: str) -> str:
    h = hashlib.md5("/".join(parts).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def klist(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}


def node(
    name: str,
    *,
    arch: str,
    labels: dict[str, str],
    created: datetime,
    allocatable: dict[str, str],
    fabric_ready: bool | None = None,
    gpus: int = 1,
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    conds = [
        {
            "type": t,
            "status": "False",
            "reason": r,
            "message": m,
            "lastHeartbeatTime": ts(NOW),
            "lastTransitionTime": ts(created),
        }
        for t, r, m in (
            ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        )
    ]
    conds.append(
        {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
            "lastHeartbeatTime": ts(NOW),
            "lastTransitionTime": ts(created + timedelta(seconds=40)),
        }
    )
    if fabric_ready is not None:
        conds.append(
            {
                "type": "FabricReady",
                "status": "True" if fabric_ready else "False",
                "reason": "FabricVerified" if fabric_ready else "RdmaDeviceMissing",
                "message": "fabricguard readiness agent",
                "lastHeartbeatTime": ts(NOW),
                "lastTransitionTime": ts(created + timedelta(minutes=3)),
            }
        )
    alloc = {
        "cpu": "71",
        "ephemeral-storage": "1800Gi",
        "hugepages-2Mi": "0",
        "memory": "470Gi",
        "pods": "110",
        "nvidia.com/gpu": str(gpus),
        **allocatable,
    }
    spec: dict[str, Any] = {"podCIDR": "10.4.0.0/24", "providerID": f"baremetal://{name}"}
    if taints:
        spec["taints"] = taints
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": uid("node", name),
            "resourceVersion": "918273",
            "creationTimestamp": ts(created),
            "labels": {
                "kubernetes.io/arch": arch,
                "kubernetes.io/os": "linux",
                "kubernetes.io/hostname": name,
                "beta.kubernetes.io/arch": arch,
                **labels,
            },
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": spec,
        "status": {
            "allocatable": alloc,
            "capacity": dict(alloc),
            "conditions": conds,
            "nodeInfo": {
                "architecture": arch,
                "containerRuntimeVersion": "containerd://1.7.27",
                "kubeletVersion": "v1.31.6",
                "operatingSystem": "linux",
                "osImage": "Ubuntu 22.04.5 LTS",
            },
        },
    }


def daemonset(
    ns: str,
    name: str,
    *,
    image: str,
    created: datetime,
    node_selector: dict[str, str],
    desired: int,
    ready: int,
    generation: int = 1,
    args: list[str] | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "currentNumberScheduled": desired,
        "desiredNumberScheduled": desired,
        "numberMisscheduled": 0,
        "numberReady": ready,
        "observedGeneration": generation,
        "updatedNumberScheduled": desired,
    }
    if ready:
        status["numberAvailable"] = ready
    if desired - ready:
        status["numberUnavailable"] = desired - ready
    container = {
        "name": "rdma-shared-dp",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "resources": {},
        "securityContext": {"privileged": True},
        "volumeMounts": [
            {"mountPath": "/var/lib/kubelet/device-plugins", "name": "device-plugin"},
            {"mountPath": "/k8s-rdma-shared-dev-plugin", "name": "config", "readOnly": True},
            {"mountPath": "/dev/", "name": "devs"},
        ],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    if args:
        container["args"] = args
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": uid("ds", ns, name),
            "resourceVersion": "771203",
            "generation": generation,
            "creationTimestamp": ts(created),
            "labels": {"app": name, "nvidia.com/ofed-driver-upgrade-drain.skip": "true"},
            "annotations": {"deprecated.daemonset.template.generation": str(generation)},
        },
        "spec": {
            "revisionHistoryLimit": 10,
            "selector": {"matchLabels": {"name": name}},
            "template": {
                "metadata": {"labels": {"name": name}},
                "spec": {
                    "containers": [container],
                    "dnsPolicy": "ClusterFirst",
                    "hostNetwork": True,
                    "nodeSelector": node_selector,
                    "priorityClassName": "system-node-critical",
                    "restartPolicy": "Always",
                    "serviceAccountName": "rdma-shared",
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "volumes": [
                        {"hostPath": {"path": "/var/lib/kubelet/device-plugins", "type": ""}, "name": "device-plugin"},
                        {
                            "configMap": {
                                "defaultMode": 420,
                                "items": [{"key": "config.json", "path": "config.json"}],
                                "name": "rdma-devices",
                            },
                            "name": "config",
                        },
                        {"hostPath": {"path": "/dev/", "type": ""}, "name": "devs"},
                    ],
                },
            },
            "updateStrategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}, "type": "RollingUpdate"},
        },
        "status": status,
    }


def controller_revision(ds: dict[str, Any], revision: int, created: datetime) -> dict[str, Any]:
    m = ds["metadata"]
    h = hashlib.sha1(f"{m['name']}{revision}".encode()).hexdigest()[:10]
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": f"{m['name']}-{h}",
            "namespace": m["namespace"],
            "uid": uid("cr", m["name"], str(revision)),
            "resourceVersion": "1200",
            "creationTimestamp": ts(created),
            "labels": {"controller-revision-hash": h, "name": m["name"]},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": "DaemonSet",
                    "name": m["name"],
                    "uid": m["uid"],
                }
            ],
        },
        "data": {"spec": {"template": {"$patch": "replace"}}},
        "revision": revision,
    }


def _conditions(start: datetime, ready: bool, ready_since: datetime | None = None) -> list[dict[str, Any]]:
    r = "True" if ready else "False"
    out = [
        {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": ts(start + timedelta(seconds=3))},
        {"type": "Initialized", "status": "True", "lastTransitionTime": ts(start)},
        {"type": "Ready", "status": r, "lastTransitionTime": ts(ready_since or start)},
        {"type": "ContainersReady", "status": r, "lastTransitionTime": ts(ready_since or start)},
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": ts(start)},
    ]
    if not ready:
        for c in out[2:4]:
            c["reason"] = "ContainersNotReady"
            c["message"] = "containers with unready status: [rdma-shared-dp]"
    return out


def ds_pod(
    ds: dict[str, Any], node_name: str, created: datetime, *, crashing: bool, restarts: int = 0, image_id: str = ""
) -> dict[str, Any]:
    m = ds["metadata"]
    tmpl = ds["spec"]["template"]["spec"]
    c = tmpl["containers"][0]
    suffix = hashlib.sha1(node_name.encode()).hexdigest()[:5]
    name = f"{m['name']}-{suffix}"
    cid = "containerd://" + hashlib.sha256(name.encode()).hexdigest()
    status_c: dict[str, Any] = {
        "name": c["name"],
        "image": c["image"],
        "imageID": image_id,
        "restartCount": restarts,
    }
    if crashing:
        last_exit = NOW - timedelta(minutes=2)
        status_c.update(
            ready=False,
            started=False,
            state={
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": (
                        f"back-off 5m0s restarting failed container={c['name']} "
                        f"pod={name}_{m['namespace']}({uid('pod', name)})"
                    ),
                }
            },
            lastState={
                "terminated": {
                    "exitCode": 128,
                    "reason": "StartError",
                    "message": EXEC_FORMAT,
                    "startedAt": "1970-01-01T00:00:00Z",
                    "finishedAt": ts(last_exit),
                    "containerID": cid,
                }
            },
        )
    else:
        status_c.update(
            ready=True,
            started=True,
            containerID=cid,
            lastState={},
            state={"running": {"startedAt": ts(created + timedelta(seconds=8))}},
        )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "generateName": f"{m['name']}-",
            "namespace": m["namespace"],
            "uid": uid("pod", name),
            "resourceVersion": "88213",
            "creationTimestamp": ts(created),
            "labels": {
                "name": m["name"],
                "controller-revision-hash": "6d9c8b7f5",
                "pod-template-generation": m["annotations"]["deprecated.daemonset.template.generation"],
            },
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": "DaemonSet",
                    "name": m["name"],
                    "uid": m["uid"],
                }
            ],
        },
        "spec": {
            "containers": [c],
            "nodeName": node_name,
            "hostNetwork": True,
            "nodeSelector": tmpl["nodeSelector"],
            "restartPolicy": "Always",
            "serviceAccountName": tmpl["serviceAccountName"],
            "tolerations": tmpl["tolerations"],
            "volumes": tmpl["volumes"],
        },
        "status": {
            "phase": "Running",
            "conditions": _conditions(
                created, ready=not crashing, ready_since=None if crashing else created + timedelta(seconds=9)
            ),
            "containerStatuses": [status_c],
            "hostIP": "10.20.0.10",
            "podIP": "10.20.0.10",
            "qosClass": "BestEffort",
            "startTime": ts(created),
        },
    }


def training_pod(
    ns: str, jobset: str, index: int, node_name: str, created: datetime, *, resources: dict[str, str], image: str
) -> dict[str, Any]:
    job = f"{jobset}-workers-0"
    name = f"{job}-{index}-{hashlib.sha1(f'{jobset}{index}'.encode()).hexdigest()[:5]}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": uid("pod", ns, name),
            "resourceVersion": "99120",
            "creationTimestamp": ts(created),
            "labels": {
                "batch.kubernetes.io/job-completion-index": str(index),
                "batch.kubernetes.io/job-name": job,
                "jobset.sigs.k8s.io/jobset-name": jobset,
                "jobset.sigs.k8s.io/replicatedjob-name": "workers",
                "kueue.x-k8s.io/queue-name": "gh200",
            },
            "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": "Job",
                    "name": job,
                    "uid": uid("job", ns, job),
                }
            ],
        },
        "spec": {
            "containers": [
                {
                    "name": "trainer",
                    "image": image,
                    "command": ["torchrun", "--nnodes=2", "--nproc-per-node=1", "train.py"],
                    "resources": {"limits": dict(resources), "requests": dict(resources)},
                }
            ],
            "hostname": f"{job}-{index}",
            "nodeName": node_name,
            "restartPolicy": "Never",
            "subdomain": jobset,
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": ts(created + timedelta(seconds=50))},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": ts(created)},
            ],
            "containerStatuses": [
                {
                    "name": "trainer",
                    "image": image,
                    "imageID": "",
                    "ready": True,
                    "restartCount": 0,
                    "started": True,
                    "state": {"running": {"startedAt": ts(created + timedelta(seconds=45))}},
                }
            ],
            "startTime": ts(created),
        },
    }


def event(
    pod: dict[str, Any], reason: str, message: str, count: int, first: datetime, last: datetime, etype: str = "Warning"
) -> dict[str, Any]:
    m = pod["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{m['name']}.{hashlib.sha1(reason.encode()).hexdigest()[:16]}",
            "namespace": m["namespace"],
            "uid": uid("ev", m["name"], reason),
            "resourceVersion": "4411",
            "creationTimestamp": ts(first),
        },
        "involvedObject": {
            "apiVersion": "v1",
            "fieldPath": "spec.containers{rdma-shared-dp}",
            "kind": "Pod",
            "name": m["name"],
            "namespace": m["namespace"],
            "uid": m["uid"],
        },
        "reason": reason,
        "message": message,
        "source": {"component": "kubelet", "host": pod["spec"]["nodeName"]},
        "firstTimestamp": ts(first),
        "lastTimestamp": ts(last),
        "count": count,
        "type": etype,
        "reportingComponent": "kubelet",
        "reportingInstance": pod["spec"]["nodeName"],
    }


def configmap(ns: str, name: str, data: dict[str, str], created: datetime) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "data": data,
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": uid("cm", ns, name),
            "resourceVersion": "311",
            "creationTimestamp": ts(created),
        },
    }


def nad(ns: str, name: str, resource: str, config: dict[str, Any], created: datetime) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": uid("nad", ns, name),
            "resourceVersion": "512",
            "generation": 1,
            "creationTimestamp": ts(created),
            "annotations": {"k8s.v1.cni.cncf.io/resourceName": resource},
        },
        "spec": {"config": json.dumps(config)},
    }


RDMA_CONFIG = json.dumps(
    {
        "configList": [
            {
                "resourceName": "rdma_shared_device_a",
                "rdmaHcaMax": 63,
                "selectors": {"vendors": ["15b3"], "deviceIDs": ["1021"]},
            }
        ]
    }
)
GH200 = {"nvidia.com/gpu.product": "NVIDIA-GH200-480GB"}


def incident(env: str, *, fixed: bool = False) -> dict[str, dict[str, Any]]:
    """The 271-day incident: production broken since the plugin was deployed; staging with the stopgap.

    ``fixed``: production once the plugin's arm64 image is deployed (its pods run, the nodes advertise the
    RDMA resource, the training job requests it): the recovery the controller's replays end with."""
    prod = env == "production"
    broken = prod and not fixed
    ds_created = NOW - timedelta(days=271, hours=3)
    nodes, pods, events = [], [], []
    gpu_nodes = []
    count = 6 if prod else 2
    for i in range(count):
        block = "block-c" if prod and i >= 4 else ("block-a" if i % 2 == 0 else "block-b")
        created = NOW - timedelta(hours=2 + 29 * i)  # autoscaled: the oldest GPU node is under a week old
        name = f"{'prd' if prod else 'stg'}-gh200-{i:02d}"
        alloc = {} if broken else {RDMA: "63"}
        nodes.append(
            node(
                name,
                arch="arm64",
                labels={**GH200, "network.example.com/block": block},
                created=created,
                allocatable=alloc,
            )
        )
        gpu_nodes.append((name, created))
    for i in range(3):
        name = f"{'prd' if prod else 'stg'}-system-{i}"
        nodes.append(
            node(
                name,
                arch="amd64",
                labels={"node-role.example.com/system": "true"},
                created=NOW - timedelta(days=300),
                allocatable={},
                gpus=0,
            )
        )
    image = f"{MIRROR}:v1.5.2" if broken else f"{MIRROR}:v1.5.2@{ARM64_DIGEST}"
    ds = daemonset(
        PLUGIN_NS,
        PLUGIN,
        image=image,
        created=ds_created,
        node_selector=GH200,
        desired=count,
        ready=0 if broken else count,
        generation=2,
    )
    revs = [controller_revision(ds, 1, ds_created), controller_revision(ds, 2, NOW - timedelta(days=173))]
    for name, created in gpu_nodes:
        p = ds_pod(
            ds,
            name,
            created + timedelta(seconds=35),
            crashing=broken,
            restarts=(int((NOW - created).total_seconds() // 300) if broken else 0),
            image_id="" if broken else f"{MIRROR}@{ARM64_DIGEST}",
        )
        pods.append(p)
        if broken:
            events.append(event(p, "Failed", f"Error: {EXEC_FORMAT}", 31, created, NOW - timedelta(minutes=2)))
            events.append(
                event(
                    p,
                    "BackOff",
                    "Back-off restarting failed container rdma-shared-dp in pod "
                    f"{p['metadata']['name']}_{PLUGIN_NS}({p['metadata']['uid']})",
                    412,
                    created,
                    NOW - timedelta(minutes=1),
                )
            )
    res = {"nvidia.com/gpu": "1"} if broken else {"nvidia.com/gpu": "1", RDMA: "1"}
    for idx in range(2):
        pods.append(
            training_pod(
                "ml-training",
                "qwen14b-sft",
                idx,
                gpu_nodes[idx][0],
                NOW - timedelta(hours=1, minutes=20),
                resources=res,
                image="registry.corp.example.com/ml/trainer:2025.09",
            )
        )
    cms = [configmap(PLUGIN_NS, "rdma-devices", {"config.json": RDMA_CONFIG}, ds_created)]
    nads = [
        nad(
            "network-operator",
            f"roce-net-{b}",
            RDMA,
            {
                "cniVersion": "0.3.1",
                "name": f"roce-net-{b}",
                "type": "macvlan",
                "master": "enp1s0f0np0",
                "ipam": {"type": "nv-ipam", "poolName": f"pool-{b}"},
            },
            ds_created,
        )
        for b in ("a", "b")
    ]
    return {
        "nodes": klist(nodes),
        "pods": klist(pods),
        "daemonsets": klist([ds]),
        "controllerrevisions": klist(revs),
        "events": klist(events),
        "configmaps": klist(cms),
        "network-attachment-definitions": klist(nads),
    }


def healthy() -> dict[str, dict[str, Any]]:
    """An on-prem InfiniBand cluster where everything the doctor checks is in order."""
    created = NOW - timedelta(days=120)
    nodes, pods = [], []
    sel = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "fabric.example.com/ib": "true"}
    for i in range(4):
        nodes.append(
            node(
                f"dc1-h100-{i:02d}",
                arch="amd64",
                gpus=8,
                labels={**sel, "network.example.com/leaf": "leaf-a" if i < 2 else "leaf-b"},
                created=created + timedelta(days=i),
                allocatable={"rdma/ib": "8"},
                fabric_ready=True,
            )
        )
    ds = daemonset(
        "network-operator",
        "network-operator-sriov-device-plugin",
        image="nvcr.io/nvidia/mellanox/sriov-network-device-plugin:network-operator-v25.4.0",
        created=created,
        node_selector={"fabric.example.com/ib": "true"},
        desired=4,
        ready=4,
    )
    for n in nodes:
        pods.append(ds_pod(ds, n["metadata"]["name"], created + timedelta(days=1), crashing=False))
    for idx in range(2):
        pods.append(
            training_pod(
                "ml-training",
                "llama-70b-pretrain",
                idx,
                nodes[idx]["metadata"]["name"],
                NOW - timedelta(hours=5),
                resources={"nvidia.com/gpu": "8", "rdma/ib": "8"},
                image="nvcr.io/nvidia/pytorch:25.08-py3",
            )
        )
    return {"nodes": klist(nodes), "pods": klist(pods), "daemonsets": klist([ds]), "events": klist([])}


INCIDENT_PROFILE = """\
# The 271-day incident's platform: GH200 (arm64) nodes with RoCE through the NVIDIA Network Operator's
# shared RDMA device plugin (rdma/rdma_shared_device_a), k8s-injection.md §2.3.
apiVersion: fabricguard.io/v1alpha1
kind: PlatformProfile
metadata: {{name: {name}, environment: {env}}}
spec:
  defaultPool: gh200-roce
  pools:
  - name: gh200-roce
    nodeSelector: {{nvidia.com/gpu.product: NVIDIA-GH200-480GB}}
    tolerations:
    - {{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}
    gpusPerNode: 1
    architecture: arm64
    fabric:
      type: roce
      ncclNet: IB
      resources: {{rdma/rdma_shared_device_a: 1}}
      networks: [network-operator/roce-net-a]
      hcas: [mlx5_0, mlx5_1]
      socketIfname: eth0
      ibGidIndex: 3
      devicePlugin: {{namespace: network-operator, daemonSet: rdma-shared-dp-ds}}
      topologyLabel: network.example.com/block
      networkMapping: {{block-a: roce-net-a, block-b: roce-net-b}}
    baseline: {{allReduceBusBwGBps: 45}}
"""


def write(directory: Path, lists: dict[str, dict[str, Any]], profile: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for key, lst in lists.items():
        (directory / f"{key}.json").write_text(json.dumps(lst, indent=4) + "\n", encoding="utf-8")
    (directory / "profile.yaml").write_text(profile, encoding="utf-8")


def main() -> None:
    for env in ("production", "staging"):
        prof = INCIDENT_PROFILE.format(name=f"gh200-{env[:4]}", env=env)
        write(HERE / "incident-271-days" / env, incident(env), prof)
    onprem = (HERE.parent / "profiles" / "onprem-infiniband.yaml").read_text(encoding="utf-8")
    write(HERE / "healthy", healthy(), onprem)


if __name__ == "__main__":
    main()
