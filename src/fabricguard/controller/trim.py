"""What the controller's cache keeps of an object: only what fabricguard reads (client-go's transform on decode).

An object as the API server stores it carries much that no pass reads: ``metadata.managedFields`` (a realistic
managed pod: 64 KiB in memory with them, 28 KiB without; bench/controller/README.md), kubectl's
``last-applied-configuration`` copy of the object, a pod's probes and lifecycle hooks, a node's list of every
image it holds. :func:`trim` drops those, in place, as each list page or watch event is decoded, so 200,000 pods
fit the controller's memory limit. What stays is what the passes and the doctor's rules read; a field added to
a rule must not be in the lists below (``tests/controller/test_trim.py`` checks a pass judges trimmed and
untrimmed objects alike).
"""

from __future__ import annotations

from typing import Any

from fabricguard import names

# Of every container of a pod: how it is started, probed and stopped, its environment and mounts. The passes
# read a container's name, image and resources (GPU accounting, fabric requests, image architecture); the
# webhook reads env and mounts from the AdmissionReview, never from this cache.
_CONTAINER_FIELDS = ("env", "envFrom", "command", "args", "volumeMounts", "volumeDevices", "ports",
                     "livenessProbe", "readinessProbe", "startupProbe", "lifecycle", "terminationMessagePath",
                     "terminationMessagePolicy", "workingDir")
# A pod's hostname and IPs stay: the live view joins a rank's host (what its process sees) and RAS's addresses to
# the pod and node (controller/suspects.py job_pods).
_POD_SPEC_FIELDS = ("volumes", "affinity", "dnsPolicy", "dnsConfig", "enableServiceLinks", "schedulerName",
                    "terminationGracePeriodSeconds", "hostAliases")
_POD_STATUS_FIELDS = ("qosClass",)
_STATUS_CONTAINER_FIELDS = ("volumeMounts", "allocatedResources", "resources", "user")
# A node's images (every image it holds, often 50+ entries with all their tags), attached volumes, kubelet port.
_NODE_STATUS_FIELDS = ("images", "volumesInUse", "volumesAttached", "daemonEndpoints")


# Of a managed job's Succeeded pod, only what its verdict reads (verdict/claims.py): which claims it held and the
# kubelet's health of its devices. No pass accounts GPUs or checks images of a pod that is done.
_FINISHED_META = ("name", "namespace", "uid", "labels", "ownerReferences", "resourceVersion", "creationTimestamp")
_FINISHED_STATUS = ("phase", "resourceClaimStatuses", "extendedResourceClaimStatus")


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _finished(obj: dict[str, Any]) -> None:
    meta, spec, status = (_dict(obj.get(k)) for k in ("metadata", "spec", "status"))
    obj["metadata"] = {k: meta[k] for k in _FINISHED_META if k in meta}
    obj["spec"] = {k: spec[k] for k in ("nodeName", "resourceClaims") if k in spec}
    kept: dict[str, Any] = {k: status[k] for k in _FINISHED_STATUS if k in status}
    health = [{"name": c.get("name"), "allocatedResourcesStatus": c["allocatedResourcesStatus"]}
              for c in status.get("containerStatuses") or ()
              if isinstance(c, dict) and c.get("allocatedResourcesStatus")]
    if health:
        kept["containerStatuses"] = health
    obj["status"] = kept


def trim(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    """``obj`` without what no pass reads (changed in place, and returned)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
        ann = meta.get("annotations")
        if isinstance(ann, dict):
            ann.pop(names.ANN_LAST_APPLIED, None)
    if kind == "Pod":
        status = obj.get("status")
        labels = meta.get("labels") if isinstance(meta, dict) else None
        if (isinstance(status, dict) and status.get("phase") == "Succeeded" and isinstance(labels, dict)
                and names.LABEL_JOB in labels and names.LABEL_CANARY_POOL not in labels):
            _finished(obj)
            return obj
        spec = obj.get("spec")
        if isinstance(spec, dict):
            for f in _POD_SPEC_FIELDS:
                spec.pop(f, None)
            for part in ("initContainers", "containers", "ephemeralContainers"):
                for c in spec.get(part) or ():
                    if isinstance(c, dict):
                        for f in _CONTAINER_FIELDS:
                            c.pop(f, None)
        status = obj.get("status")
        if isinstance(status, dict):
            for f in _POD_STATUS_FIELDS:
                status.pop(f, None)
            for part in ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses"):
                for c in status.get(part) or ():
                    if isinstance(c, dict):
                        for f in _STATUS_CONTAINER_FIELDS:
                            c.pop(f, None)
    elif kind == "Node":
        status = obj.get("status")
        if isinstance(status, dict):
            for f in _NODE_STATUS_FIELDS:
                status.pop(f, None)
    return obj
