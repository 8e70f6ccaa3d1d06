"""Write the DRA example snapshots: a healthy GKE DRANET pool, a healthy KEP-5004 EFA pool, and a broken DRANET pool.

The ``resource.k8s.io/v1`` objects follow the shapes the drivers publish (written for these examples, not copied):
DRANET (driver ``dra.net``) lists one ResourceSlice per node whose devices carry ``dra.net/*`` attributes as one-key
maps (``{"bool": true}``, ``{"string": "up"}``, ``{"int": 0}``) plus ``resource.kubernetes.io/pcieRoot``; an allocated
NIC is moved into the pod, so its interface attributes (``ifName``, ``state``) leave the slice. GKE's DeviceClasses
``mrdma.google.com``/``netdev.google.com`` and the aws-dranet chart's ``efa.networking.k8s.aws`` select devices with
CEL; the EFA class here also carries KEP-5004's ``extendedResourceName: vpc.amazonaws.com/efa``.

    python examples/snapshots/generate_dra.py     # rewrites examples/snapshots/dra-*/
"""

from __future__ import annotations

import hashlib
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from generate import NOW, ds_pod, event, klist, node, training_pod, ts, uid, write

HERE = Path(__file__).resolve().parent
PROFILES = HERE.parent / "profiles"
DRA_API = "resource.k8s.io/v1"
DRANET_NS, DRANET_DS = "gke-managed-networking-dra-driver", "networking-dra-driver"
DRANET_IMAGE = "gke.gcr.io/networking-dra-driver:v1.4.0-gke.3"
EFA_DS = "aws-dranet"
EFA_IMAGE = "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/dranet:v1.2.0-eksbuild.2"
EFA_DEVICE = "Elastic Fabric Adapter (EFA)"
EXEC_FORMAT = (
    "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create "
    'failed: unable to start container process: exec: "/dranet": exec format error: unknown'
)
CLAIM = "fabricguard-fabric"


def s(v: str) -> dict[str, str]:
    return {"string": v}


def b(v: bool) -> dict[str, bool]:
    return {"bool": v}


def i(v: int) -> dict[str, int]:
    return {"int": v}


def gke_node(name: str, **kw: Any) -> dict[str, Any]:
    """The example Node, with the nodeInfo fields the API server always fills in (strict schema)."""
    n = node(name, **kw)
    h = hashlib.sha1(name.encode()).hexdigest()
    n["status"]["nodeInfo"] |= {"machineID": h[:32], "systemUUID": uid("sys", name), "bootID": uid("boot", name),
                                "kernelVersion": "6.8.0-1015-gke" if "gke" in name else "6.1.119-129.201.amzn2023",
                                "kubeProxyVersion": "", "kubeletVersion": "v1.35.1"}
    return n


def driver_daemonset(ns: str, name: str, image: str, created: datetime, selector: dict[str, str], desired: int,
                     ready: int) -> dict[str, Any]:
    """A DRA driver's DaemonSet: the kubelet plugin sockets instead of the device-plugin directory."""
    status: dict[str, Any] = {"currentNumberScheduled": desired, "desiredNumberScheduled": desired,
                              "numberMisscheduled": 0, "numberReady": ready, "observedGeneration": 1,
                              "updatedNumberScheduled": desired}
    if ready:
        status["numberAvailable"] = ready
    if desired - ready:
        status["numberUnavailable"] = desired - ready
    container = {
        "name": "dranet",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": ["/dranet", "--v=4", "--hostname-override=$(NODE_NAME)"],
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}}],
        "resources": {"requests": {"cpu": "100m", "memory": "50Mi"}},
        "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}},
        "volumeMounts": [
            {"mountPath": "/var/lib/kubelet/plugins", "name": "plugins"},
            {"mountPath": "/var/lib/kubelet/plugins_registry", "name": "plugin-registry"},
            {"mountPath": "/var/run/netns", "mountPropagation": "HostToContainer", "name": "netns"},
        ],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": ns, "uid": uid("ds", ns, name), "resourceVersion": "40211",
                     "generation": 1, "creationTimestamp": ts(created), "labels": {"k8s-app": name},
                     "annotations": {"deprecated.daemonset.template.generation": "1"}},
        "spec": {
            "revisionHistoryLimit": 10,
            "selector": {"matchLabels": {"k8s-app": name}},
            "template": {"metadata": {"labels": {"k8s-app": name}}, "spec": {
                "containers": [container],
                "dnsPolicy": "ClusterFirst",
                "hostNetwork": True,
                "nodeSelector": selector,
                "priorityClassName": "system-node-critical",
                "restartPolicy": "Always",
                "serviceAccountName": name,
                "tolerations": [{"operator": "Exists"}],
                "volumes": [
                    {"hostPath": {"path": "/var/lib/kubelet/plugins", "type": ""}, "name": "plugins"},
                    {"hostPath": {"path": "/var/lib/kubelet/plugins_registry", "type": ""}, "name": "plugin-registry"},
                    {"hostPath": {"path": "/var/run/netns", "type": ""}, "name": "netns"},
                ],
            }},
            "updateStrategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}, "type": "RollingUpdate"},
        },
        "status": status,
    }


