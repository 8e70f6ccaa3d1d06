"""One worker's log of a larger job: never "single node" without proof (sources: fixtures/nccl/public/README.md).

People hand over ``kubectl logs`` of one worker. A log that shows one host proves a single-node job only
with ``nNodes 1``, ``localRanks == nRanks``, every rank of the communicator on that host, or nccl-tests'
rank table on one host; otherwise it is one part of a larger job, judged on what it shows.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fabricguard.nccl import inspect_paths
from fabricguard.nccl.report import Scope
from fabricguard.profile import Transport, load_profile
from fabricguard.verdict import Level, Verdict, judge_job

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "nccl"
PUBLIC = FIX / "public"
H200 = FIX / "h200-2.28.9"  # copy of /work/shared/fixtures/nccl-h200-2.28.9 (real NCCL 2.28.9 runs)
ONPREM = ROOT / "examples" / "profiles" / "onprem-infiniband.yaml"
GKE = ROOT / "examples" / "profiles" / "gke-a3-ultra.yaml"


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def _write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("case", "transport", "scope", "nodes"),
    [
        # GCP FastSocket (TCP), one H100 host of a 16-rank job: sockets, not "single node".
        ("nccl-1519", Transport.socket, Scope.part, None),
        # aws-ofi-nccl failed, then Socket, on one host: sockets.
        ("aws-ofi-nccl-889", Transport.socket, Scope.part, None),
        ("aws-ofi-nccl-715", Transport.socket, Scope.part, None),
        ("nccl-367", Transport.socket, Scope.part, None),
        # One host of a 64-rank job (ranks 32-36 of 64): nothing shows the transport.
        ("nccl-1814", Transport.unknown, Scope.part, None),
        # nNodes 2, only one host's lines, no selection, no connections.
        ("nccl-1412", Transport.unknown, Scope.multi_node, 2),
        # NCCL 2.27.3 on EKS: worker node-0-0 of nNodes 4, OFI failed, Assigned NET plugin Socket.
        ("training-on-eks-2.27", Transport.socket, Scope.multi_node, 4),
        # NCCL 2.27.5, node-rank 1 of a 2-node tp16 SGLang job: nNodes 2, connections via NET/IB on RoCE.
        ("slurmv4-2.27.5", Transport.roce, Scope.multi_node, 2),
        # Proof of one node: nNodes 1 localRanks 8 (the user thought both nodes took part).
        ("nccl-tests-213", Transport.none, Scope.single_node, 1),
        ("nccl-1653", Transport.none, Scope.single_node, 1),
        ("nccl-tests-287", Transport.none, Scope.single_node, 1),
        ("nccl-131", Transport.none, Scope.single_node, 1),
    ],
)
def test_scope_and_transport_of_real_logs(case: str, transport: Transport, scope: Scope, nodes: int | None) -> None:
    r = inspect_paths([PUBLIC / case])
    assert (r.inter_node_transport, r.scope, r.nodes) == (transport, scope, nodes), r.reasons
    if scope is Scope.part:
        assert "one part of a larger job" in r.reasons[0]
    assert r.to_dict()["scope"] == scope.value


def test_partial_log_names_the_ranks_it_shows() -> None:
    r = inspect_paths([PUBLIC / "nccl-1814"])
    assert r.ranks == 64 and r.hosts == ["hostname-test"]
    assert "ranks 32,34-36 of 64" in r.reasons[0]


def test_nccl_2_27_assigned_plugin_and_ofi_fallback() -> None:
    r = inspect_paths([PUBLIC / "training-on-eks-2.27"])
    assert r.nccl_version == ["2.27.3+cuda12.9"]
    assert r.failed is False and len(r.fallbacks) == 3, r.failures
    assert "NCCL then used network Socket" in r.fallbacks[0].why
    assert "Socket" in r.networks and "Libfabric" not in r.networks


def test_nccl_2_27_log_cut_before_connections_is_sockets_from_its_selection(tmp_path: Path) -> None:
    # The same worker's log, as `kubectl logs` shows it while the job is still in init.
    src = _lines(PUBLIC / "training-on-eks-2.27" / "llama-3-8b-node-0-0.log")
    cut = [x for x in src[: next(i for i, x in enumerate(src) if "Channel 00/02" in x)]]
    r = inspect_paths([_write(tmp_path / "w0.log", cut)])
    assert (r.inter_node_transport, r.scope, r.nodes, r.transport_basis) == (
        Transport.socket,
        Scope.multi_node,
        4,
        "init",
    ), r.reasons


def test_h200_2_28_one_rank_is_proven_single_node_with_the_fallback_as_evidence() -> None:
    r = inspect_paths([H200 / "default-1rank.log"])
    assert (r.inter_node_transport, r.scope) == (Transport.none, Scope.single_node)
    assert any("could not initialize NET plugin IB" in f.why and "Socket" in f.why for f in r.fallbacks)


def test_h200_2_28_init_lines_without_the_rank_count_are_sockets(tmp_path: Path) -> None:
    # One worker of a bigger job whose communicator lines were not pasted: "Failed to initialize NET
    # plugin IB" then Socket is a socket job, not a single-node one.
    src = _lines(H200 / "default-1rank.log")
    kept = [x for x in src if "nranks" not in x.lower()]
    r = inspect_paths([_write(tmp_path / "w1.log", kept)])
    assert (r.inter_node_transport, r.scope) == (Transport.socket, Scope.part), r.reasons
    assert r.fallbacks


def test_local_ranks_equal_to_nranks_proves_one_node(tmp_path: Path) -> None:
    kept = [x.replace(" nNodes 1", "") for x in _lines(PUBLIC / "nccl-tests-213" / "hw14.log")]
    r = inspect_paths([_write(tmp_path / "hw14.log", kept)])
    assert (r.inter_node_transport, r.scope) == (Transport.none, Scope.single_node)
    assert "localRanks 8 == nRanks" in r.reasons[0]


def test_every_rank_seen_on_the_host_proves_one_node(tmp_path: Path) -> None:
    src = [x for x in _lines(H200 / "dup-gpu-2ranks.log") if "Init START" in x or "Using network" in x]
    assert len([x for x in src if "Init START" in x]) == 2  # ranks 0 and 1 of nranks 2, one commId
    r = inspect_paths([_write(tmp_path / "two.log", src)])
    assert (r.inter_node_transport, r.scope) == (Transport.none, Scope.single_node), r.reasons
    assert "all 2 ranks" in r.reasons[0]
    one = inspect_paths([_write(tmp_path / "one" / "rank0.log", src[: len(src) // 2])])
    assert one.scope is Scope.part and one.inter_node_transport is Transport.socket


def test_nodes_that_selected_different_networks_are_mixed(tmp_path: Path) -> None:
    job = tmp_path / "job"
    for f in sorted((FIX / "synthetic" / "thin-ib-2x2").iterdir()):
        text = f.read_text()
        if "gpu-node-001" in f.name:
            text = text.replace("Using network IB", "Using network Socket")
        _write(job / f.name, text.splitlines())
    r = inspect_paths([job])
    assert r.inter_node_transport is Transport.mixed, r.reasons
    assert "never RDMA" in r.reasons[0]
    v = judge_job(job, load_profile(ONPREM), "h100-ib")
    assert v.verdict is Verdict.degraded


@pytest.mark.parametrize(
    ("case", "profile", "pool"),
    [
        ("nccl-1519", GKE, None),  # FastSocket, one worker, on an RDMA pool: the seed's failure
        ("nccl-1814", ONPREM, "h100-ib"),
        ("nccl-1412", ONPREM, "h100-ib"),
        ("aws-ofi-nccl-889", ONPREM, "h100-ib"),
    ],
)
def test_verify_job_never_passes_an_unproven_transport_on_a_fabric_pool(
    tmp_path: Path, case: str, profile: Path, pool: str | None
) -> None:
    for f in (PUBLIC / case).iterdir():
        shutil.copy(f, tmp_path / f.name)
    v = judge_job(tmp_path, load_profile(profile), pool)
    assert v.verdict is not Verdict.pass_, [r.message for r in v.reasons]
    tr = next(r for r in v.reasons if r.check == "transport")
    assert tr.level is Level.degraded
    assert "single-node" not in tr.message


def test_nccl_2_27_worker_log_without_its_connection_lines_is_unknown(tmp_path: Path) -> None:
    # The same worker cut before its first connection line (NCCL_DEBUG_SUBSYS without NET, or a paste that stops
    # at init): 2 nodes, only this one's selection is seen, so the IB selection proves nothing for the other.
    src = _lines(PUBLIC / "slurmv4-2.27.5" / "aihub0008.log")
    cut = src[: next(i for i, x in enumerate(src) if " via NET/" in x)]
    r = inspect_paths([_write(tmp_path / "aihub0008.log", cut)])
    assert (r.inter_node_transport, r.scope, r.nodes, r.ranks) == (Transport.unknown, Scope.multi_node, 2, 16)
    assert "selection of 1 of them" in r.reasons[0]
    assert not r.failed  # "Initialized NET plugin AWS Libfabric" then "plugin/net.cc:118 -> 2" is INFO, no failure


def test_gin_and_rma_plugins_of_nccl_2_29_are_not_networks(tmp_path: Path) -> None:
    log = _write(tmp_path / "n.log", [
        "node-01:3873285:3873285 [0] NCCL INFO Initialized NET plugin IB",
        "node-01:3873285:3873285 [0] NCCL INFO Assigned NET plugin IB to comm",
        "node-01:3873285:3873285 [0] NCCL INFO Assigned GIN plugin GIN_IB_GDAKI to comm",
        "node-01:3873285:3873285 [0] NCCL INFO Assigned RMA plugin GIN_IB_PROXY to comm",
        "node-01:3873285:3873285 [0] NCCL INFO Using network IB",
    ])
    r = inspect_paths([log])
    assert r.networks == ["IB"] and r.inter_node_transport is not Transport.mixed


def test_a_followed_job_whose_nodes_selected_different_networks_is_final_at_once(tmp_path: Path) -> None:
    from fabricguard.nccl.follow import LogFollower

    job = tmp_path / "job"
    for f in sorted((FIX / "synthetic" / "thin-ib-2x2").iterdir()):
        text = f.read_text()
        if "gpu-node-001" in f.name:
            text = text.replace("Using network IB", "Using network Socket")
        _write(job / f.name, text.splitlines())
    follower = LogFollower(job)
    follower.poll()
    v = follower.verdict()
    assert v.transport is Transport.mixed and v.final  # no later line can make it RDMA
    follower.close()


def test_libfabric_tcp_provider_printed_as_warn_is_sockets_not_a_failure(tmp_path: Path) -> None:
    # The shape public notes quote from aws-ofi-nccl builds that print the provider choice as a WARN (no
    # EFA/CXI device visible in the container): the job ran, over libfabric's tcp provider.
    log = _write(tmp_path / "w0.log", [
        "node-a:71:71 [0] NCCL INFO NET/Plugin: Loaded net plugin Libfabric (v10)",
        "node-a:71:71 [0] nccl_net_ofi_create_plugin:259 NCCL WARN NET/OFI No eligible providers were found",
        "node-a:71:71 [0] nccl_net_ofi_create_plugin:261 NCCL WARN NET/OFI Selected provider is tcp, fabric is "
        "10.224.0.0/12 (found 8 nics)",
        "node-a:71:71 [0] NCCL INFO Initialized NET plugin Libfabric",
        "node-a:71:71 [0] NCCL INFO Assigned NET plugin Libfabric to comm",
        "node-a:71:71 [0] NCCL INFO Using network Libfabric",
    ])
    r = inspect_paths([log])
    assert not r.failed, r.failures
    assert r.ofi_provider == ["tcp"]
    assert (r.inter_node_transport, r.scope) == (Transport.socket, Scope.part), r.reasons
