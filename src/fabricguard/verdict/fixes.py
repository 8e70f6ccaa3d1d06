"""The next step for each non-pass reason of a job's verdict, from what the profile knows about the pool.

A reason says what happened; its ``fix`` says what to change, per fabric (GKE RDMA / TCPX, EFA, InfiniBand /
RoCE, DRA), with the pool's own resource names, networks, device plugin and NCCL network. Commands are written
between backticks: the terminal layout (``fabricguard.console``) keeps each on a line of its own, whole.
"""

from __future__ import annotations

from fabricguard.profile.model import FabricType, PlatformProfile, Pool

_INJECT = ("Submit the job through the fabricguard admission webhook (label its namespace for the pool's queue) "
           "so the fabric is injected and a missing fabric fails at start instead of falling back")


def _plugin(pool: Pool) -> str:
    ds = pool.fabric.fabric_daemonset
    if ds is None:
        return ""
    return (" Check the fabric's DaemonSet is ready on the job's nodes: "
            f"`kubectl -n {ds.namespace} get ds {ds.daemonSet}`")


def _resources(pool: Pool) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(pool.fabric.resources.items()))


def transport_fix(pool: Pool) -> str:
    """What to change when a job on ``pool`` did not use the pool's fabric (sockets, mixed, unproven)."""
    f = pool.fabric
    net = f.effective_nccl_net
    force = f" and set NCCL_NET={net}" if net else ""
    if f.dra is not None and f.dra.extendedResourceName is None:
        return (f"{_INJECT}, or give every worker pod a ResourceClaim of DeviceClass {f.dra.deviceClassName} in "
                f"spec.resourceClaims and name it in the container's resources.claims{force}. See which claims the "
                "job's pods hold: `kubectl get resourceclaims -n NAMESPACE -o wide`." + _plugin(pool))
    if f.type is FabricType.gke_rdma:
        nets = ", ".join(f.networks) or "the pool's RDMA networks"
        return (f"{_INJECT}, or add the networking.gke.io/interfaces annotation for {nets} and request "
                f"{_resources(pool) or 'the networking.gke.io.networks/* resources'}{force} with "
                "LD_LIBRARY_PATH including /usr/local/gib/lib64 (GKE's gIB plugin)." + _plugin(pool))
    if f.type is FabricType.tcpx:
        return (f"{_INJECT}, or add the TCPX/TCPXO receive-datapath sidecar, the networking.gke.io/interfaces "
                f"annotation and {_resources(pool) or 'the pool resources'}{force}." + _plugin(pool))
    if f.type is FabricType.efa:
        return (f"{_INJECT}, or request {_resources(pool) or 'vpc.amazonaws.com/efa'} in every worker's limits, "
                f"use an image with the aws-ofi-nccl plugin{force} (a missing plugin then fails at start) and "
                "FI_PROVIDER=efa." + _plugin(pool))
    if f.type in (FabricType.infiniband, FabricType.roce):
        nad = f" and the Multus network(s) {', '.join(f.networks)}" if f.networks else ""
        gid = " For RoCE, check NCCL_IB_GID_INDEX matches the RoCE v2 GID." if f.type is FabricType.roce else ""
        return (f"{_INJECT}, or request {_resources(pool) or 'the RDMA resource'}{nad} in every worker "
                f"(without it the pod has no /dev/infiniband){force}.{gid}" + _plugin(pool))
    return _INJECT + "."


def fix_for(check: str, pool: Pool, profile: PlatformProfile, message: str = "") -> str:
    """The fix of a non-pass reason of ``check`` (the verdict's check names) on ``pool``."""
    f = pool.fabric
    if check in ("transport", "nccl-net"):
        return transport_fix(pool)
    if check == "gpudirect":
        return ("Load nvidia_peermem on the nodes (or use a driver with dma-buf support) and leave "
                "NCCL_NET_GDR_LEVEL unset; `fabricguard probe host -p PROFILE` on a node says which is missing.")
    if check == "nccl":
        return ("Read the first failure in the evidence (its file and line); with the pool's NCCL_NET forced a "
                "missing fabric fails here instead of falling back: " + transport_fix(pool))
    if check in ("busbw", "bandwidth"):
        return (f"Compare the pool's canary: `kubectl describe fabricvalidation {pool.name}`. A canary also below "
                "the floor points at the fabric (a link or rail down: `fabricguard doctor`); a canary at the "
                "floor points at this job's placement or its own settings.")
    if check == "correctness":
        return ("Wrong results on the wire: drain the nodes of this run and run `fabricguard validate -p PROFILE "
                f"--pool {pool.name}` on them before returning them to the pool.")
    if check == "storage":
        lustre = profile.spec.storage.lustre
        where = (f"mount the claim {lustre.claimName} at {lustre.mountPath} in every worker"
                 if lustre is not None else "mount the pool's shared file system in every worker")
        return f"{where.capitalize()} (the webhook adds it for managed jobs), and write checkpoints and data there."
    if check in ("step-time", "total-time"):
        return ("Slow steps with the right transport: look at the busbw and storage reasons above; the dashboard's "
                "job view shows step time beside GPU utilization, RDMA traffic and Lustre latency per node.")
    if check == "logs":
        return ("Pass every rank's log, whole: `kubectl logs` of each worker pod, or the directory NCCL_DEBUG_FILE "
                "wrote into.")
    del f, message
    return ""