def device_class(name: str, expression: str, created: datetime, extended: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expression}}]}
    if extended:
        spec["extendedResourceName"] = extended
    return {"apiVersion": DRA_API, "kind": "DeviceClass",
            "metadata": {"name": name, "uid": uid("dc", name), "resourceVersion": "311", "generation": 1,
                         "creationTimestamp": ts(created)},
            "spec": spec}


def resource_slice(node_name: str, driver: str, devices: list[dict[str, Any]], created: datetime) -> dict[str, Any]:
    prefix = f"{node_name}-{driver.replace('.', '-')}-"
    return {"apiVersion": DRA_API, "kind": "ResourceSlice",
            "metadata": {"name": prefix + hashlib.sha1(node_name.encode()).hexdigest()[:5], "generateName": prefix,
                         "uid": uid("rs", node_name, driver), "resourceVersion": "52007", "generation": 1,
                         "creationTimestamp": ts(created),
                         "ownerReferences": [{"apiVersion": "v1", "controller": True, "kind": "Node",
                                              "name": node_name, "uid": uid("node", node_name)}]},
            "spec": {"driver": driver, "nodeName": node_name,
                     "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}}


def gke_nics(node_index: int, held: set[int], down: set[int] = frozenset()) -> list[dict[str, Any]]:  # type: ignore[assignment]
    """eth0 (gVNIC, no RDMA) and eight CX-7 RDMA NICs, two per PCIe root; held NICs are in a pod (no ifName)."""
    devs = [{"name": "eth0", "attributes": {
        "dra.net/ifName": s("eth0"), "dra.net/rdma": b(False), "dra.net/state": s("up"), "dra.net/mtu": i(8896),
        "dra.net/pciAddress": s("0000:0c:00.0"), "dra.net/numaNode": i(0), "dra.net/virtual": b(False),
        "dra.net/cloudNetwork": s("default"), "resource.kubernetes.io/pcieRoot": s("pci0000:00")}}]
    for n in range(8):
        attrs: dict[str, Any] = {
            "dra.net/rdma": b(True), "dra.net/pciAddress": s(f"0000:{0x91 + n * 0x10:02x}:00.0"),
            "dra.net/pciVendor": s("Mellanox Technologies"),
            "dra.net/pciDevice": s("MT2910 Family [ConnectX-7]"), "dra.net/numaNode": i(0 if n < 4 else 1),
            "dra.net/cloudNetwork": s(f"rdma-{n}"), "dra.net/rdmaDevice": s(f"mlx5_{n}"),
            "resource.kubernetes.io/pcieRoot": s(f"pci0000:{0x8a + (n // 2) * 0x10:02x}"),
        }
        if n not in held:
            attrs |= {"dra.net/ifName": s(f"gpu{n}rdma0"), "dra.net/state": s("down" if n in down else "up"),
                      "dra.net/mtu": i(8896), "dra.net/type": s("device"),
                      "dra.net/mac": s(f"02:00:0a:{node_index:02x}:{n:02x}:01")}
        devs.append({"name": f"gpu{n}rdma0", "attributes": attrs})
    return devs


def efa_devices(count: int = 32) -> list[dict[str, Any]]:
    return [{"name": f"rdmap{16 + n}s27", "attributes": {
        "dra.net/rdma": b(True), "dra.net/pciDevice": s(EFA_DEVICE), "dra.net/pciVendor": s("Amazon.com, Inc."),
        "dra.net/pciAddress": s(f"0000:{0x10 + n:02x}:1b.0"), "dra.net/pciSubsystem": s(f"efa{n}"),
        "dra.net/numaNode": i(0 if n < count // 2 else 1),
        "resource.kubernetes.io/pcieRoot": s(f"pci0000:{(n // 4) * 0x10 + 0x10:02x}")}} for n in range(count)]


def allocated_claim(ns: str, name: str, pod: dict[str, Any], template: str | None, device_class_name: str,
                    driver: str, node_name: str, devices: list[str], created: datetime, request: str = "nic",
                    ) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": uid("rc", ns, name), "resourceVersion": "66120",
                            "creationTimestamp": ts(created),
                            "ownerReferences": [{"apiVersion": "v1", "blockOwnerDeletion": True, "controller": True,
                                                 "kind": "Pod", "name": pod["metadata"]["name"],
                                                 "uid": pod["metadata"]["uid"]}]}
    if template:
        meta["annotations"] = {"resource.kubernetes.io/pod-claim-name": CLAIM}
    claim: dict[str, Any] = {
        "apiVersion": DRA_API, "kind": "ResourceClaim", "metadata": meta,
        "spec": {"devices": {"requests": [{"name": request, "exactly": {
            "deviceClassName": device_class_name, "allocationMode": "ExactCount", "count": len(devices)}}]}},
        "status": {},
    }
    if devices:
        claim["status"] = {
            "allocation": {
                "devices": {"results": [{"request": request, "driver": driver, "pool": node_name, "device": d}
                                        for d in devices]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]},
            },
            "reservedFor": [{"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}],
        }
    return claim


def claim_template(ns: str, name: str, device_class_name: str, count: int, pool: str) -> dict[str, Any]:
    return {"apiVersion": DRA_API, "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": ns, "uid": uid("rct", ns, name), "resourceVersion": "5120",
                         "creationTimestamp": ts(NOW - timedelta(days=20)),
                         "labels": {"app.kubernetes.io/managed-by": "fabricguard", "fabricguard.io/pool": pool}},
            "spec": {"spec": {"devices": {"requests": [{"name": "nic", "exactly": {
                "deviceClassName": device_class_name, "allocationMode": "ExactCount", "count": count}}]}}}}


def kueue_objects(pool: str, selector: dict[str, str], covered: dict[str, str],
                  mapping: tuple[str, str] | None) -> dict[str, dict[str, Any]]:
    rf = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
          "metadata": {"name": pool, "uid": uid("rf", pool), "creationTimestamp": ts(NOW - timedelta(days=30))},
          "spec": {"nodeLabels": dict(selector)}}
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
          "metadata": {"name": pool.split("-")[0], "uid": uid("cq", pool),
                       "creationTimestamp": ts(NOW - timedelta(days=30))},
          "spec": {"namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO", "resourceGroups": [
              {"coveredResources": list(covered),
               "flavors": [{"name": pool,
                            "resources": [{"name": k, "nominalQuota": v} for k, v in covered.items()]}]}]}}
    config = ("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nintegrations:\n  frameworks:\n"
              "  - jobset.x-k8s.io/jobset\n")
    if mapping:
        config += f"resources:\n  deviceClassMappings:\n  - name: {mapping[0]}\n    deviceClassNames: [{mapping[1]}]\n"
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system", "uid": uid("cm", "kueue"),
                       "creationTimestamp": ts(NOW - timedelta(days=30))},
          "data": {"controller_manager_config.yaml": config}}
    return {"resourceflavors": klist([rf]), "clusterqueues": klist([cq]), "configmaps": klist([cm])}


