"""What one fabric type is, in one frozen record: everything fabricguard varies by fabric reads a FabricSpec.

A fabric module (``fabricguard/fabrics/<type>.py``) defines ``SPEC``; the package collects them (see
``fabricguard.fabrics``). Every field is required: a new type cannot be added half-described, and
``tests/foundation/test_fabrics.py`` checks that each spec is complete and that every reader answers for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal


class Transport(StrEnum):
    """Inter-node transport as the NCCL classifier reports it (the words of ``nccl inspect`` and verdicts)."""

    ib = "ib"
    roce = "roce"
    efa = "efa"
    cxi = "cxi"  # HPE Slingshot through libfabric's cxi provider
    tcpx = "tcpx"
    socket = "socket"
    mixed = "mixed"  # nodes selected networks of different kinds: bound by the slowest, never RDMA
    none = "none"
    unknown = "unknown"


# Transports that are a conclusion about the job rather than a fabric's wire.
VERDICT_ONLY = frozenset({Transport.mixed, Transport.none, Transport.unknown})


@dataclass(frozen=True)
class HostMount:
    """A host directory every GPU container of the fabric gets read-only (host userspace, e.g. GKE's gIB)."""

    volume: str
    host_path: str
    mount_path: str


@dataclass(frozen=True)
class HostUserspace:
    """A fabric whose NCCL plugin and libraries come from the host, not the image."""

    mounts: tuple[HostMount, ...]
    ld_library_path: tuple[str, ...]  # prepended in the container, in this order
    env: tuple[tuple[str, str], ...]  # the plugin's own settings; a profile's fabric.env wins


@dataclass(frozen=True)
class FabricSpec:
    """One fabric type. No field has a default: writing a new type means answering every question."""

    type: str  # the profile's `fabric.type` value
    summary: str  # one line: what it is and where the facts come from
    nccl_net: str | None  # NCCL_NET that makes NCCL fail at init instead of falling back to sockets
    transports: frozenset[Transport]  # what a job on this fabric may legitimately report
    rdma_verbs: bool  # devices appear under /sys/class/infiniband (IB verbs: ib, roce, efa)
    link_layer: str | None  # the verbs ports' link_layer the fabric needs (None: not checked)
    netdevs_required: bool  # every RDMA port needs an up netdev (RoCE)
    device_class: str | None  # sysfs class (below /sys/class) that must list the fabric's devices
    kernel_modules: tuple[tuple[str, str], ...]  # (module, why) that must be Live
    peermem_module: bool  # nvidia_peermem is how GPUDirect RDMA reaches its NICs (checked, degraded when absent)
    gpudirect: bool  # GPUDirect RDMA applies: a job whose NIC traffic was staged through host memory is warned
    net_plugin_globs: tuple[str, ...]  # libraries that carry its NCCL net plugin (empty: built into NCCL)
    lib_dirs: tuple[str, ...]  # where its userspace lives below the node root (searched besides the usual)
    host_dirs: tuple[str, ...]  # extra host directories the agent mounts to check it
    # Where a driver container shares its root with the host (NVIDIA Network Operator's DOCA/MOFED driver container
    # rbind-mounts its / at /run/mellanox/drivers): rdma-core may live only there. None: no such container.
    driver_container_root: str | None
    driver_without_toolkit: str | None  # host NVIDIA driver dir when no container toolkit runs (GKE)
    image_needs: str  # what the job's image must carry
    host_userspace: HostUserspace | None  # what the host provides and the webhook mounts
    socket_ifname_exclude: tuple[str, ...]  # interfaces NCCL's socket path must never pick
    network_annotation: Literal["gke", "multus"]  # how a pod names extra networks
    device_plugin_prefixes: tuple[str, ...]  # extended resources a device plugin offers it under
    libfabric_providers: tuple[str, ...]  # libfabric providers that prove this fabric carried the traffic
    platform: Literal["any", "gke", "aws", "hpe"]  # where it runs (preflight's platform checks)
    needs_resources: bool  # a pool must request a device resource (or DRA) to use it

    @property
    def has_fabric(self) -> bool:
        return self.nccl_net is not None

    @property
    def attribute(self) -> str:
        """The Python name of the type (``gke-rdma`` -> ``gke_rdma``)."""
        return self.type.replace("-", "_")
