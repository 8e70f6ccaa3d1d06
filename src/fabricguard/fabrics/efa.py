"""AWS Elastic Fabric Adapter through libfabric's efa provider and the aws-ofi-nccl net plugin.

NCCL_NET=Libfabric is the plugin's name for NVIDIA; it ships libnccl-net-ofi.so and libnccl-net.so
(k8s-injection.md §2.2, aws/aws-ofi-nccl src/nccl_ofi_interface_nvidia.cpp). EKS Pod Identity gives every pod
a link-local ``pod-id-link0`` that NCCL's socket path must never pick (an EFA failure falling back over it hangs).
"""

from fabricguard.fabrics.spec import FabricSpec, Transport

SPEC = FabricSpec(
    type="efa",
    summary="AWS EFA: libfabric's efa provider under aws-ofi-nccl (NCCL_NET=Libfabric)",
    nccl_net="Libfabric",
    transports=frozenset({Transport.efa}),
    rdma_verbs=True,
    link_layer=None,
    netdevs_required=False,
    device_class="infiniband",
    kernel_modules=(("ib_core", "RDMA core"), ("efa", "EFA driver")),
    peermem_module=False,  # the efa driver registers GPU memory itself (or through DMA-BUF)
    gpudirect=True,
    net_plugin_globs=("libnccl-net-ofi.so*", "libnccl-net.so*"),
    lib_dirs=("opt/amazon/ofi-nccl/lib", "opt/amazon/efa/lib"),
    host_dirs=("/opt/amazon",),
    driver_container_root=None,
    driver_without_toolkit=None,
    image_needs="libfabric with the EFA provider and aws-ofi-nccl (libnccl-net-ofi.so, NCCL_NET=Libfabric)",
    host_userspace=None,
    socket_ifname_exclude=("pod-id-link",),
    network_annotation="multus",
    device_plugin_prefixes=("vpc.amazonaws.com/efa",),
    libfabric_providers=("efa", "efa-direct"),
    platform="aws",
    needs_resources=True,
)