def with_claim(pod: dict[str, Any], claim_name: str, template: str) -> dict[str, Any]:
    pod["spec"]["resourceClaims"] = [{"name": CLAIM, "resourceClaimTemplateName": template}]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": CLAIM}]
    pod["status"]["resourceClaimStatuses"] = [{"name": CLAIM, "resourceClaimName": claim_name}]
    return pod


GKE_SEL = {"cloud.google.com/gke-nodepool": "a4-dranet-1"}
GKE_LABELS = {**GKE_SEL, "cloud.google.com/gke-networking-dra-driver": "true",
              "cloud.google.com/gke-accelerator": "nvidia-b200", "node.kubernetes.io/instance-type": "a4-highgpu-8g"}
GKE_TEMPLATE = "fabricguard-b200-dranet-fabric"


def dranet_healthy() -> dict[str, dict[str, Any]]:
    """Two A4 nodes whose eight RDMA NICs DRANET offers; a JobSet holds all of them through its claims."""
    created = NOW - timedelta(days=40)
    nodes, pods, slices, claims = [], [], [], []
    ds = driver_daemonset(DRANET_NS, DRANET_DS, DRANET_IMAGE, created - timedelta(days=5),
                          {"cloud.google.com/gke-networking-dra-driver": "true"}, 2, 2)
    for n in range(2):
        name = f"gke-a4-dranet-1-{n:02d}"
        nodes.append(gke_node(name, arch="amd64", gpus=8, labels=GKE_LABELS, created=created, allocatable={},
                          fabric_ready=True))
        pods.append(ds_pod(ds, name, created + timedelta(minutes=1), crashing=False))
        slices.append(resource_slice(name, "dra.net", gke_nics(n, held=set(range(8))), created + timedelta(minutes=2)))
        pod = training_pod("ml-search", "ranker-pretrain", n, name, NOW - timedelta(hours=3),
                           resources={"nvidia.com/gpu": "8"}, image="us-docker.pkg.dev/ml/trainer:2026.11")
        claim_name = f"{pod['metadata']['name']}-{CLAIM}-{hashlib.sha1(name.encode()).hexdigest()[:5]}"
        pods.append(with_claim(pod, claim_name, GKE_TEMPLATE))
        claims.append(allocated_claim("ml-search", claim_name, pod, GKE_TEMPLATE, "mrdma.google.com", "dra.net", name,
                                      [f"gpu{k}rdma0" for k in range(8)], NOW - timedelta(hours=3)))
    classes = [
        device_class("mrdma.google.com", 'device.driver == "dra.net" && device.attributes["dra.net"].rdma == true',
                     created - timedelta(days=5)),
        device_class("netdev.google.com", 'device.driver == "dra.net" && device.attributes["dra.net"].rdma == false',
                     created - timedelta(days=5)),
    ]
    out = {"nodes": klist(nodes), "pods": klist(pods), "daemonsets": klist([ds]), "events": klist([]),
           "deviceclasses": klist(classes), "resourceslices": klist(slices), "resourceclaims": klist(claims),
           "resourceclaimtemplates": klist([claim_template("ml-search", GKE_TEMPLATE, "mrdma.google.com", 8,
                                                           "b200-dranet")])}
    out |= kueue_objects("b200-dranet", GKE_SEL, {"nvidia.com/gpu": "32", "mrdma.google.com": "32"},
                         ("mrdma.google.com", "mrdma.google.com"))
    return out


