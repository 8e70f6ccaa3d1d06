"""No fabric: TCP sockets only (a single-node pool, or one deliberately without a fabric)."""

from fabricguard.fabrics.spec import FabricSpec, Transport

SPEC = FabricSpec(
    type="none",
    summary="no inter-node fabric: NCCL's socket transport",
    nccl_net=None,
    transports=frozenset({Transport.socket, Transport.none}),
    rdma_verbs=False,
    link_layer=None,
    netdevs_required=False,
    device_class=None,
    kernel_modules=(),
    peermem_module=False,
    gpudirect=False,
    net_plugin_globs=(),
    lib_dirs=(),
    host_dirs=(),
    driver_container_root=None,
    driver_without_toolkit=None,
    image_needs="nothing",
    host_userspace=None,
    socket_ifname_exclude=(),
    network_annotation="multus",
    device_plugin_prefixes=(),
    libfabric_providers=(),
    platform="any",
    needs_resources=False,
)
