"""What a pod needs on its fabric beyond the resources: the fabric's userspace from the host, and the cluster's own
pod additions. Injected by the webhook into users' workloads and, through the same patch builder, into canaries.

Per fabric type (``shared/reference/k8s-injection.md`` §2, ``ecosystem-2026.md`` "Real-cluster facts"):

- **GKE gIB** (``gke-rdma``): the NCCL gIB plugin and the node's NCCL live on the host in ``/home/kubernetes/bin/gib``
  (installed by the ``nccl-rdma-installer`` DaemonSet) and the driver libraries in ``/home/kubernetes/bin/nvidia``;
  Google's manifests mount them at ``/usr/local/gib`` and ``/usr/local/nvidia`` and set ``LD_LIBRARY_PATH``. Without
  them ``NCCL_NET=gIB`` fails at init, for every job. The plugin's tuning variables are those its
  ``set_nccl_env.sh`` exports, as public job scripts reproduce them ([U] in the reference: the script is not
  public; ``fabric.env`` overrides any of them, and ``docs/install.md`` says how to read the real values).
- **GKE TCPX** (``tcpx``): the driver libraries from the host.
- **EFA**, **InfiniBand**, **RoCE**: the userspace (libfabric and aws-ofi-nccl; rdma-core's libibverbs and the
  mlx5 provider) must be in the image, because host libraries built against the host's glibc cannot be mounted
  into an arbitrary image safely; the device plugin provides the devices. Nothing is injected; the canary image
  per fabric (``Dockerfile.canary``) carries them, and ``docs/install.md`` lists what a training image needs.

``PodAdditions`` (``spec.podAdditions``, ``spec.pools[].podAdditions``) then add the cluster's volumes, mounts, env,
pull secrets and tolerations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fabricguard.profile.model import FabricType, PlatformProfile, Pool

GKE_NVIDIA_HOST = "/home/kubernetes/bin/nvidia"
GKE_GIB_HOST = "/home/kubernetes/bin/gib"
GKE_NVIDIA_MOUNT = "/usr/local/nvidia"
GKE_GIB_MOUNT = "/usr/local/gib"
NVIDIA_VOLUME = "fabricguard-nvidia"
GIB_VOLUME = "fabricguard-gib"
# The gIB plugin's NCCL settings as public job scripts mirror set_nccl_env.sh (k8s-injection.md §2.1, [U]).
GIB_ENV: tuple[tuple[str, str], ...] = (
    ("NCCL_CROSS_NIC", "0"),
    ("NCCL_NET_GDR_LEVEL", "PIX"),
    ("NCCL_P2P_NET_CHUNKSIZE", "131072"),
    ("NCCL_NVLS_CHUNKSIZE", "524288"),
    ("NCCL_IB_ADAPTIVE_ROUTING", "1"),
    ("NCCL_IB_QPS_PER_CONNECTION", "4"),
    ("NCCL_IB_TC", "52"),
    ("NCCL_IB_FIFO_TC", "84"),
)
# What the image must carry on fabrics whose userspace is not taken from the host (docs/install.md).
IMAGE_NEEDS: dict[FabricType, str] = {
    FabricType.efa: "libfabric with the EFA provider and aws-ofi-nccl (libnccl-net-ofi.so, NCCL_NET=Libfabric)",
    FabricType.infiniband: "rdma-core: libibverbs and the mlx5 provider (libmlx5)",
    FabricType.roce: "rdma-core: libibverbs and the mlx5 provider (libmlx5)",
    FabricType.gke_rdma: "nothing fabric-specific: the gIB plugin and NCCL come from the host (/usr/local/gib)",
    FabricType.tcpx: "the GPUDirect-TCPX NCCL plugin and its rxdm sidecar (GKE's TCPX guide)",
    FabricType.none: "nothing",
}


def _host(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "hostPath": {"path": path, "type": "Directory"}}


@dataclass(frozen=True)
class PodExtras:
    """What one pool's pods get besides resources, placement and the fabric's NCCL selection."""

    volumes: tuple[dict[str, Any], ...] = ()
    mounts: tuple[dict[str, Any], ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    pull_secrets: tuple[str, ...] = ()
    tolerations: tuple[dict[str, Any], ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.volumes or self.mounts or self.env or self.pull_secrets or self.tolerations)


NO_EXTRAS = PodExtras()


def fabric_userspace(pool: Pool) -> PodExtras:
    """The host directories and variables the pool's fabric needs in every GPU container (nothing off GKE)."""
    f = pool.fabric
    if f.type is FabricType.gke_rdma and f.has_fabric:
        mine = set(f.env)
        return PodExtras(
            volumes=(_host(NVIDIA_VOLUME, GKE_NVIDIA_HOST), _host(GIB_VOLUME, GKE_GIB_HOST)),
            mounts=({"name": NVIDIA_VOLUME, "mountPath": GKE_NVIDIA_MOUNT, "readOnly": True},
                    {"name": GIB_VOLUME, "mountPath": GKE_GIB_MOUNT, "readOnly": True}),
            env=(("LD_LIBRARY_PATH", f"{GKE_NVIDIA_MOUNT}/lib64:{GKE_GIB_MOUNT}/lib64"),
                 *((k, v) for k, v in GIB_ENV if k not in mine)),
        )
    if f.type is FabricType.tcpx and f.has_fabric:
        return PodExtras(
            volumes=(_host(NVIDIA_VOLUME, GKE_NVIDIA_HOST),),
            mounts=({"name": NVIDIA_VOLUME, "mountPath": GKE_NVIDIA_MOUNT, "readOnly": True},),
            env=(("LD_LIBRARY_PATH", f"{GKE_NVIDIA_MOUNT}/lib64"),),
        )
    return PodExtras()


def extras(profile: PlatformProfile, pool: Pool, *, fabric: bool) -> PodExtras:
    """The pool's fabric userspace (when the workload uses the fabric) followed by the cluster's pod additions."""
    base = fabric_userspace(pool) if fabric else PodExtras()
    add = profile.pod_additions(pool)
    taken = {k for k, _ in base.env}
    return PodExtras(
        volumes=(*base.volumes, *add.volumes),
        mounts=(*base.mounts, *add.volumeMounts),
        env=(*base.env, *((k, v) for k, v in sorted(add.env.items()) if k not in taken)),
        pull_secrets=tuple(add.imagePullSecrets),
        tolerations=tuple(add.tolerations),
    )