EFA_SEL = {"node.kubernetes.io/instance-type": "p5.48xlarge"}


def efa_healthy() -> dict[str, dict[str, Any]]:
    """Two p5.48xlarge nodes whose 32 EFA devices the EFA DRA driver offers in the KEP-5004 form."""
    created = NOW - timedelta(days=12)
    nodes, pods, slices, claims = [], [], [], []
    ds = driver_daemonset("kube-system", EFA_DS, EFA_IMAGE, created - timedelta(days=2), {}, 2, 2)
    devices = efa_devices()
    for n in range(2):
        name = f"ip-10-1-{40 + n}-17.us-west-2.compute.internal"
        nodes.append(gke_node(name, arch="amd64", gpus=8, labels=EFA_SEL, created=created, allocatable={},
                          fabric_ready=True))
        pods.append(ds_pod(ds, name, created + timedelta(minutes=1), crashing=False))
        slices.append(resource_slice(name, "dra.net", devices, created + timedelta(minutes=2)))
        pod = training_pod("ml-training", "llama-70b-sft", n, name, NOW - timedelta(hours=2),
                           resources={"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"},
                           image="public.ecr.aws/ml/trainer:2026.11")
        claim_name = f"{pod['metadata']['name']}-extended-resources-{hashlib.sha1(name.encode()).hexdigest()[:5]}"
        pod["status"]["extendedResourceClaimStatus"] = {
            "resourceClaimName": claim_name,
            "requestMappings": [{"containerName": "trainer", "resourceName": "vpc.amazonaws.com/efa",
                                 "requestName": "container-0-request-0"}]}
        pods.append(pod)
        claims.append(allocated_claim("ml-training", claim_name, pod, None, "efa.networking.k8s.aws", "dra.net", name,
                                      [d["name"] for d in devices], NOW - timedelta(hours=2),
                                      request="container-0-request-0"))
    cls = device_class("efa.networking.k8s.aws",
                       "device.driver == \"dra.net\" &&\ndevice.attributes[\"dra.net\"].pciDevice == "
                       f"'{EFA_DEVICE}'\n", created - timedelta(days=2), extended="vpc.amazonaws.com/efa")
    return {"nodes": klist(nodes), "pods": klist(pods), "daemonsets": klist([ds]), "events": klist([]),
            "deviceclasses": klist([cls]), "resourceslices": klist(slices), "resourceclaims": klist(claims),
            "resourceclaimtemplates": klist([])}


