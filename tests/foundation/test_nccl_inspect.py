"""NCCL log intelligence on real H200 logs and on multi-node logs written after the real formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricguard.cli import app
from fabricguard.nccl import LogInputError, inspect_paths
from fabricguard.profile import Transport

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"
REAL = FIX / "h200-2.28.9"
SYN = FIX / "synthetic"


# --- real NCCL 2.28.9 on an H200 without RDMA ---------------------------------------------------


def test_real_default_run_selects_socket_silently() -> None:
    r = inspect_paths([REAL / "default-1rank.log"])
    assert r.nccl_version == ["2.28.9+cuda13.0"]
    assert r.network == "Socket"
    assert r.failed is False
    assert r.nodes == 1 and r.ranks == 1
    assert r.inter_node_transport is Transport.none
    assert r.gpudirect_rdma is False  # "NET/Socket : GPU Direct RDMA Disabled for HCA 0 'eth0'"
    lines = {e.line for e in r.evidence}
    assert 17 in lines  # "Using network Socket" is line 17 of the file


def test_real_forced_ib_fails_loudly() -> None:
    r = inspect_paths([REAL / "net-ib-forced-1rank.log"])
    assert r.failed is True
    assert r.network is None
    assert r.inter_node_transport is Transport.unknown
    assert any("refused to fall back" in f.why for f in r.failures)
    assert any(f.line == 14 for f in r.failures)  # the WARN line


def test_real_ib_disabled_and_socket_forced_are_socket_runs() -> None:
    for name in ("ib-disabled-1rank.log", "net-socket-forced-1rank.log"):
        r = inspect_paths([REAL / name])
        assert r.network == "Socket", name
        assert r.failed is False
        assert r.inter_node_transport is Transport.none


def test_real_duplicate_gpu_is_a_failure() -> None:
    r = inspect_paths([REAL / "dup-gpu-2ranks.log"])
    assert r.failed is True
    assert r.ranks == 2
    assert any("Duplicate GPU" in f.text for f in r.failures)
    assert r.inter_node_transport is Transport.unknown


# --- multi-node ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "transport", "network", "gdr", "nodes", "ranks"),
    [
        ("ib-2x4-2.21.5", Transport.ib, "IB", True, 2, 8),
        ("roce-2x2-kubectl", Transport.roce, "IB", True, 2, 4),
        ("gib-2x8", Transport.roce, "gIB", True, 2, 16),
        ("efa-2x8", Transport.efa, "Libfabric", True, 2, 16),
        ("tcpx-2x8", Transport.tcpx, "GPUDirectTCPX", False, 2, 16),
        ("socket-fallback-2x4", Transport.socket, "Socket", False, 2, 8),
        ("efa-tcp-provider-2x8", Transport.socket, "Libfabric", False, 2, 16),
        ("mixed-ib-socket-2x2", Transport.socket, "IB,Socket", False, 2, 4),
        ("thin-ib-2x2", Transport.ib, "IB", True, 2, 4),  # inferred: every node selected IB,
        ("ib-2x2-2.7", Transport.ib, "IB", True, 2, 4),
        ("ib-2x2-2.3", Transport.ib, "IB", True, 2, 4),
    ],
)
def test_multi_node_cases(
    case: str, transport: Transport, network: str, gdr: bool, nodes: int, ranks: int
) -> None:
    r = inspect_paths([SYN / case])
    assert r.inter_node_transport is transport, r.reasons
    assert r.network == network
    assert r.gpudirect_rdma is gdr
    assert (r.nodes, r.ranks) == (nodes, ranks)
    assert r.failed is False
    assert r.evidence, "every verdict must carry evidence"
    for e in r.evidence:
        assert Path(e.file).exists() and e.line > 0
        assert Path(e.file).read_text().splitlines()[e.line - 1] == e.text


def test_socket_is_never_called_rdma_when_mixed() -> None:
    r = inspect_paths([SYN / "mixed-ib-socket-2x2"])
    assert r.inter_node_transport is Transport.socket
    assert "NET/Socket" in r.reasons[0]
    assert r.connections["NET/Socket"] == 8
    assert r.connections["NET/IB/GDRDMA"] == 8


def test_roce_link_layer_and_devices() -> None:
    r = inspect_paths([SYN / "roce-2x2-kubectl"])
    assert {d.link_layer for d in r.net_devices} == {"RoCE"}
    assert {d.name for d in r.net_devices} == {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}


def test_intra_node_transports() -> None:
    assert inspect_paths([SYN / "ib-2x4-2.21.5"]).intra_node == ["P2P/CUMEM"]
    assert inspect_paths([SYN / "ib-2x2-2.7"]).intra_node == ["P2P/IPC"]


def test_prefixes_and_timestamps_do_not_hide_lines(tmp_path: Path) -> None:
    src = (SYN / "ib-2x4-2.21.5" / "gpu-node-001.4004.log").read_text().splitlines()
    prefixed = [f"[pod/train-worker-1/pytorch] 2026-11-20T10:00:00.000000001Z {line}" for line in src]
    mpi = [f"[1,4]<stdout>:{line}" for line in src]
    (tmp_path / "a.log").write_text("\n".join(prefixed) + "\n")
    (tmp_path / "b.log").write_text("\n".join(mpi) + "\n")
    for f in ("a.log", "b.log"):
        r = inspect_paths([tmp_path / f])
        assert r.inter_node_transport is Transport.ib
        assert r.nodes == 2 and r.ranks == 8


def test_aws_ofi_old_ring_format(tmp_path: Path) -> None:
    # NCCL 2.4 with aws-ofi-nccl: the plugin name contains a space.
    log = tmp_path / "efa-old.log"
    log.write_text(
        "ip-10-0-1-5:35480:35480 [0] NCCL INFO NET/OFI Selected Provider is efa\n"
        "ip-10-0-1-5:35480:35480 [0] NCCL INFO Using network AWS Libfabric\n"
        "NCCL version 2.4.8+cuda10.1\n"
        "ip-10-0-1-5:35480:35545 [0] NCCL INFO Ring 00 : 15 -> 0 [receive] via NET/AWS Libfabric/0\n"
        "ip-10-0-2-9:26465:26533 [0] NCCL INFO Ring 00 : 7 -> 8 [receive] via NET/AWS Libfabric/0\n"
        "ip-10-0-2-9:26465:26533 [0] NCCL INFO Ring 00 : 8[0] -> 9[1] via P2P/IPC\n"
    )
    r = inspect_paths([log])
    assert r.inter_node_transport is Transport.efa
    assert r.network == "AWS Libfabric"
    assert r.nccl_version == ["2.4.8+cuda10.1"]
    assert r.gpudirect_rdma is False
    assert r.nodes is None and r.nodes_at_least == 2  # two hosts seen, no line states the count


def test_efa_without_provider_line_is_unknown(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text(
        "a:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Libfabric/0/GDRDMA\n"
        "b:2:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [receive] via NET/Libfabric/0/GDRDMA\n"
    )
    assert inspect_paths([log]).inter_node_transport is Transport.unknown


def test_older_network_not_found_warning(tmp_path: Path) -> None:
    log = tmp_path / "old.log"
    log.write_text("n1:7:7 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\nn1:7:9 [0] net.cc:512 NCCL WARN Error: network gIB not found.\n")
    r = inspect_paths([log])
    assert r.failed and "network gIB not found" in r.failures[0].why


def test_collective_failure_outside_nccl_prefix(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(
        "step 10 loss 2.31\n"
        "[rank3]:[E1120 10:00:00.000 ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=42, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.\n"
    )
    r = inspect_paths([log])
    assert r.failed
    assert r.failures[0].line == 2


def test_benign_warning_is_not_failure(tmp_path: Path) -> None:
    log = tmp_path / "w.log"
    log.write_text("n:1:1 [0] NCCL WARN NUMA auto balancing enabled which can lead to variability\n")
    assert inspect_paths([log]).failed is False


# --- nccl-tests -------------------------------------------------------------------------------------


def test_nccl_tests_table() -> None:
    r = inspect_paths([SYN / "nccl-tests" / "all_reduce_perf-ib-2x8.log"])
    (t,) = r.nccl_tests
    assert t.collective == "all_reduce_perf"
    assert len(t.rows) == 16
    first = t.rows[0]
    assert (first.size, first.type, first.redop, first.root) == (8, "float", "sum", -1)
    assert t.peak_busbw_gbps == pytest.approx(354.65, abs=0.01)
    assert t.avg_busbw_gbps == pytest.approx(122.0385)
    assert t.wrong == 0
    assert r.inter_node_transport is Transport.ib
    assert r.failed is False


def test_nccl_tests_without_validation_and_with_wrong_results() -> None:
    (t,) = inspect_paths([SYN / "nccl-tests" / "all_gather-no-validation.log"]).nccl_tests
    assert t.collective == "all_gather_perf" and t.wrong is None and t.rows[0].redop == "none"
    r = inspect_paths([SYN / "nccl-tests" / "all_reduce-wrong.log"])
    assert r.nccl_tests[0].wrong == 34
    assert r.failed


def test_old_nccl_tests_error_column(tmp_path: Path) -> None:
    log = tmp_path / "old_perf.log"
    log.write_text(
        "# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
        "#                                                     out-of-place                       in-place\n"
        "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
        "#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n"
        "           8             2   float     sum    38.18    0.00    0.00  0e+00    37.84    0.00    0.00  0e+00\n"
        "   134217728      33554432   float     sum   1201.1  111.75  195.56  0e+00   1199.7  111.88  195.79  0e+00\n"
        "# Out of bounds values : 0 OK\n"
        "# Avg bus bandwidth    : 97.8 \n"
    )
    (t,) = inspect_paths([log]).nccl_tests
    assert t.collective == "old_perf"  # from the file name, the only place this old output names it
    assert t.rows[1].root is None and t.rows[1].oop_busbw == pytest.approx(195.56)
    assert t.wrong == 0 and t.avg_busbw_gbps == pytest.approx(97.8)


# --- input errors and CLI -----------------------------------------------------------------------------


def test_missing_path_is_named() -> None:
    with pytest.raises(LogInputError, match=r"nope\.log: no such file"):
        inspect_paths([Path("/nonexistent/nope.log")])


def test_cli_json_has_contract_keys() -> None:
    res = CliRunner().invoke(app, ["nccl", "inspect", str(SYN / "socket-fallback-2x4"), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    for key in ("nccl_version", "network", "inter_node_transport", "gpudirect_rdma", "intra_node", "failed",
                "nodes", "ranks", "evidence", "nccl_tests"):
        assert key in d
    assert d["inter_node_transport"] == "socket"
    assert {"file", "line", "text", "why"} <= set(d["evidence"][0])


def test_cli_table_and_error_exit() -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["nccl", "inspect", str(SYN / "nccl-tests" / "all_reduce_perf-ib-2x8.log")])
    assert res.exit_code == 0, res.output
    assert "busbw" in res.output and "inter-node transport" in res.output
    # A directory holding one run with wrong results concludes failed: exit 2.
    res = runner.invoke(app, ["nccl", "inspect", str(SYN / "nccl-tests")])
    assert res.exit_code == 2, res.output
    assert "wrong elements at" in res.output
    bad = runner.invoke(app, ["nccl", "inspect", "/nonexistent"])
    assert bad.exit_code == 3
    assert "no such file" in bad.output


def test_nccl_lines_inside_a_table_region_are_not_lost(tmp_path: Path) -> None:
    from nccl_logs import nccl_tests_table

    text = nccl_tests_table("all_reduce_perf", 100.0, ranks=2).splitlines()
    i = next(n for n, line in enumerate(text) if line.strip().startswith("8 ") or line.lstrip().startswith("8  "))
    text.insert(i + 1, "gpu-node-000:4000:4071 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0")
    (tmp_path / "t.log").write_text("\n".join(text) + "\n")
    r = inspect_paths([tmp_path / "t.log"])
    assert r.nccl_tests[0].rows and len(r.nccl_tests[0].rows) == 16
    assert r.inter_node_transport is Transport.socket and r.connections["NET/Socket"] == 1


def test_chunk_boundaries_do_not_split_facts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import fabricguard.nccl.scan as scan

    monkeypatch.setattr(scan, "CHUNK", 97)  # far smaller than a line: every line crosses a boundary
    small = inspect_paths([SYN / "mixed-ib-socket-2x2", SYN / "nccl-tests"])
    monkeypatch.undo()
    big = inspect_paths([SYN / "mixed-ib-socket-2x2", SYN / "nccl-tests"])
    assert small.to_dict() == big.to_dict()


def test_logs_captured_by_the_probe_on_the_h200() -> None:
    # Written by `probe collective --backend nccl` through NCCL_DEBUG_FILE on the device machine.
    probe = FIX / "h200-probe-2.28.9"
    default = inspect_paths([probe / "default.rank0.log"])
    assert (default.network, default.failed, default.inter_node_transport) == ("Socket", False, Transport.none)
    forced = inspect_paths([probe / "forced-ib.rank0.log"])
    assert forced.failed and forced.network is None
    assert "refused to fall back" in forced.failures[0].why
