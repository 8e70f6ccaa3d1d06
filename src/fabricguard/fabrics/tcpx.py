"""GKE A3 High GPUDirect-TCPX: the TCPX NCCL plugin with its rxdm sidecar, the driver from the host.

Not RDMA: no verbs devices, no GPUDirect RDMA warning. Networks through GKE's multi-networking annotation.
"""

from fabricguard.fabrics.spec import FabricSpec, HostMount, HostUserspace, Transport

SPEC = FabricSpec(
    type="tcpx",
    summary="GKE GPUDirect-TCPX (NCCL_NET=GPUDirectTCPX) with the rxdm sidecar",
    nccl_net="GPUDirectTCPX",
    transports=frozenset({Transport.tcpx}),
    rdma_verbs=False,
    link_layer=None,
    netdevs_required=False,
    device_class=None,
    kernel_modules=(),
    peermem_module=False,
    gpudirect=False,
    net_plugin_globs=("libnccl-net*.so*",),
    lib_dirs=("usr/local/tcpx/lib64",),
    host_dirs=("/home/kubernetes/bin",),
    driver_container_root=None,
    driver_without_toolkit="/home/kubernetes/bin/nvidia",
    image_needs="the GPUDirect-TCPX NCCL plugin and its rxdm sidecar (GKE's TCPX guide)",
    host_userspace=HostUserspace(
        mounts=(HostMount("fabricguard-nvidia", "/home/kubernetes/bin/nvidia", "/usr/local/nvidia"),),
        ld_library_path=("/usr/local/nvidia/lib64",),
        env=(),
    ),
    socket_ifname_exclude=(),
    network_annotation="gke",
    device_plugin_prefixes=("networking.gke.io.networks/",),
    libfabric_providers=(),
    platform="gke",
    needs_resources=True,
)
