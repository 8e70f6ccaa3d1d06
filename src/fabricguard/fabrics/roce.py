"""RoCE v2 through NCCL's built-in IB verbs transport (ConnectX on Ethernet): each RDMA port needs an up netdev.

Device plugins as for InfiniBand (the Network Operator's shared RDMA or SR-IOV plugin; k8s-injection.md §2.3).
An INFO log does not always show the link layer, so a RoCE job may report ``ib``: both are accepted.
"""

from fabricguard.fabrics.spec import FabricSpec, Transport

SPEC = FabricSpec(
    type="roce",
    summary="RoCE v2, NCCL's built-in IB verbs transport over ConnectX (mlx5) on Ethernet",
    nccl_net="IB",
    transports=frozenset({Transport.roce, Transport.ib}),
    rdma_verbs=True,
    link_layer="Ethernet",
    netdevs_required=True,
    device_class="infiniband",
    kernel_modules=(("ib_core", "RDMA core"), ("ib_uverbs", "verbs for userspace"), ("mlx5_ib", "ConnectX driver")),
    peermem_module=True,
    gpudirect=True,
    net_plugin_globs=(),
    lib_dirs=(),
    host_dirs=(),
    driver_container_root="/run/mellanox/drivers",
    driver_without_toolkit=None,
    image_needs="rdma-core: libibverbs and the mlx5 provider (libmlx5)",
    host_userspace=None,
    socket_ifname_exclude=(),
    network_annotation="multus",
    device_plugin_prefixes=("rdma/", "nvidia.com/rdma", "nvidia.com/hostdev", "mellanox.com/", "openshift.io/"),
    libfabric_providers=(),
    platform="any",
    needs_resources=True,
)
