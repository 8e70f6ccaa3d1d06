"""HPE Slingshot end to end (the webhook half: tests/admission/test_admission_slingshot.py), as a fabric type added by one module (fabricguard/fabrics/slingshot.py) and one
example profile: profile check, the node's host checks, the webhook's injection, the scanner's transport from a
``Selected provider is cxi`` log, and a job's verdict on the pool."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabricguard.fabrics import Transport
from fabricguard.nccl.scan import inspect_paths
from fabricguard.probes.host import probe_host
from fabricguard.profile import load_profile
from fabricguard.verdict import Verdict, judge_job
from nccl_logs import Fabric, Job, write_per_rank
from probes.conftest import FakeNode

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "examples" / "profiles" / "hpe-slingshot.yaml"
POOL = "gh200-slingshot"
PLUGIN = "NET/Plugin: Loaded net plugin Libfabric (v9)"
CXI = Fabric("Libfabric", [], ofi_provider="cxi", plugin_line=PLUGIN)
CXI_OVER_TCP = Fabric("Libfabric", [], gdr=False, ofi_provider="tcp", plugin_line=PLUGIN)
EFA = Fabric("Libfabric", [], ofi_provider="efa", plugin_line=PLUGIN)

# /proc/modules of a Slingshot GH200 node: the Cassini driver, its user access module, the NVIDIA driver.
MODULES = """\
cxi_user 106496 4 - Live 0xffff80007a0e0000 (OE)
cxi_ss1 1146880 3 cxi_user,cxi_eth, Live 0xffff800079e00000 (OE)
cxi_eth 98304 0 - Live 0xffff80007a0c0000 (OE)
lustre 1064960 1 - Live 0xffff80007a400000 (OE)
lnet 761856 6 lustre,lmv,mdc,osc,ptlrpc,kkfilnd, Live 0xffff80007a200000 (OE)
nvidia 14299136 2 nvidia_uvm, Live 0xffff800078400000 (O)
"""


@pytest.fixture(scope="module")
def profile():
    return load_profile(PROFILE)


def node_root(base: Path, *, devices: int = 4, modules: str = MODULES, plugin: bool = True) -> Path:
    # a connected Lustre client of the profile's file system (lfs), as tests/probes writes one
    root = FakeNode(base).lustre_client("lfs", server="10.0.0.10@tcp").root
    (root / "proc").mkdir(parents=True, exist_ok=True)
    (root / "proc/modules").write_text(modules)
    (root / "proc/self").mkdir()
    (root / "proc/self/mountinfo").write_text(  # the profile's EXAScaler file system at /lustre
        "22 1 0:21 / / rw,relatime - overlay overlay rw\n"
        "30 22 0:88 / /lustre rw,relatime - lustre 10.0.0.10@tcp:/lfs rw,flock,lazystatfs\n")
    (root / "sys/class/cxi").mkdir(parents=True)
    for i in range(devices):
        (root / "sys/class/cxi" / f"cxi{i}").mkdir()
    if plugin:
        lib = root / "usr/lib64/libnccl-net-ofi.so.1.13.2"
        lib.parent.mkdir(parents=True)
        lib.write_bytes(b"\x7fELF")
    return root


def nvml(base: Path) -> Path:
    gpu = {"name": "NVIDIA GH200 120GB", "ecc_mode_current": 1, "ecc_uncorrected_volatile": 0,
           "remapped_rows": "[0, 0, 0, 0]", "retired_pages_dbe": "error: NVMLError_NotSupported: Not Supported"}
    p = base / "nvml.json"
    p.write_text(json.dumps({"driver": "580.159.04", "gpus": [{**gpu, "index": i} for i in range(4)]}))
    return p


def test_healthy_slingshot_node_is_ready(tmp_path: Path, profile) -> None:
    r = probe_host(profile, profile.pool(POOL), root=node_root(tmp_path), nvml_json=nvml(tmp_path))
    assert r.verdict == "ready", [(c.name, c.detail) for c in r.checks if c.status.value != "passed"]
    names = {c.name: c for c in r.checks}
    assert names["fabric.devices"].data["devices"] == ["cxi0", "cxi1", "cxi2", "cxi3"]
    assert "cxi_ss1" in names["modules"].detail and "libnccl-net-ofi" in names["libs.net_plugin"].detail
    assert "libs.ibverbs" not in names  # Cassini is not a verbs device


@pytest.mark.parametrize(("kwargs", "check", "words"), [
    ({"devices": 0}, "fabric.devices", "no slingshot device"),
    ({"modules": MODULES.replace("cxi_user", "xx_user")}, "modules", "cxi_user (Cassini userspace access)"),
    ({"plugin": False}, "libs.net_plugin", "NCCL_NET=Libfabric fails"),
])
def test_a_broken_slingshot_node_is_refused_naming_why(tmp_path: Path, profile, kwargs, check, words) -> None:
    r = probe_host(profile, profile.pool(POOL), root=node_root(tmp_path, **kwargs), nvml_json=nvml(tmp_path))
    assert r.verdict == "not ready"
    bad = {c.name: c.detail for c in r.checks if c.status.value == "failed"}
    assert words in bad[check], bad


def test_missing_device_class_fails_not_skips(tmp_path: Path, profile) -> None:
    root = node_root(tmp_path)
    (root / "sys/class/cxi").rename(root / "sys/class/cxi.gone")
    r = probe_host(profile, profile.pool(POOL), root=root, nvml_json=nvml(tmp_path))
    assert {c.name: c.status.value for c in r.checks}["fabric.devices"] == "failed"


def _job_logs(tmp_path: Path, fabric: Fabric) -> Path:
    d = tmp_path / "job"
    write_per_rank(Job(nodes=2, gpus_per_node=4, fabric=fabric), d)
    return d


def test_the_scanner_names_cxi_from_the_provider_and_tcp_as_sockets(tmp_path: Path) -> None:
    good = inspect_paths(sorted(_job_logs(tmp_path / "a", CXI).iterdir()))
    assert good.inter_node_transport is Transport.cxi, good.reasons
    assert "cxi" in " ".join(good.reasons)
    tcp = inspect_paths(sorted(_job_logs(tmp_path / "b", CXI_OVER_TCP).iterdir()))
    assert tcp.inter_node_transport is Transport.socket


def test_job_verdicts_on_the_slingshot_pool(tmp_path: Path, profile) -> None:
    v = judge_job(_job_logs(tmp_path / "cxi", CXI), profile, POOL)
    assert v.verdict is Verdict.pass_, [r.message for r in v.reasons]
    tcp = judge_job(_job_logs(tmp_path / "tcp", CXI_OVER_TCP), profile, POOL)
    assert tcp.verdict is Verdict.degraded
    efa = judge_job(_job_logs(tmp_path / "efa", EFA), profile, POOL)
    assert efa.verdict is Verdict.degraded
    assert "expects cxi" in next(r.message for r in efa.reasons if r.check == "transport")
