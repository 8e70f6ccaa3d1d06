"""HPE Slingshot 11 (Cassini NICs) through libfabric's ``cxi`` provider and the aws-ofi-nccl net plugin.

Facts this module rests on:
- the Cassini driver modules are ``cxi-ss1.ko`` and ``cxi-user.ko`` (``cxi_ss1``/``cxi_user`` in /proc/modules)
  and its devices are ``cxi0``, ``cxi1``... (HewlettPackard/shs-cxi-driver: tests, libcxi ``CXIL_DEVNAME_MAX``
  "cxi" + digits); Cassini is not an IB verbs device, so nothing shows under /sys/class/infiniband;
- NCCL reaches it through aws-ofi-nccl (``NCCL_NET=Libfabric``, libnccl-net-ofi.so / libnccl-net.so) with the
  libfabric provider ``cxi``: an NCCL INFO log says ``Selected Provider is cxi``; a provider of ``tcp`` is TCP;
- on Kubernetes the NICs are offered by HPE's CXI device plugin as ``beta.hpe.com/cxi`` with Multus networks
  (HewlettPackard/cxi-k8s-device-plugin README, beta).
"""

from fabricguard.fabrics.spec import FabricSpec, Transport

SPEC = FabricSpec(
    type="slingshot",
    summary="HPE Slingshot (Cassini): libfabric's cxi provider under aws-ofi-nccl (NCCL_NET=Libfabric)",
    nccl_net="Libfabric",
    transports=frozenset({Transport.cxi}),
    rdma_verbs=False,
    link_layer=None,
    netdevs_required=False,
    device_class="cxi",
    kernel_modules=(("cxi_ss1", "Cassini driver"), ("cxi_user", "Cassini userspace access")),
    peermem_module=False,  # Cassini registers GPU memory through DMA-BUF or the vendor's own path
    gpudirect=True,
    net_plugin_globs=("libnccl-net-ofi.so*", "libnccl-net.so*"),
    lib_dirs=("opt/cray/lib64",),
    host_dirs=(),
    driver_container_root=None,
    driver_without_toolkit=None,
    image_needs="libfabric with the cxi provider (libcxi) and aws-ofi-nccl (libnccl-net-ofi.so, NCCL_NET=Libfabric)",
    host_userspace=None,
    socket_ifname_exclude=(),
    network_annotation="multus",
    device_plugin_prefixes=("beta.hpe.com/cxi",),
    libfabric_providers=("cxi",),
    platform="hpe",
    needs_resources=True,
)
