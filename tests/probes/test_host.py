"""Host probe on fake node trees and on the recorded H200 node (which a fabric pool must refuse)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricguard.probes.host import parse_modules, probe_host
from fabricguard.probes.result import Status
from fabricguard.profile import embedded_profile, load_profile
from fabricguard.userfiles import SourceError

from .conftest import H200, RDMA_MODULES, FakeNode

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "profiles"


@pytest.fixture(scope="module")
def onprem():
    return load_profile(EXAMPLES / "onprem-infiniband.yaml")


def by_name(report):
    return {c.name: c for c in report.checks}


def healthy_ib(node: FakeNode) -> FakeNode:
    for i in range(8):
        node.hca(f"mlx5_{i}")
    return node.modules().mountinfo().lustre_client().lib("usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.50.0")


def test_healthy_infiniband_node_is_ready(node, onprem):
    healthy_ib(node)
    r = probe_host(onprem, onprem.pool("h100-ib"), root=node.root, nvml_json=node.nvml(8))
    assert r.verdict == "ready", [c for c in r.checks if c.status is not Status.passed]
    assert by_name(r)["rdma.ports"].detail.endswith("400 Gb/sec (4X NDR)")


def test_port_down_and_missing_hca_fail_with_reasons(node, onprem):
    healthy_ib(node)
    node.hca("mlx5_3", state="1: DOWN", phys="3: Disabled")
    import shutil

    shutil.rmtree(node.root / "sys/class/infiniband/mlx5_7")
    r = probe_host(onprem, onprem.pool("h100-ib"), root=node.root, nvml_json=node.nvml(8))
    c = by_name(r)
    assert r.verdict == "not ready"
    assert c["rdma.devices"].status is Status.failed and "mlx5_7" in c["rdma.devices"].detail
    assert "mlx5_3/1: 1: DOWN / 3: Disabled" in c["rdma.ports"].detail


def test_unreadable_port_attribute_fails_not_passes(node, onprem):
    healthy_ib(node)
    node.hca("mlx5_0", omit=("rate",))
    (node.root / "sys/class/infiniband/mlx5_0/ports/1/rate").unlink()
    r = probe_host(onprem, onprem.pool("h100-ib"), root=node.root, nvml_json=node.nvml(8))
    assert by_name(r)["rdma.ports"].status is Status.failed
    assert "unreadable" in by_name(r)["rdma.ports"].detail


def test_roce_pool_wants_ethernet_link_layer_and_netdev_up(node, onprem):
    node.hca("mlx5_0", link_layer="Ethernet", rate="200 Gb/sec (4X HDR)", netdev="ens1f0")
    node.hca("mlx5_1", link_layer="InfiniBand", netdev="ens1f1", netdev_state="down")
    node.modules().mountinfo().lib("usr/lib64/libibverbs.so.1")
    pool = onprem.pool("gh200-roce")
    r = probe_host(onprem, pool, root=node.root, nvml_json=node.nvml(pool.gpusPerNode))
    c = by_name(r)
    assert "mlx5_1/1: link layer InfiniBand" in c["rdma.ports"].detail
    assert "ens1f1: operstate down" in c["rdma.netdevs"].detail
    assert "mlx5_0" not in c["rdma.netdevs"].detail


def test_missing_proc_modules_fails(node, onprem):
    healthy_ib(node)
    (node.root / "proc/modules").unlink()
    r = probe_host(onprem, onprem.pool("h100-ib"), root=node.root, nvml_json=node.nvml(8))
    assert by_name(r)["modules"].status is Status.failed


def test_peermem_missing_is_degraded_and_lustre_module_missing_fails(node, onprem):
    healthy_ib(node)
    text = "".join(ln + "\n" for ln in RDMA_MODULES.splitlines() if not ln.startswith(("nvidia_peermem", "lustre")))
    node.modules(text)
    r = probe_host(onprem, onprem.pool("h100-ib"), root=node.root, nvml_json=node.nvml(8))
    c = by_name(r)
    assert c["modules.gpudirect"].status is Status.degraded
    assert c["modules"].status is Status.failed and "lustre (Lustre client)" in c["modules"].detail


def test_lustre_path_on_overlay_fails(node, onprem):
    healthy_ib(node)
    node.mountinfo("22 1 0:21 / / rw,relatime - overlay overlay rw\n")
    r = probe_host(onprem, onprem.pool("h100-ib"), root=node.root, nvml_json=node.nvml(8))
    assert by_name(r)["lustre.mount"].status is Status.failed
    assert "overlay" in by_name(r)["lustre.mount"].detail


def test_gpu_health(node, onprem):
    healthy_ib(node)
    pool = onprem.pool("h100-ib")
    c = by_name(probe_host(onprem, pool, root=node.root, nvml_json=node.nvml(7)))
    assert c["gpu.count"].status is Status.failed and "7 GPU(s)" in c["gpu.count"].detail
    c = by_name(probe_host(onprem, pool, root=node.root, nvml_json=node.nvml(8, remapped_rows="[3, 1, 1, 0]")))
    assert c["gpu.memory"].status is Status.failed and "pending" in c["gpu.memory"].detail
    c = by_name(probe_host(onprem, pool, root=node.root, nvml_json=node.nvml(8, ecc_uncorrected_volatile=2)))
    assert c["gpu.ecc"].status is Status.failed
    c = by_name(
        probe_host(
            onprem,
            pool,
            root=node.root,
            nvml_json=node.nvml(8, remapped_rows="error: NotSupported", retired_pages_dbe="error: NotSupported"),
        )
    )
    assert c["gpu.memory"].status is Status.failed and "neither" in c["gpu.memory"].detail


def test_no_nvml_fails_for_a_gpu_pool(node, onprem, tmp_path):
    healthy_ib(node)
    # No NVML on the node (no driver): the GPU pool's count check fails instead of passing unjudged.
    no_nvml = (None, "NVML is not usable here (NVMLError_LibraryNotFound)")
    r = probe_host(onprem, onprem.pool("h100-ib"), root=node.root, gpu_data=no_nvml)
    assert by_name(r)["gpu.count"].status is Status.failed
    # A recorded-NVML file that is not there is unusable input, not a node without GPUs.
    with pytest.raises(SourceError, match=r"absent\.json: no such file"):
        probe_host(onprem, onprem.pool("h100-ib"), root=node.root, nvml_json=tmp_path / "absent.json")


def test_recorded_h200_node_is_refused_for_every_fabric_pool(h200_root):
    """The real H200 VM: no RDMA devices, no ib_core, no nvidia_peermem, one GPU."""
    for name in ("gke-a3-ultra.yaml", "onprem-infiniband.yaml", "aws-p5-efa.yaml"):
        prof = load_profile(EXAMPLES / name)
        for pool in prof.spec.pools:
            r = probe_host(prof, pool, root=h200_root, nvml_json=H200 / "nvml.json")
            c = by_name(r)
            if not pool.fabric.has_fabric:
                continue
            assert r.verdict == "not ready", (name, pool.name)
            assert c["rdma.devices"].status is Status.failed
            assert "empty" in c["rdma.devices"].detail
            assert c["modules"].status is Status.failed and "ib_core" in c["modules"].detail
            assert c["libs.net_plugin"].status in (Status.failed, Status.skipped)


def test_recorded_h200_gpu_data_reads_clean(h200_root):
    prof = load_profile(EXAMPLES / "gke-a3-ultra.yaml")
    c = by_name(probe_host(prof, prof.pool("h200-rdma"), root=h200_root, nvml_json=H200 / "nvml.json"))
    assert "1 GPU(s)" in c["gpu.count"].detail and c["gpu.count"].status is Status.failed
    assert c["gpu.ecc"].status is Status.passed
    assert c["gpu.memory"].status is Status.passed  # row remapping readable, retired pages NotSupported


def test_local_pool_needs_no_fabric_and_skips_gpus_only_when_told(node):
    prof = embedded_profile("local")
    node.modules("")
    no_nvml = (None, "NVML is not usable here (NVMLError_LibraryNotFound)")
    r = probe_host(prof, prof.pool("local"), root=node.root, gpu_data=no_nvml, require_gpus=False)
    assert r.verdict == "ready"
    assert by_name(r)["gpu.count"].status is Status.skipped
    r = probe_host(prof, prof.pool("local"), root=node.root, gpu_data=no_nvml)
    assert r.verdict == "not ready"


def test_parse_modules():
    assert parse_modules("ib_core 434176 8 mlx5_ib, Live 0x0 (OE)\nfoo 1 0 - Loading 0x0\n") == {
        "ib_core": "Live",
        "foo": "Loading",
    }


def test_rdma_core_in_the_doca_driver_container_root_counts_once_it_is_ready(node, onprem):
    """On-prem with the Network Operator's DOCA/MOFED driver container: the host has no rdma-core, the container
    rbind-mounts its root at /run/mellanox/drivers and writes .driver-ready when its modules are loaded."""
    for i in range(8):
        node.hca(f"mlx5_{i}")
    node.modules().mountinfo().lustre_client()
    pool = onprem.pool("h100-ib")
    c = by_name(probe_host(onprem, pool, root=node.root, nvml_json=node.nvml(8)))["libs.ibverbs"]
    assert c.status is Status.failed and "nor in a driver container root at /run/mellanox/drivers" in c.detail
    node.lib("run/mellanox/drivers/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.50.0")
    c = by_name(probe_host(onprem, pool, root=node.root, nvml_json=node.nvml(8)))["libs.ibverbs"]
    assert c.status is Status.failed and "has no .driver-ready" in c.detail
    (node.root / "run/mellanox/drivers/.driver-ready").write_text("")
    r = probe_host(onprem, pool, root=node.root, nvml_json=node.nvml(8))
    c = by_name(r)["libs.ibverbs"]
    assert c.status is Status.passed and "driver container's root /run/mellanox/drivers" in c.detail
    assert r.verdict == "ready", [x for x in r.checks if x.status is not Status.passed]
    # EFA has no such container: the same tree is not searched there
    from fabricguard.probes.host import ibverbs_check

    efa = load_profile(EXAMPLES / "aws-p5-efa.yaml").pool()
    assert ibverbs_check(efa, node.root).status is Status.failed


def test_a_gpus_nearest_nic_is_the_one_behind_its_pcie_switch(tmp_path):
    from fabricguard.probes.host import nearest_nics

    dev = tmp_path / "sys/devices/pci0000:15/0000:15:01.0"
    (tmp_path / "sys/bus/pci/devices").mkdir(parents=True)
    (tmp_path / "sys/class/infiniband").mkdir(parents=True)
    leaves = {"gpu0": "0000:16:00.0/0000:17:00.0/0000:18:00.0", "nic0": "0000:16:00.0/0000:17:01.0/0000:19:00.0",
              "gpu1": "0000:16:00.0/0000:17:02.0/0000:1a:00.0", "nic1": "0000:16:00.0/0000:17:02.0/0000:1b:00.0"}
    for path in leaves.values():
        (dev / path).mkdir(parents=True)
    for name in ("gpu0", "gpu1"):  # the kernel's relative links, resolved inside the fake root
        (tmp_path / f"sys/bus/pci/devices/{leaves[name][-12:]}").symlink_to(
            f"../../../devices/pci0000:15/0000:15:01.0/{leaves[name]}")
    for i, name in enumerate(("nic0", "nic1")):
        d = tmp_path / f"sys/class/infiniband/mlx5_{i}"
        d.mkdir()
        (d / "device").symlink_to(f"../../../devices/pci0000:15/0000:15:01.0/{leaves[name]}")
    assert nearest_nics(tmp_path, "0000:1a:00.0") == ["mlx5_1"]  # same switch port as its NIC
    assert nearest_nics(tmp_path, "0000:18:00.0") == ["mlx5_0", "mlx5_1"]  # behind one switch: a tie, both named
    assert nearest_nics(tmp_path, "0000:99:00.0") == []
