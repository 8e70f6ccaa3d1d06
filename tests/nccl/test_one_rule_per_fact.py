"""One family->transport rule and the lines of NCCL 2.3.7 and 2.31+/2.32 (issue 27, item 5).

Sources: tests/fixtures/nccl/public/README.md. NCCL 2.3.7's network line is built from its source
(src/init.cu: ``INFO(INIT,"Using internal Network %s")``): no public thread in the index quotes it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricguard.nccl import inspect_paths
from fabricguard.nccl.report import TCP_PROVIDERS, family_transport, net_family
from fabricguard.profile import Transport
from nccl_logs import PUBLIC
from nccl_logs import write_lines as _write


@pytest.mark.parametrize("provider", sorted(TCP_PROVIDERS))
def test_a_tcp_provider_is_socket_with_and_without_connection_lines(tmp_path: Path, provider: str) -> None:
    # The aws-ofi-nccl line shapes of aws/aws-ofi-nccl#715 on two hosts; one log with connection lines, one
    # with init lines only. Both must say the same: udp;ofi_rxd used to give unknown with connections.
    init = [f"ip-10-0-{n}-5:80:2500 [0] NCCL INFO {x}" for n in (1, 2) for x in (
        "NET/Plugin: Loaded net plugin Libfabric (v9)", f"NET/OFI Selected Provider is {provider}",
        "Using network Libfabric")]
    conns = [f"ip-10-0-{n}-5:80:2501 [0] NCCL INFO Channel 00/0 : {n}[0] -> {2 - n}[0] [send] via NET/Libfabric/0"
             for n in (1, 2)]
    with_conns = inspect_paths([_write(tmp_path / "conns.log", init + conns)])
    init_only = inspect_paths([_write(tmp_path / "init.log", init)])
    assert with_conns.inter_node_transport is Transport.socket, with_conns.reasons
    assert init_only.inter_node_transport is Transport.socket, init_only.reasons


def test_one_mapping_for_connections_and_selection() -> None:
    from fabricguard.nccl.report import NetDevice

    roce = [NetDevice("IB", 0, "mlx5_0", "RoCE")]
    assert family_transport("ibverbs", ["IB"], roce, [])[0] is Transport.roce
    assert family_transport("ibverbs", ["gIB"], [], [])[0] is Transport.roce
    assert family_transport("ibverbs", ["IB"], [], [])[0] is Transport.ib
    assert family_transport("libfabric", ["Libfabric"], [], ["efa"])[0] is Transport.efa
    assert family_transport("libfabric", ["Libfabric"], [], ["efa", "tcp"])[0] is Transport.socket
    assert family_transport("libfabric", ["Libfabric"], [], [])[0] is Transport.unknown
    assert family_transport("tcpx", ["GPUDirectTCPX"], [], [])[0] is Transport.tcpx
    assert family_transport("socket", ["Socket"], [], [])[0] is Transport.socket
    # The scanner has no second copy: report.py holds the one set of TCP providers.
    src = (Path(__file__).resolve().parents[2] / "src" / "fabricguard" / "nccl").glob("*.py")
    assert sum(f.read_text().count('"udp;ofi_rxd"') for f in src) == 1


def test_nccl_2_3_internal_network_socket_is_sockets(tmp_path: Path) -> None:
    lines = [
        "NCCL version 2.3.7+cuda9.2",
        *(f"node{n}:31{n}:31{n} [0] NCCL INFO NET/Socket : 1 interfaces found" for n in (1, 2)),
        *(f"node{n}:31{n}:31{n} [0] NCCL INFO Using internal Network Socket" for n in (1, 2)),
        "node1:311:311 [0] NCCL INFO comm 0x7f rank 0 nranks 2 - COMPLETE",
        "node2:312:312 [0] NCCL INFO comm 0x7e rank 1 nranks 2 - COMPLETE",
    ]
    r = inspect_paths([_write(tmp_path / "old.log", lines)])
    assert r.networks == ["Socket"] and r.nccl_version == ["2.3.7+cuda9.2"]
    assert r.inter_node_transport is Transport.socket, r.reasons
    assert any("Using internal Network Socket" in e.text for e in r.evidence)
    ib = inspect_paths([_write(tmp_path / "ib.log", [x.replace("Network Socket", "Network IB") for x in lines])])
    assert ib.networks == ["IB"] and ib.inter_node_transport is Transport.unknown  # IB chosen, nothing proven


def test_gin_backends_are_read() -> None:
    # NVIDIA/nccl#2397 (2.31-era ncclCommShrink): "Assigned GIN plugin GIN_IB_GDAKI to comm".
    r = inspect_paths([PUBLIC / "nccl-2397"])
    assert r.gin_plugins == ["GIN_IB_GDAKI", "GIN_IB_PROXY"]
    assert net_family("GIN_IB_GDAKI") == "ibverbs"


def test_socket_gin_under_an_rdma_network_is_mixed(tmp_path: Path) -> None:
    # NCCL 2.32 adds socket-based GIN (release notes v2.32.3-1). The backend's name is not in any public log in
    # the index: the line keeps nccl#2397's shape with a backend whose name says socket, and NET/IB
    # connections from nccl-tests#133.
    conns = (PUBLIC / "nccl-tests-133" / "mpirun-connections.log").read_text().splitlines()[3:9]
    head = (PUBLIC / "nccl-tests-133" / "mpirun-head.log").read_text().splitlines()
    gin = "nodea:26799:27025 [0] NCCL INFO Assigned GIN plugin GIN_SOCKET to comm"
    r = inspect_paths([_write(tmp_path / "gin.log", [*head, gin, *conns])])
    assert r.inter_node_transport is Transport.mixed, r.reasons
    assert "TCP sockets" in r.reasons[0]
    plain = inspect_paths([_write(tmp_path / "ib.log", [*head, *conns])])
    assert plain.inter_node_transport is Transport.roce
