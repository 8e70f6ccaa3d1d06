"""The agent's RDMA port and Lustre client metrics, read from a node tree at scrape time."""

from __future__ import annotations

import shutil
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from fabricguard.agent.fabric_metrics import FabricCollector, parse_import_state, parse_stats
from fabricguard.agent.metrics import AgentMetrics

HEALTHY = Path(__file__).parent / "fixtures" / "healthy-a3-ultra" / "root"

# Shapes of Lustre 2.15 client files (lctl get_param osc.*.stats / *.import / llite.*.stats).
OSC_STATS = """snapshot_time             1732960000.123456 secs.usecs
req_waittime              2000 samples [usec] 45 9120 1200000 1500000000
req_active                2000 samples [reqs] 1 8 2400 3600
ost_read                  800 samples [usec] 120 8000 400000 300000000
"""
IMPORT = """import:
    name: lustre-OST0000-osc-ffff8d2c3a4b5000
    target: lustre-OST0000_UUID
    state: {state}
    connect_flags: [ write_grant, server_lock ]
"""
LLITE = """snapshot_time             1732960000.123456 secs.usecs
read_bytes                10 samples [bytes] 4096 1048576 5242880
write_bytes               4 samples [bytes] 4096 4194304 8388608
open                      12 samples [usecs]
"""


def _node(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    shutil.copytree(HEALTHY, root)
    port = root / "sys/class/infiniband/mlx5_2/ports/1"
    (port / "counters").mkdir()
    (port / "counters/link_downed").write_text("3\n")
    (port / "counters/symbol_error").write_text("17\n")
    lustre = root / "proc/fs/lustre"
    osc = lustre / "osc/lustre-OST0000-osc-ffff8d2c3a4b5000"
    osc.mkdir(parents=True)
    (osc / "stats").write_text(OSC_STATS)
    (osc / "import").write_text(IMPORT.format(state="FULL"))
    mdc = lustre / "mdc/lustre-MDT0000-mdc-ffff8d2c3a4b5000"
    mdc.mkdir(parents=True)
    (mdc / "import").write_text(IMPORT.format(state="DISCONN"))
    llite = lustre / "llite/lustre-ffff8d2c3a4b5000"
    llite.mkdir(parents=True)
    (llite / "stats").write_text(LLITE)
    return root


def _scrape(root: Path) -> dict[str, float]:
    reg = CollectorRegistry()
    reg.register(FabricCollector(root))
    out = {}
    for line in generate_latest(reg).decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_ports_counters_and_lustre_client(tmp_path: Path) -> None:
    root = _node(tmp_path)
    m = _scrape(root)
    assert m['fabricguard_rdma_port_up{device="mlx5_2",link_layer="Ethernet",port="1"}'] == 1
    assert m['fabricguard_rdma_port_physical_state{device="mlx5_2",port="1"}'] == 5
    assert m['fabricguard_rdma_port_link_downed_total{device="mlx5_2",port="1"}'] == 3
    assert m['fabricguard_rdma_port_symbol_errors_total{device="mlx5_2",port="1"}'] == 17
    assert m['fabricguard_lustre_import_full{state="FULL",target="lustre-OST0000"}'] == 1
    assert m['fabricguard_lustre_import_full{state="DISCONN",target="lustre-MDT0000"}'] == 0
    assert m['fabricguard_lustre_client_rpc_wait_seconds_total{target="lustre-OST0000"}'] == 1.2
    assert m['fabricguard_lustre_client_rpcs_total{target="lustre-OST0000"}'] == 2000
    assert m['fabricguard_lustre_client_read_bytes_total{fs="lustre"}'] == 5242880
    assert m['fabricguard_lustre_client_write_bytes_total{fs="lustre"}'] == 8388608


def test_a_port_that_goes_down_shows_at_the_next_scrape(tmp_path: Path) -> None:
    root = _node(tmp_path)
    port = root / "sys/class/infiniband/mlx5_2/ports/1"
    (port / "state").write_text("1: DOWN\n")
    (port / "phys_state").write_text("3: Disabled\n")
    m = _scrape(root)
    assert m['fabricguard_rdma_port_up{device="mlx5_2",link_layer="Ethernet",port="1"}'] == 0
    assert m['fabricguard_rdma_port_physical_state{device="mlx5_2",port="1"}'] == 3


def test_a_node_without_rdma_or_lustre_exports_no_series(tmp_path: Path) -> None:
    m = _scrape(tmp_path)
    assert not [k for k in m if k.startswith(("fabricguard_rdma", "fabricguard_lustre"))]


def test_parsers() -> None:
    s = parse_stats(OSC_STATS)
    assert s["req_waittime"].samples == 2000 and s["req_waittime"].total == 1200000 and s["req_waittime"].unit == "usec"
    assert "snapshot_time" not in s
    assert parse_stats(LLITE)["open"].total is None
    assert parse_import_state(IMPORT.format(state="EVICTED")) == "EVICTED"
    assert parse_import_state("garbage") is None


def test_the_agent_serves_them_with_its_identity(tmp_path: Path) -> None:
    metrics = AgentMetrics("gke-a3u-0")
    metrics.watch_fabric(_node(tmp_path))
    metrics.identify("gke-a3u-0", "h200-rdma")
    text = generate_latest(metrics.registry).decode()
    assert 'fabricguard_agent_info{node="gke-a3u-0",pool="h200-rdma"} 1.0' in text
    assert "fabricguard_rdma_port_up{" in text and "fabricguard_lustre_import_full{" in text
    metrics.identify("gke-a3u-0", "other")
    text = generate_latest(metrics.registry).decode()
    assert 'pool="h200-rdma"' not in text
