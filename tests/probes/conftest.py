"""Fake node trees for the host probe: the files a real node exposes, written below tmp_path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lustre_files import lustre_import

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
H200 = FIXTURES / "h200-host"

# /proc/modules lines as a ConnectX + Lustre GPU node prints them.
RDMA_MODULES = """\
nvidia_peermem 16384 0 - Live 0xffffffffc0ff2000 (OE)
mlx5_ib 466944 0 - Live 0xffffffffc0e60000 (OE)
ib_uverbs 163840 2 nvidia_peermem,mlx5_ib, Live 0xffffffffc0e28000 (OE)
ib_core 434176 8 rdma_cm,ib_cm,iw_cm,ib_ipoib,mlx5_ib,ib_uverbs, Live 0xffffffffc0da0000 (OE)
mlx5_core 2170880 1 mlx5_ib, Live 0xffffffffc0a80000 (OE)
lustre 1064960 1 - Live 0xffffffffc1a00000 (OE)
lnet 761856 6 lustre,lmv,mdc,osc,ptlrpc,ksocklnd, Live 0xffffffffc1800000 (OE)
nvidia_uvm 1830912 0 - Live 0xffffffffc080c000 (O)
nvidia 14299136 2 nvidia_peermem,nvidia_uvm, Live 0xffffffffc0400000 (O)
"""

MOUNTINFO_LUSTRE = """\
22 1 0:21 / / rw,relatime - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w
30 22 0:88 / /lustre rw,relatime - lustre 10.1.0.5@tcp:/lfsfs rw,flock,lazystatfs
"""


def write(p: Path, text: str) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


class FakeNode:
    """A node root: call the builders, then point the probe's ``root`` at ``.root``."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / "root"
        self.root.mkdir()

    def modules(self, text: str = RDMA_MODULES) -> FakeNode:
        write(self.root / "proc/modules", text)
        return self

    def mountinfo(self, text: str = MOUNTINFO_LUSTRE) -> FakeNode:
        write(self.root / "proc/self/mountinfo", text)
        return self

    def lustre_client(
        self,
        fsname: str = "lfsfs",
        *,
        osts: int = 2,
        states: dict[str, str] | None = None,
        history: dict[str, list[tuple[int, str]]] | None = None,
        health: str = "healthy",
        layout: str = "sys/kernel/debug/lustre",
        server: str = "10.1.0.5@tcp",
        jobid_var: str = "FG_LUSTRE_JOBID",
    ) -> FakeNode:
        """A mounted Lustre client's files as Lustre 2.15 writes them: ``health_check`` in sysfs, one MDC and
        ``osts`` OSCs with ``import`` and ``state`` in debugfs (``layout``; procfs before 2.15)."""
        write(self.root / "sys/fs/lustre/health_check", health + "\n")
        write(self.root / "sys/fs/lustre/jobid_var", jobid_var + "\n")
        targets = [("mdc", f"{fsname}-MDT0000")] + [("osc", f"{fsname}-OST{i:04x}") for i in range(osts)]
        for kind, target in targets:
            dev = f"{target}-{kind}-ffff8d2c3a4b5000"
            state = (states or {}).get(target, "FULL")
            write(self.root / layout / kind / dev / "import", lustre_import(dev, target, state, server))
            hist = (history or {}).get(target, [(1764590000, "CONNECTING"), (1764590000, "FULL")])
            write(self.root / layout / kind / dev / "state",
                  f"current_state: {state}\nstate_history:\n" + "".join(f" - [ {t}, {st} ]\n" for t, st in hist))
        return self

    def lib(self, rel: str) -> FakeNode:
        write(self.root / rel, "\x7fELF")
        return self

    def hca(
        self,
        name: str,
        *,
        state: str = "4: ACTIVE",
        phys: str = "5: LinkUp",
        link_layer: str = "InfiniBand",
        rate: str = "400 Gb/sec (4X NDR)",
        netdev: str | None = None,
        netdev_state: str = "up",
        omit: tuple[str, ...] = (),
    ) -> FakeNode:
        port = self.root / "sys/class/infiniband" / name / "ports" / "1"
        port.mkdir(parents=True, exist_ok=True)
        for f, v in {"state": state, "phys_state": phys, "link_layer": link_layer, "rate": rate}.items():
            if f not in omit:
                write(port / f, v + "\n")
        if netdev:
            (self.root / "sys/class/infiniband" / name / "device/net" / netdev).mkdir(parents=True, exist_ok=True)
            write(self.root / "sys/class/net" / netdev / "operstate", netdev_state + "\n")
        return self

    def nvml(self, n: int, **overrides: object) -> Path:
        gpu = {
            "index": 0,
            "name": "NVIDIA H100 80GB HBM3",
            "ecc_mode_current": 1,
            "ecc_uncorrected_volatile": 0,
            "remapped_rows": "[0, 0, 0, 0]",
            "retired_pages_dbe": "error: NVMLError_NotSupported: Not Supported",
        }
        p = self.base / "nvml.json"
        p.write_text(json.dumps({"driver": "580.159.04", "gpus": [{**gpu, "index": i, **overrides} for i in range(n)]}))
        return p


@pytest.fixture
def node(tmp_path: Path) -> FakeNode:
    return FakeNode(tmp_path)


@pytest.fixture
def h200_root(tmp_path: Path) -> Path:
    """The recorded H200 node as a tree: its /proc/modules, an empty /sys/class/infiniband, eth0 up."""
    root = tmp_path / "h200"
    write(root / "proc/modules", (H200 / "proc-modules.txt").read_text())
    (root / "sys/class/infiniband").mkdir(parents=True)
    write(root / "sys/class/net/eth0/operstate", "up\n")
    write(root / "proc/self/mountinfo", "22 1 0:21 / / rw,relatime - overlay overlay rw\n")
    return root
