"""Hosts are a floor on a job's nodes, and ``none`` needs proof (issue 27; sources: fixtures/nccl/public/README.md).

Each silent-pass shape from real logs: a job whose lines come from two hosts was reported ``none`` ("all
ranks on one node"), so nothing checked its transport. Each case here said ``none`` or ``single-node``
before this rule (checked against the code it replaced) and must never say it again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricguard.cli import app
from fabricguard.nccl import inspect_paths
from fabricguard.nccl.report import Scope
from fabricguard.profile import Transport
from nccl_logs import PUBLIC
from nccl_logs import lines_of as _lines
from nccl_logs import write_lines as _write


def _cut_rank_table(tmp_path: Path) -> list[Path]:
    # NVIDIA/nccl-tests#133 as pasted: the rank table starts at "#   Rank 15 ... on nodeb" (one row), while
    # nodea and nodeb both prefix NCCL lines.
    return [PUBLIC / "nccl-tests-133" / "mpirun-head.log"]


def _one_rank_comms_on_two_hosts(tmp_path: Path) -> list[Path]:
    # open-mpi/ompi#13317: two processes of one launch on two containers, each with a 1-rank communicator.
    return [PUBLIC / "ompi-13317" / "two-containers.log"]


def _rank_table_plus_another_host(tmp_path: Path) -> list[Path]:
    # A complete rank table on one host (NVIDIA/nccl-tests#287, GENOA-01) with NCCL lines from another host
    # (NVIDIA/nccl#983's 4c217144f0b1) in the same paste: built from the two real logs.
    table = _lines(PUBLIC / "nccl-tests-287" / "alltoall_perf.log")
    other = [x for x in _lines(PUBLIC / "nccl-983" / "two-servers.log") if x.startswith("4c217144f0b1")]
    return [_write(tmp_path / "mixed.log", table[:6] + other + table[6:])]


def _two_files_one_rank_each(tmp_path: Path) -> list[Path]:
    # The same 1-rank shape handed over as one file per container.
    src = _lines(PUBLIC / "ompi-13317" / "two-containers.log")
    return [_write(tmp_path / "a.log", src[:4]), _write(tmp_path / "b.log", src[5:])]


SHAPES = {
    "cut rank table": _cut_rank_table,
    "1-rank comms on two hosts": _one_rank_comms_on_two_hosts,
    "rank table from one host plus lines from another": _rank_table_plus_another_host,
    "1-rank comms, one file per host": _two_files_one_rank_each,
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_no_silent_pass_shape_says_none(tmp_path: Path, shape: str) -> None:
    paths = SHAPES[shape](tmp_path)
    r = inspect_paths(paths)
    assert r.inter_node_transport is not Transport.none, r.reasons
    assert r.scope is Scope.multi_node, r.reasons
    assert r.nodes_at_least is not None and r.nodes_at_least >= 2
    assert r.nodes is None  # two hosts seen: a lower bound, never printed as an exact count
    assert r.nodes_text.startswith("≥ ")
    out = CliRunner().invoke(app, ["nccl", "inspect", "--format", "json", *map(str, paths)])
    data = json.loads(out.stdout)
    assert data["inter_node_transport"] != "none" and data["scope"] == "multi-node"
    assert data["nodes"] is None and data["nodes_at_least"] >= 2
    assert data["verdict"] != "pass"


def test_cut_rank_table_real_log_transport() -> None:
    # nodea and nodeb connect via NET/IB on RoCE devices; the CollNet notice is a warning, not a failure.
    r = inspect_paths([PUBLIC / "nccl-tests-133"])
    assert r.inter_node_transport is Transport.roce
    assert r.hosts == ["nodea", "nodeb"] and r.hosts_count == 2


def test_glued_prefixes_never_create_hosts(tmp_path: Path) -> None:
    # A paste that lost a newline: the first line's prefix runs into the next line's. Built from NVIDIA/nccl#983.
    src = _lines(PUBLIC / "nccl-983" / "two-servers.log")
    glued = [x if "Using network IB" not in x else "4c217144f0b1:113168:113179" + x for x in src]
    r = inspect_paths([_write(tmp_path / "glued.log", glued)])
    assert r.hosts == ["4c217144f0b1", "e0a95b6643f4"], r.hosts
    assert r.nodes_at_least == 2


def test_two_bootstrap_addresses_under_one_hostname_are_two_nodes(tmp_path: Path) -> None:
    # Two VMs that both call themselves "ubuntu" (the hostname of NVIDIA/nccl-tests#166's workers), each with
    # a 1-rank communicator: the bootstrap addresses differ, so these are two nodes.
    lines = [
        "ubuntu:9621:9621 [0] NCCL INFO Bootstrap : Using eth0:10.0.1.7<0>",
        "ubuntu:9621:9685 [0] NCCL INFO comm 0x55a rank 0 nranks 1 cudaDev 0 busId 1000 - Init COMPLETE",
        "ubuntu:4410:4410 [0] NCCL INFO Bootstrap : Using eth0:10.0.1.9<0>",
        "ubuntu:4410:4470 [0] NCCL INFO comm 0x55b rank 0 nranks 1 cudaDev 0 busId 1000 - Init COMPLETE",
    ]
    r = inspect_paths([_write(tmp_path / "two-vms.log", lines)])
    assert r.inter_node_transport is not Transport.none
    assert r.scope is Scope.multi_node and r.nodes_at_least == 2
    # The same address twice is one host's two processes: a 1-rank job there is single-node.
    same = [x.replace("10.0.1.9", "10.0.1.7") for x in lines]
    r = inspect_paths([_write(tmp_path / "one-vm.log", same)])
    assert r.inter_node_transport is Transport.none and r.nodes == 1


def test_more_hosts_than_nnodes_is_a_lower_bound(tmp_path: Path) -> None:
    # A sub-communicator's nNodes 2 while the lines show three hosts: "nodes ≥ 3", never "nodes 2".
    lines = [f"h{i}:1{i}:1{i} [0] NCCL INFO comm 0x1 rank {i} nRanks 4 nNodes 2 localRanks 2 localRank 0"
             for i in range(3)]
    r = inspect_paths([_write(tmp_path / "sub.log", lines)])
    assert r.nodes is None and r.nodes_at_least == 3
    assert r.nodes_text == "≥ 3"


def test_nnodes_of_the_largest_communicator_is_exact(tmp_path: Path) -> None:
    lines = [f"h{i}:1{i}:1{i} [0] NCCL INFO comm 0x1 rank {i} nRanks 2 nNodes 2 localRanks 1 localRank 0"
             for i in range(2)]
    r = inspect_paths([_write(tmp_path / "two.log", lines)])
    assert r.nodes == 2 and r.nodes_at_least == 2 and r.nodes_text == "2"


def test_second_host_after_the_last_fact_line_is_listed(tmp_path: Path) -> None:
    # NVIDIA/nccl#983's first host, then one line of the second host that names no network, rank or version.
    src = _lines(PUBLIC / "nccl-983" / "two-servers.log")
    lines = [x for x in src if x.startswith(("4c217144f0b1", "NCCL"))] + [src[7]]
    r = inspect_paths([_write(tmp_path / "tail.log", lines)])
    assert r.hosts == ["4c217144f0b1", "e0a95b6643f4"]
    assert r.scope is Scope.multi_node
