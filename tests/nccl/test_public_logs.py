"""`nccl inspect` on NCCL logs as people paste them in public issues (sources: fixtures/nccl/public/README.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricguard.cli import app
from fabricguard.console import EXIT_FAILED, EXIT_INPUT, EXIT_PASS
from fabricguard.nccl import NcclReport, inspect_paths
from fabricguard.profile import Transport

PUBLIC = Path(__file__).resolve().parents[1] / "fixtures" / "nccl" / "public"


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines()


def assert_evidence_points_at_its_line(r: NcclReport) -> None:
    for e in [*r.evidence, *r.failures, *r.fallbacks]:
        assert lines_of(Path(e.file))[e.line - 1] == e.text, e


# "nodes": the exact count ("2"), a lower bound from the hosts seen ("≥ 2") or unknown ("?").
@pytest.mark.parametrize(
    ("case", "failed", "transport", "nodes"),
    [
        ("aws-ofi-nccl-889", False, Transport.socket, "≥ 1"),
        ("aws-ofi-nccl-715", False, Transport.socket, "≥ 1"),
        ("nccl-1653", False, Transport.none, "1"),
        ("nccl-367", False, Transport.socket, "≥ 1"),
        ("nccl-131", False, Transport.none, "1"),
        ("fastsocket-4", False, Transport.socket, "≥ 2"),
        ("nccl-1519", False, Transport.socket, "≥ 1"),
        ("nccl-1405", True, Transport.unknown, "≥ 1"),
        ("nccl-tests-373", True, Transport.roce, "3"),
        ("nccl-tests-176", False, Transport.unknown, "?"),
        ("nccl-tests-287", False, Transport.none, "1"),
        ("nccl-226", False, Transport.socket, "≥ 8"),
        ("nccl-229", False, Transport.unknown, "≥ 2"),
        ("llamafactory-7396", True, Transport.unknown, "?"),
        ("pytorch-118369", True, Transport.unknown, "?"),
        ("nccl-tests-133", False, Transport.roce, "≥ 2"),
        ("ompi-13317", False, Transport.unknown, "≥ 2"),
        ("nccl-983", False, Transport.unknown, "≥ 2"),
        ("nccl-tests-107", False, Transport.unknown, "≥ 2"),
        ("nccl-293", True, Transport.unknown, "1"),
        ("nvfuser-3055", False, Transport.unknown, "≥ 1"),
        ("nccl-2397", False, Transport.none, "1"),
    ],
)
def test_every_public_log(case: str, failed: bool, transport: Transport, nodes: str) -> None:
    r = inspect_paths([PUBLIC / case])
    assert r.failed is failed, (r.failures, r.fallbacks)
    assert r.inter_node_transport is transport, r.reasons
    assert r.nodes_text == nodes, (r.nodes, r.nodes_at_least, r.hosts)
    assert r.nccl_output
    assert_evidence_points_at_its_line(r)


# --- failed means the job failed --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "quoted"),
    [
        ("aws-ofi-nccl-889", "NET/OFI aws-ofi-nccl initialization failed"),
        ("aws-ofi-nccl-715", "NET/OFI aws-ofi-nccl initialization failed"),
        ("nccl-367", "Failed to open libibverbs.so[.1]"),
    ],
)
def test_plugin_that_failed_to_start_then_fallback_is_evidence_not_failure(case: str, quoted: str) -> None:
    r = inspect_paths([PUBLIC / case])
    assert not r.failed and not r.failures
    assert any(quoted in f.why and "NCCL then used network Socket" in f.why for f in r.fallbacks), r.fallbacks
    assert any("fell back" in x for x in r.reasons)
    assert {f.text for f in r.fallbacks} <= {e.text for e in r.evidence}


def test_plugin_warn_without_any_other_network_is_a_failure(tmp_path: Path) -> None:
    # The same WARNs with nothing selected afterwards: NCCL had no network to fall back to.
    src = lines_of(PUBLIC / "aws-ofi-nccl-889" / "cloudwatch.log")
    log = tmp_path / "no-fallback.log"
    log.write_text("\n".join(line for line in src if "NCCL WARN" in line) + "\n")
    r = inspect_paths([log])
    assert r.failed and not r.fallbacks
    assert "aws-ofi-nccl initialization failed" in " ".join(f.why for f in r.failures)


def test_plugin_warn_on_the_network_it_then_used_is_a_failure(tmp_path: Path) -> None:
    # A NET/OFI error from a process that selected the libfabric network is no fallback.
    log = tmp_path / "efa.log"
    log.write_text(
        "ip-10-0-1-5:35:35 [0] NCCL INFO Using network Libfabric\n"
        "ip-10-0-1-5:35:90 [0] nccl_net_ofi_rdma.c:100 NCCL WARN NET/OFI Request completed with error. RC: 21\n"
    )
    r = inspect_paths([log])
    assert r.failed and not r.fallbacks
    assert "Request completed with error. RC: 21" in r.failures[0].why


def test_a_warn_after_the_network_was_chosen_is_no_fallback(tmp_path: Path) -> None:
    log = tmp_path / "init-error.log"
    log.write_text(
        "n1:7:7 [0] NCCL INFO Using network IB\n"
        "n1:7:9 [0] init.cc:1 NCCL WARN Error while initializing the communicator: bootstrap timed out\n"
    )
    r = inspect_paths([log])
    assert r.failed and not r.fallbacks


@pytest.mark.parametrize(
    ("case", "quoted", "line"),
    [
        ("nccl-1405", "Got completion from peer 10.216.210.236<54862> with status=12", 1),
        ("nccl-tests-373", "socketFinalizeAccept: wrong type 3 != 4", 19),
        ("llamafactory-7396", "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580", 1),
        ("pytorch-118369", "ran for 25624887 milliseconds before timing out", 1),
    ],
)
def test_failure_reasons_quote_the_failing_line(case: str, quoted: str, line: int) -> None:
    r = inspect_paths([PUBLIC / case])
    first = r.failures[0]
    assert quoted in first.why
    assert first.line == line
    assert any("first:" in x and quoted in x for x in r.reasons), r.reasons


def test_notices_printed_as_warn_are_not_failures(tmp_path: Path) -> None:
    log = tmp_path / "notices.log"
    log.write_text(
        "n1:7:7 [0] NCCL INFO Using network IB\n"
        "n1:7:9 [0] NCCL WARN NET/IB : mlx5_0:1 Got async event : port active\n"
        "n1:7:9 [0] NCCL WARN Invalid value abc for NCCL_BUFFSIZE, using default 4194304\n"
        "n1:7:9 [0] enqueue.cc:1 NCCL WARN NUMA auto balancing enabled which can lead to variability\n"
    )
    assert not inspect_paths([log]).failed
    log.write_text(
        "n1:7:7 [0] NCCL INFO Using network IB\nn1:7:9 [0] NCCL WARN NET/IB : Got async event : port error\n"
    )
    assert inspect_paths([log]).failed


def test_benign_warnings_are_not_failures() -> None:
    # FastSocket "Cannot get incoming CPU" / "Maximum retry reached" and the topology search notice.
    for case in ("fastsocket-4", "nccl-131"):
        r = inspect_paths([PUBLIC / case])
        assert not r.failed and not r.failures, case


# --- nccl-tests ------------------------------------------------------------------------------------


def test_old_error_column_is_a_magnitude_not_a_count() -> None:
    r = inspect_paths([PUBLIC / "nccl-tests-176"])
    (t,) = r.nccl_tests
    assert len(t.rows) == 6
    assert {row.oop_max_error for row in t.rows} == {1e-06}
    assert all(row.oop_wrong is None and row.ip_wrong is None for row in t.rows)
    assert t.wrong is None and not r.failed
    assert t.to_dict()["rows"][0]["out_of_place"]["max_error"] == 1e-06


def test_old_table_verdict_is_the_out_of_bounds_line(tmp_path: Path) -> None:
    text = (PUBLIC / "nccl-tests-176" / "all_reduce_128gpu.log").read_text().replace("1e-06", "5e-07")
    ok = tmp_path / "ok.log"
    ok.write_text(text + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.8 \n")
    r = inspect_paths([ok])
    assert not r.failed and r.nccl_tests[0].wrong == 0 and r.nccl_tests[0].out_of_bounds == 0
    bad = tmp_path / "bad.log"
    bad.write_text(text + "# Out of bounds values : 24 FAILED\n# Avg bus bandwidth    : 0.8 \n")
    r = inspect_paths([bad])
    assert r.failed and r.nccl_tests[0].wrong == 24
    assert "Out of bounds values : 24 FAILED" in r.failures[0].why and r.failures[0].line == 12


def test_current_table_out_of_bounds_and_host() -> None:
    r = inspect_paths([PUBLIC / "nccl-tests-287"])
    (t,) = r.nccl_tests
    assert t.collective == "alltoall_perf" and t.out_of_bounds == 0 and t.wrong == 0
    assert t.rows[0].ip_wrong is None and t.rows[0].oop_wrong == 0
    assert r.nodes == 1  # "#  Rank  0 Group  0 Pid 2181762 on   GENOA-01 device  0"


# --- networks that are TCP under another name ------------------------------------------------------


def test_fastsocket_is_sockets() -> None:
    r = inspect_paths([PUBLIC / "fastsocket-4"])
    assert r.inter_node_transport is Transport.socket
    assert "FastSocket" in r.reasons[0] and "TCP" in r.reasons[0]
    one = inspect_paths([PUBLIC / "nccl-1519"])
    assert one.nccl_version == ["2.20.5+cuda12.4"] and not one.failed


def test_fastsocket_connections_are_sockets(tmp_path: Path) -> None:
    log = tmp_path / "gke.log"
    log.write_text(
        "a3-0:1:9 [0] NCCL INFO NET/Plugin: Loaded net plugin FastSocket (v6)\n"
        "a3-0:1:9 [0] NCCL INFO Using network FastSocket\n"
        "a3-0:1:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/FastSocket/0\n"
        "a3-1:1:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [receive] via NET/FastSocket/0\n"
    )
    r = inspect_paths([log])
    assert r.inter_node_transport is Transport.socket and r.connections == {"NET/FastSocket": 2}


@pytest.mark.parametrize(
    "provider_line",
    [
        "NET/OFI Selected provider is tcp, fabric is 10.0.0.0/16 (found 1 nics)",
        "NET/OFI Selected Provider is tcp;ofi_rxm",
    ],
)
def test_libfabric_tcp_provider_is_sockets_without_connection_lines(tmp_path: Path, provider_line: str) -> None:
    # Built from the aws-ofi-nccl line shapes of aws/aws-ofi-nccl#715 and #889: two hosts, no connection lines.
    log = tmp_path / "ofi-tcp.log"
    log.write_text(
        "".join(
            f"ip-10-0-{n}-5:80:2500 [0] NCCL INFO {line}\n"
            for n in (1, 2)
            for line in ("NET/Plugin: Loaded net plugin Libfabric (v9)", provider_line, "Using network Libfabric")
        )
    )
    r = inspect_paths([log])
    assert r.nodes is None and r.nodes_at_least == 2  # two hosts seen: a floor, not a count
    assert r.inter_node_transport is Transport.socket
    assert "TCP, not EFA" in r.reasons[0]


# --- device lists, node counting ------------------------------------------------------------------


def test_merged_nic_device_list_gives_the_link_layer() -> None:
    r = inspect_paths([PUBLIC / "nccl-tests-373"])
    assert {(d.index, d.name, d.link_layer) for d in r.net_devices} == {
        (0, "mlx5_2", "RoCE"),
        (1, "mlx5_3", "RoCE"),
        (2, "mlx5_0", "RoCE"),
        (3, "mlx5_1", "RoCE"),
    }
    assert r.inter_node_transport is Transport.roce
    assert r.network == "IBext_v8" and r.connections == {"NET/IBext_v8": 4}


def test_hosts_count_from_every_prefixed_line(tmp_path: Path) -> None:
    # Two hosts seen only in NET/OFI, NET/Plugin and Using network lines: two nodes, and a network
    # chosen on two nodes without connection lines proves nothing: unknown, never none.
    log = tmp_path / "init.log"
    log.write_text(
        "node-a:11:12 [0] NCCL INFO NET/Plugin: Loaded net plugin IBext_v8 (v8)\n"
        "node-b:21:22 [0] NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.13.2\n"
        "node-a:11:12 [0] NCCL INFO Using network IB\n"
        "node-b:21:22 [0] NCCL INFO Using network IB\n"
    )
    r = inspect_paths([log])
    assert r.nodes is None and r.nodes_at_least == 2
    assert r.inter_node_transport is Transport.unknown
    assert "at least 2 nodes" in r.reasons[0]


def test_hosts_of_lines_that_carry_no_fact_count_too(tmp_path: Path) -> None:
    log = tmp_path / "boot.log"
    log.write_text(
        "node-a:11:11 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
        "node-b:21:21 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n"
        "node-c:31:35 [0] NCCL INFO transport/net.cc:1302 -> 6\n"
        "node-a:11:12 [0] NCCL INFO Using network IB\n"
    )
    assert inspect_paths([log]).nodes_at_least == 3


def test_nccl_226_counts_hosts_from_net_lines_only() -> None:
    r = inspect_paths([PUBLIC / "nccl-226"])
    assert r.nodes_at_least == 8 and r.nodes is None and r.network is None
    assert "Socket" in r.reasons[0]


def test_dense_and_sparse_chunks_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    # A chunk with many fact lines takes the bulk path (hosts from "Using network" lines); both paths
    # must reach the same report.
    import fabricguard.nccl.scan as scan

    synthetic = PUBLIC.parent / "synthetic"
    dirs = [synthetic / d for d in ("ib-2x2-2.3", "ib-2x2-2.7", "socket-fallback-2x4", "efa-2x8")]
    sparse = [inspect_paths([d]).to_dict() for d in dirs]
    monkeypatch.setattr(scan, "DENSE_FACT_LINES", 0)
    dense = [inspect_paths([d]).to_dict() for d in dirs]
    assert sparse == dense


# --- exit codes -------------------------------------------------------------------------------------


def test_exit_codes() -> None:
    runner = CliRunner()
    failed = runner.invoke(app, ["nccl", "inspect", str(PUBLIC / "nccl-1405")])
    assert failed.exit_code == EXIT_FAILED, failed.output
    assert "status=12" in failed.output
    fallback = runner.invoke(app, ["nccl", "inspect", str(PUBLIC / "aws-ofi-nccl-889"), "--json"])
    assert fallback.exit_code == EXIT_PASS, fallback.output
    d = json.loads(fallback.output)
    assert d["failed"] is False and d["fallbacks"] and d["nccl_output"] is True


@pytest.mark.parametrize(
    "content", [os.urandom(4096), b"", b"apiVersion: v1\nkind: ConfigMap\ndata:\n  NCCL_DEBUG: INFO\n"]
)
def test_no_nccl_output_is_unusable_input(tmp_path: Path, content: bytes) -> None:
    f = tmp_path / "input.txt"
    f.write_bytes(content)
    res = CliRunner().invoke(app, ["nccl", "inspect", str(f)])
    assert res.exit_code == EXIT_INPUT, res.output
    assert "no NCCL output found" in res.output and "input.txt" in res.output
    assert "Traceback" not in res.output
