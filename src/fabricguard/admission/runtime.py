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

from fabricguard import fabrics
from fabricguard.profile.model import PlatformProfile, Pool

# What the image must carry on fabrics whose userspace is not taken from the host (docs/install.md).
IMAGE_NEEDS: dict[str, str] = {t: spec.image_needs for t, spec in fabrics.SPECS.items()}


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
    """The host directories and variables the pool's fabric needs in every GPU container (a fabric whose plugin
    comes from the host, such as GKE's gIB: ``FabricSpec.host_userspace``); nothing elsewhere."""
    f = pool.fabric
    host = f.spec.host_userspace
    if host is None or not f.has_fabric:
        return PodExtras()
    mine = set(f.env)
    return PodExtras(
        volumes=tuple(_host(m.volume, m.host_path) for m in host.mounts),
        mounts=tuple({"name": m.volume, "mountPath": m.mount_path, "readOnly": True} for m in host.mounts),
        env=(("LD_LIBRARY_PATH", ":".join(host.ld_library_path)), *((k, v) for k, v in host.env if k not in mine)),
    )


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
