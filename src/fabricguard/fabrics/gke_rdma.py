"""GKE's RDMA networks (A3 Ultra, A4): RoCE through Google's gIB NCCL plugin, which comes from the host.

The plugin and NCCL live in /home/kubernetes/bin/gib on the node; pods mount it at /usr/local/gib with the
NVIDIA driver at /usr/local/nvidia and take the settings set_nccl_env.sh exports (k8s-injection.md §2.1).
Pods name their networks with GKE's multi-networking annotation; nodes offer them without a device resource.
"""

from fabricguard.fabrics.spec import FabricSpec, HostMount, HostUserspace, Transport

GKE_DRIVER = "/home/kubernetes/bin/nvidia"

SPEC = FabricSpec(
    type="gke-rdma",
    summary="GKE RDMA (RoCE v2) through the host's gIB NCCL plugin (NCCL_NET=gIB)",
    nccl_net="gIB",
    transports=frozenset({Transport.roce, Transport.ib}),
    rdma_verbs=True,
    link_layer="Ethernet",
    netdevs_required=True,
    device_class="infiniband",
    kernel_modules=(("ib_core", "RDMA core"), ("ib_uverbs", "verbs for userspace"), ("mlx5_ib", "ConnectX driver")),
    peermem_module=True,
    gpudirect=True,
    net_plugin_globs=("libnccl-net*.so*",),
    lib_dirs=("usr/local/gib/lib64", "home/kubernetes/bin/gib/lib64"),
    host_dirs=("/home/kubernetes/bin",),
    driver_container_root=None,
    driver_without_toolkit=GKE_DRIVER,
    image_needs="nothing fabric-specific: the gIB plugin and NCCL come from the host (/usr/local/gib)",
    host_userspace=HostUserspace(
        mounts=(HostMount("fabricguard-nvidia", GKE_DRIVER, "/usr/local/nvidia"),
                HostMount("fabricguard-gib", "/home/kubernetes/bin/gib", "/usr/local/gib")),
        ld_library_path=("/usr/local/nvidia/lib64", "/usr/local/gib/lib64"),
        env=(("NCCL_CROSS_NIC", "0"), ("NCCL_NET_GDR_LEVEL", "PIX"), ("NCCL_P2P_NET_CHUNKSIZE", "131072"),
             ("NCCL_NVLS_CHUNKSIZE", "524288"), ("NCCL_IB_ADAPTIVE_ROUTING", "1"),
             ("NCCL_IB_QPS_PER_CONNECTION", "4"), ("NCCL_IB_TC", "52"), ("NCCL_IB_FIFO_TC", "84")),
    ),
    socket_ifname_exclude=(),
    network_annotation="gke",
    device_plugin_prefixes=("networking.gke.io.networks/",),
    libfabric_providers=(),
    platform="gke",
    needs_resources=False,
)
