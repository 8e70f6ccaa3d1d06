"""InfiniBand through NCCL's built-in IB verbs transport (NVIDIA ConnectX, mlx5), on-prem or Azure ND.

Device plugins: the NVIDIA Network Operator's SR-IOV (``rdma/ib``) or shared RDMA plugin (``rdma/shared_ib``,
``rdma/rdma_shared_device_a``), host-device (``nvidia.com/hostdev``) and AKS's ``nvidia.com/mlnxnics``
(k8s-injection.md §2.3; NVIDIA/aicr validators/performance/nccl_aks_utils.go).
"""

from fabricguard.fabrics.spec import FabricSpec, Transport

SPEC = FabricSpec(
    type="infiniband",
    summary="InfiniBand, NCCL's built-in IB verbs transport over ConnectX (mlx5) HCAs",
    nccl_net="IB",
    transports=frozenset({Transport.ib}),
    rdma_verbs=True,
    link_layer="InfiniBand",
    netdevs_required=False,
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
    device_plugin_prefixes=("rdma/", "nvidia.com/rdma", "nvidia.com/hostdev", "nvidia.com/mlnxnics", "mellanox.com/",
                            "openshift.io/"),
    libfabric_providers=(),
    platform="any",
    needs_resources=True,
)