A4X_SEL = {"cloud.google.com/gke-nodepool": "a4x-max-1"}

A4X_PROFILE = """\
# GKE A4X Max (GB300, arm64): RDMA NICs only through managed DRANET. The driver's image was mirrored
# single-arch (amd64 only), so its DaemonSet has never been ready: no ResourceSlices, claims never allocate.
apiVersion: fabricguard.io/v1alpha1
kind: PlatformProfile
metadata: {name: prod-a4x-max, environment: production}
spec:
  defaultPool: gb300-dranet
  pools:
  - name: gb300-dranet
    nodeSelector: {cloud.google.com/gke-nodepool: a4x-max-1}
    gpusPerNode: 4
    architecture: arm64
    fabric:
      type: gke-rdma
      ncclNet: gIB
      dra:
        deviceClassName: mrdma.google.com
        count: 4
        driverDaemonSet: {namespace: gke-managed-networking-dra-driver, daemonSet: networking-dra-driver}
    queue: {name: gb300}
"""


def dranet_broken() -> dict[str, dict[str, Any]]:
    """A4X Max (arm64): the DRANET DaemonSet never ready for 38 days (exec format error), nothing allocates."""
    ds_created = NOW - timedelta(days=38, hours=4)
    nodes, pods, events, claims = [], [], [], []
    mirror = "registry.corp.example.com/mirror/networking-dra-driver:v1.4.0"
    ds = driver_daemonset(DRANET_NS, DRANET_DS, mirror, ds_created,
                          {"cloud.google.com/gke-networking-dra-driver": "true"}, 2, 0)
    sched = ("0/2 nodes are available: 2 cannot allocate all claims. still not schedulable, preemption: 0/2 nodes are "
             "available: 2 Preemption is not helpful for scheduling.")
    for n in range(2):
        name = f"gke-a4x-max-1-{n:02d}"
        created = NOW - timedelta(hours=5 + 20 * n)
        nodes.append(gke_node(name, arch="arm64", gpus=4, created=created, allocatable={}, fabric_ready=False,
                          labels={**A4X_SEL, "cloud.google.com/gke-networking-dra-driver": "true"}))
        p = ds_pod(ds, name, created + timedelta(seconds=40), crashing=True,
                   restarts=int((NOW - created).total_seconds() // 300))
        pods.append(p)
        events.append(event(p, "Failed", f"Error: {EXEC_FORMAT}", 40, created, NOW - timedelta(minutes=2)))
        pod = training_pod("ml-search", "gb300-pretrain", n, name, NOW - timedelta(hours=2),
                           resources={"nvidia.com/gpu": "4"}, image="us-docker.pkg.dev/ml/trainer:2026.11")
        del pod["spec"]["nodeName"]
        pod["status"] = {"phase": "Pending", "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": sched,
            "lastTransitionTime": ts(NOW - timedelta(hours=2))}]}
        claim_name = f"{pod['metadata']['name']}-{CLAIM}-{hashlib.sha1(name.encode()).hexdigest()[:5]}"
        pods.append(with_claim(pod, claim_name, "fabricguard-gb300-dranet-fabric"))
        claims.append(allocated_claim("ml-search", claim_name, pod, "fabricguard-gb300-dranet-fabric",
                                      "mrdma.google.com", "dra.net", name, [], NOW - timedelta(hours=2)))
    classes = [device_class("mrdma.google.com",
                            'device.driver == "dra.net" && device.attributes["dra.net"].rdma == true', ds_created)]
    out = {"nodes": klist(nodes), "pods": klist(pods), "daemonsets": klist([ds]), "events": klist(events),
           "deviceclasses": klist(classes), "resourceslices": klist([]), "resourceclaims": klist(claims),
           "resourceclaimtemplates": klist([claim_template("ml-search", "fabricguard-gb300-dranet-fabric",
                                                           "mrdma.google.com", 4, "gb300-dranet")])}
    out |= kueue_objects("gb300-dranet", A4X_SEL, {"nvidia.com/gpu": "8"}, None)
    return out


def main() -> None:
    write(HERE / "dra-dranet-healthy", dranet_healthy(), (PROFILES / "gke-a4-dranet.yaml").read_text(encoding="utf-8"))
    write(HERE / "dra-efa-kep5004-healthy", efa_healthy(),
          (PROFILES / "aws-p5-efa-dra.yaml").read_text(encoding="utf-8"))
    write(HERE / "dra-dranet-broken", dranet_broken(), A4X_PROFILE)


if __name__ == "__main__":
    main()
