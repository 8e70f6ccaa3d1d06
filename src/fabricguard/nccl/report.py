"""What an NCCL log proves: the typed result of ``nccl inspect`` and the rules that derive the verdict.

The scanner (``scan.py``) only collects facts; this module decides. The one rule that matters most:
never call a socket job RDMA. Mixed evidence (some connections over sockets) is ``socket``; nodes that
selected networks of different kinds are ``mixed``; thin evidence (a network was selected but no
connection was logged, and not every node's selection is in the log) is ``unknown``.

The second rule: never claim a single node without proof. People hand over ``kubectl logs`` of one
worker of a multi-node job, which shows one host. ``none`` (no inter-node transport) needs proof that
every rank ran on one host: ``nNodes 1``, ``localRanks`` equal to ``nRanks``, every rank of the
communicator seen on that host, or nccl-tests' rank table on one host. Otherwise the log is one part
of a larger job, and it is judged on what it shows (sockets where it shows sockets, else ``unknown``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from fabricguard.exitcodes import Verdict
from fabricguard.profile.model import Transport


@dataclass(frozen=True)
class Evidence:
    """One log line a conclusion rests on."""

    file: str
    line: int
    text: str
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "text": self.text, "why": self.why}


@dataclass
class NcclTestsRow:
    size: int
    count: int
    type: str
    redop: str
    root: int | None
    oop_time_us: float | None
    oop_algbw: float | None
    oop_busbw: float | None
    oop_wrong: int | None
    ip_time_us: float | None
    ip_algbw: float | None
    ip_busbw: float | None
    ip_wrong: int | None
    # Older nccl-tests print "error", the largest numeric error of the row (e.g. 5e-07), not a count.
    oop_max_error: float | None = None
    ip_max_error: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "count": self.count,
            "type": self.type,
            "redop": self.redop,
            "root": self.root,
            "out_of_place": {
                "time_us": self.oop_time_us,
                "algbw_gbps": self.oop_algbw,
                "busbw_gbps": self.oop_busbw,
                "wrong": self.oop_wrong,
                "max_error": self.oop_max_error,
            },
            "in_place": {
                "time_us": self.ip_time_us,
                "algbw_gbps": self.ip_algbw,
                "busbw_gbps": self.ip_busbw,
                "wrong": self.ip_wrong,
                "max_error": self.ip_max_error,
            },
        }


@dataclass
class NcclTestsTable:
    collective: str | None
    file: str
    line: int
    rows: list[NcclTestsRow] = field(default_factory=list)
    avg_busbw_gbps: float | None = None
    validation: bool | None = None
    out_of_bounds: int | None = None  # "# Out of bounds values : N OK|FAILED", the run's own verdict

    @property
    def peak_busbw_gbps(self) -> float | None:
        vals = [r.oop_busbw for r in self.rows if r.oop_busbw is not None]
        return max(vals) if vals else None

    @property
    def wrong(self) -> int | None:
        """Total wrong elements: the ``#wrong`` counts, else the out-of-bounds total; None when unknown."""
        vals = [w for r in self.rows for w in (r.oop_wrong, r.ip_wrong) if w is not None]
        if vals:
            return sum(vals)
        if any(r.oop_max_error is not None or r.ip_max_error is not None for r in self.rows):
            return self.out_of_bounds  # older output: only the out-of-bounds line counts elements
        return None  # validation off: every #wrong printed as N/A

    def to_dict(self) -> dict[str, Any]:
        return {
            "collective": self.collective,
            "file": self.file,
            "line": self.line,
            "rows": [r.to_dict() for r in self.rows],
            "peak_busbw_gbps": self.peak_busbw_gbps,
            "avg_busbw_gbps": self.avg_busbw_gbps,
            "wrong": self.wrong,
            "out_of_bounds": self.out_of_bounds,
        }


@dataclass
class NetDevice:
    """A device listed by a net plugin at init (``NET/IB : Using [0]mlx5_0:1/RoCE``)."""

    net: str
    index: int
    name: str
    link_layer: str | None  # "IB", "RoCE" or None when the log does not say

    def to_dict(self) -> dict[str, Any]:
        return {"net": self.net, "index": self.index, "name": self.name, "link_layer": self.link_layer}


MAX_HOSTS_LISTED = 64


class Scope(StrEnum):
    """How much of the job a log shows."""

    single_node = "single-node"  # proven: every rank on one host
    multi_node = "multi-node"  # proven: more than one node
    part = "part"  # one host's lines, no proof that the job ends there: one part of a larger job
    unknown = "unknown"  # no line names a host or a rank


@dataclass(frozen=True)
class Span:
    """How many nodes the job spans, and the line-level proof for it."""

    scope: Scope
    nodes: int | None
    why: str
    hosts: tuple[str, ...] = ()
    exact: bool = True  # False when ``nodes`` is only a lower bound (hosts seen in the log)

    @property
    def count(self) -> str:
        """The node count as a person reads it: ``2`` when exact, ``at least 2`` when a lower bound."""
        return "?" if self.nodes is None else (str(self.nodes) if self.exact else f"at least {self.nodes}")


def _ranges(ranks: set[int]) -> str:
    """``{0,1,2,5}`` as ``0-2,5``."""
    out: list[str] = []
    for r in sorted(ranks):
        if out and out[-1].split("-")[-1] == str(r - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{r}"
        else:
            out.append(str(r))
    s = ",".join(out)
    return s if len(s) <= 60 else s[:59] + "…"


def job_span(
    max_nranks: int,
    nnodes_by_size: dict[int, int],
    local_by_size: dict[int, int],
    comm_ranks: dict[str, set[int]],
    comm_size: dict[str, int],
    test_ranks: dict[int, str],
    hosts: set[str],
    seen_nodes: int = 0,
) -> Span:
    """Whether the log proves one node, proves several, or shows one part of a larger job.

    Hosts are a floor: the distinct hosts that prefix the job's lines (and ``seen_nodes``, which also counts
    distinct out-of-band addresses under one hostname) are a lower bound on its nodes, so a job seen on two
    hosts is never single-node, whatever one communicator says. ``none`` needs positive proof on one host:
    ``nNodes 1`` or ``localRanks == nRanks`` of the largest communicator, every rank of a communicator seen,
    or a complete nccl-tests rank table (ranks 0..n-1)."""
    hs = tuple(sorted(hosts))
    floor = max(seen_nodes, len(hosts))
    test_hosts = set(test_ranks.values())
    # A rank table cut by the paste ("# Rank 1 ... on host2" with no rank 0) shows ranks, not the job's size.
    table_size = max(test_ranks) + 1 if test_ranks else 0
    table_complete = bool(test_ranks) and len(test_ranks) == table_size
    size = max(max_nranks, table_size)
    max_nnodes = max(nnodes_by_size.values(), default=0)
    if max_nnodes > 1 or floor > 1:
        return _multi_node(size, max_nnodes, nnodes_by_size, floor, test_hosts, table_complete, hs)
    host = hs[0] if hs else None
    if size == 1 and max_nranks == 1:
        return Span(Scope.single_node, 1, "the job has one rank", hs)
    if nnodes_by_size.get(size) == 1:
        return Span(Scope.single_node, 1, f"the {size}-rank communicator reports nNodes 1", hs)
    if size and local_by_size.get(size) == size:
        return Span(Scope.single_node, 1, f"the {size}-rank communicator has localRanks {size} == nRanks", hs)
    if size:
        for key, ranks in comm_ranks.items():
            if comm_size.get(key) == size and len(ranks) >= size:
                return Span(Scope.single_node, 1, f"all {size} ranks of the communicator are on host {host}", hs)
        if table_complete and table_size >= size:
            return Span(Scope.single_node, 1, f"nccl-tests lists all {table_size} ranks on host {host}", hs)
    if host is None and not size:
        return Span(Scope.unknown, None, "the log names neither a host nor a rank count", hs)
    seen: set[int] = set()
    for key, ranks in comm_ranks.items():
        if comm_size.get(key) == size:
            seen |= ranks
    if not seen and test_ranks:
        seen = set(test_ranks)
    shows = f"the log shows only host {host}" if host else "the log names no host"
    if size:
        shows += f" (ranks {_ranges(seen)} of {size})" if seen else f" ({size} ranks in the job)"
    return Span(
        Scope.part,
        1 if host else None,
        shows + ": no line proves every rank ran there (nNodes 1, localRanks == nRanks, or every rank "
        "seen), so it is one part of a larger job",
        hs,
        exact=False,
    )


def _multi_node(size: int, max_nnodes: int, nnodes_by_size: dict[int, int], floor: int, test_hosts: set[str],
                table_complete: bool, hs: tuple[str, ...]) -> Span:
    """A job seen on more than one node: the count is exact only where a line states it for the largest
    communicator (``nNodes``) or a complete rank table lists every host, and no more hosts were seen."""
    if max_nnodes > 1:
        big = max(k for k, v in nnodes_by_size.items() if v == max_nnodes)
        if floor > max_nnodes:
            return Span(Scope.multi_node, floor, f"the log shows {floor} hosts, more than the {max_nnodes} nodes "
                        f"the {big}-rank communicator reports (nNodes)", hs, exact=False)
        why = f"a {big}-rank communicator spans {max_nnodes} nodes (nNodes)"
        if big < size:
            return Span(Scope.multi_node, max_nnodes, why + f", and a {size}-rank communicator may span more", hs,
                        exact=False)
        return Span(Scope.multi_node, max_nnodes, why, hs)
    if len(test_hosts) > 1 and table_complete and floor <= len(test_hosts):
        return Span(Scope.multi_node, len(test_hosts), f"nccl-tests lists all {size} ranks on {len(test_hosts)} "
                    "hosts", hs)
    return Span(Scope.multi_node, floor, f"the log shows {floor} hosts", hs, exact=False)


# Canonical families of a NET plugin name as it appears after "via NET/".
def net_family(name: str) -> str:
    n = name.lower()
    if n.startswith("gin_"):  # a device-API (GIN) backend: GIN_IB_GDAKI, GIN_IB_PROXY, a socket one (2.32)
        n = n[4:]
        if "socket" in n:
            return "socket"
    if n == "socket" or n.startswith("fastsocket"):
        return "socket"  # GCP's FastSocket plugin is TCP sockets with better flow placement
    if n == "ib" or n.startswith("ibext") or n == "gib" or n.startswith("ib_") or n == "sharp":
        return "ibverbs"
    if "libfabric" in n or n.startswith("ofi") or n.startswith("aws"):
        return "libfabric"
    if "tcpx" in n or "fastrak" in n or "tcpxo" in n:
        return "tcpx"
    return "other"


@dataclass
class NcclReport:
    """Everything ``nccl inspect`` concluded, with the evidence for each conclusion."""

    files: list[str] = field(default_factory=list)
    nccl_version: list[str] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)
    inter_node_transport: Transport = Transport.unknown
    gpudirect_rdma: bool | None = None
    intra_node: list[str] = field(default_factory=list)
    failed: bool = False
    nodes: int | None = None  # exact node count, None when only a lower bound is known
    nodes_at_least: int | None = None  # lower bound (hosts seen), equal to ``nodes`` when that is exact
    ranks: int | None = None
    net_devices: list[NetDevice] = field(default_factory=list)
    connections: dict[str, int] = field(default_factory=dict)  # "NET/IB/GDRDMA" -> count
    ofi_provider: list[str] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    failures: list[Evidence] = field(default_factory=list)
    fallbacks: list[Evidence] = field(default_factory=list)  # a net plugin failed to start; NCCL used another
    # WARN lines that are not failures (notices, CollNet unavailable, RAS port taken, teardown after the run
    # completed), each quoted with what it means; ``warning_count`` counts them all.
    warnings: list[Evidence] = field(default_factory=list)
    warning_count: int = 0
    nccl_tests: list[NcclTestsTable] = field(default_factory=list)
    profiler_plugins: list[str] = field(default_factory=list)  # "PROFILER/Plugin: Loaded X": the one NCCL loaded
    gin_plugins: list[str] = field(default_factory=list)  # "Assigned GIN|RMA plugin X to comm" (device API)
    nccl_output: bool = False  # False when no line of the input is NCCL or nccl-tests output
    bytes_read: int = 0
    scope: Scope = Scope.unknown  # how much of the job the log shows (see job_span)
    hosts: list[str] = field(default_factory=list)  # hosts seen in the job's lines (the first MAX_HOSTS_LISTED)
    hosts_count: int = 0  # how many distinct hosts prefixed the job's lines
    # What the transport rests on: "connections", "selection" (inferred: every node selected it),
    # "init" (init lines prove sockets) or None (nothing: none, unknown).
    transport_basis: str | None = None
    # Files (or over-long lines) that were not read, with why: a job with any is not proven by its logs.
    unread: list[Evidence] = field(default_factory=list)
    unread_count: int = 0

    @property
    def nodes_text(self) -> str:
        """``2``, ``≥ 2`` (a lower bound) or ``?``."""
        if self.nodes is not None:
            return str(self.nodes)
        return "?" if self.nodes_at_least is None else f"≥ {self.nodes_at_least}"

    @property
    def network(self) -> str | None:
        if not self.networks:
            return None
        return ",".join(self.networks)

    @property
    def wrong_results(self) -> int:
        return sum(t.wrong or 0 for t in self.nccl_tests)

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "nccl_version": self.nccl_version,
            "network": self.network,
            "inter_node_transport": self.inter_node_transport.value,
            "gpudirect_rdma": self.gpudirect_rdma,
            "intra_node": self.intra_node,
            "failed": self.failed,
            "nodes": self.nodes,
            "nodes_at_least": self.nodes_at_least,
            "ranks": self.ranks,
            "scope": self.scope.value,
            "hosts": self.hosts,
            "hosts_count": self.hosts_count,
            "transport_basis": self.transport_basis,
            "net_devices": [d.to_dict() for d in self.net_devices],
            "connections": self.connections,
            "ofi_provider": self.ofi_provider,
            "reasons": self.reasons,
            "failures": [e.to_dict() for e in self.failures],
            "fallbacks": [e.to_dict() for e in self.fallbacks],
            "warnings": [e.to_dict() for e in self.warnings],
            "warning_count": self.warning_count,
            "evidence": [e.to_dict() for e in self.evidence],
            "nccl_tests": [t.to_dict() for t in self.nccl_tests],
            "profiler_plugins": self.profiler_plugins,
            "gin_plugins": self.gin_plugins,
            "nccl_output": self.nccl_output,
            "bytes_read": self.bytes_read,
            "unread": [e.to_dict() for e in self.unread],
        }


# Fabric transports: never reported for a job any of whose traffic went over sockets.
RDMA_TRANSPORTS = frozenset({Transport.ib, Transport.roce, Transport.efa, Transport.tcpx})


def decide_transport(
    net_conns: Counter[tuple[str, bool]],
    networks: list[str],
    devices: list[NetDevice],
    ofi_providers: list[str],
    nodes: int | None,
    saw_intra_connections: bool,
    failed: bool,
    plugins: list[str] | None = None,
    span: Span | None = None,
    host_nets: dict[str, set[str]] | None = None,
) -> tuple[Transport, list[str], str | None]:
    """The inter-node transport from counted NET connections and init facts, with the reasons and basis.

    ``net_conns`` counts (net name, gdrdma) over every ``via NET/...`` connection line; ``plugins``
    names the net plugins that loaded or listed devices (``Loaded net plugin X``, ``NET/X : Using``);
    ``span`` is how much of the job the log shows (``job_span``); ``host_nets`` the networks each
    host's processes selected. The basis is "connections", "selection", "init" or None.
    """
    if span is None:  # callers that only know a node count
        if nodes is not None and nodes > 1:
            span = Span(Scope.multi_node, nodes, f"{nodes} nodes")
        elif nodes == 1:
            span = Span(Scope.single_node, 1, "one node")
        else:
            span = Span(Scope.unknown, None, "no node count")
    host_nets = host_nets or {}
    mixed = _mixed_selection(networks, host_nets)
    if net_conns:
        t, why = _from_connections(net_conns, devices, ofi_providers)
        if t in RDMA_TRANSPORTS and mixed:
            return Transport.mixed, [*why, mixed], "connections"
        return t, why, "connections"
    reasons: list[str] = []
    # No connection line mentions a network.
    if span.scope is Scope.single_node and (saw_intra_connections or not failed):
        reasons.append(f"all ranks on one node ({span.why}): no inter-node transport")
        return Transport.none, reasons, None
    if mixed:
        return Transport.mixed, [mixed], "selection"
    tcp = _tcp_under_another_name(networks, plugins or [], ofi_providers)
    if span.scope is Scope.multi_node:
        if tcp:
            reasons.append(
                f"{span.count} nodes and {tcp}; no connection lines were logged (set NCCL_DEBUG_SUBSYS=INIT,NET "
                "to see them)"
            )
            return Transport.socket, reasons, "init"
        inferred = _inferred_from_selection(host_nets, span, devices, ofi_providers)
        if inferred is not None:
            return inferred[0], [inferred[1]], "selection"
        seen = f"; the log shows the selection of {len(host_nets)} of them" if host_nets else ""
        reasons.append(
            f"{span.count} nodes ({span.why}) but no network connection lines were logged{seen}; the selected "
            f"network ({', '.join(networks) or 'none shown'}) alone does not prove what carried the data "
            "(set NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=INIT,NET, and hand over every worker's log)"
        )
        return Transport.unknown, reasons, None
    if span.scope is Scope.part:
        if tcp:
            reasons.append(f"{span.why}; it shows {tcp}")
            return Transport.socket, reasons, "init"
        reasons.append(
            f"{span.why}; nothing in it shows the inter-node transport (selected: "
            f"{', '.join(networks) or 'none shown'}, no connection lines): hand over every worker's log"
        )
        return Transport.unknown, reasons, None
    if failed:
        reasons.append("NCCL failed before any connection was made")
    elif tcp and span.scope is not Scope.single_node:
        reasons.append(f"the log shows no host or rank count, but {tcp}")
        return Transport.socket, reasons, "init"
    else:
        reasons.append("the log shows neither connections nor how many nodes took part")
    return Transport.unknown, reasons, None


def _mixed_selection(networks: list[str], host_nets: dict[str, set[str]]) -> str | None:
    """Why the job is mixed: its processes (hosts, or one host's communicators) selected networks of
    different kinds."""
    if len({net_family(n) for n in networks}) <= 1:
        return None
    per_host = "; ".join(f"{h}: {', '.join(sorted(n))}" for h, n in sorted(host_nets.items())[:6])
    return (
        f"the job's processes selected networks of different kinds ({per_host or ', '.join(networks)}): traffic "
        "between them runs at the slowest one's speed, so it is mixed, never RDMA"
    )


def _inferred_from_selection(
    host_nets: dict[str, set[str]], span: Span, devices: list[NetDevice], ofi_providers: list[str]
) -> tuple[Transport, str] | None:
    """The one network every node of a proven multi-node job selected, when no connection line was logged."""
    if span.nodes is None or not span.exact or len(host_nets) < span.nodes or not host_nets:
        return None
    names = sorted({n for nets in host_nets.values() for n in nets})
    fams = {net_family(n) for n in names}
    if len(fams) != 1:
        return None
    t, what = family_transport(next(iter(fams)), names, devices, ofi_providers)
    if t is Transport.unknown:
        return None
    return t, (
        f"every one of the {span.nodes} nodes selected network {'/'.join(names)} ({span.why}) and no connection "
        f"line was logged: NCCL carries inter-node traffic over the one network it selected ({what}), so the "
        f"transport is {t.value}, inferred from the selection (not proven from connections)"
    )


def family_transport(
    family: str, names: list[str], devices: list[NetDevice], ofi_providers: list[str]
) -> tuple[Transport, str]:
    """The transport NET plugins of one family (``net_family``) carry, and why: the one mapping, for
    connection lines and for a selection alike. IB verbs are ``roce`` or ``ib`` by the devices' link layer;
    libfabric is ``efa`` only with the efa provider shown, ``socket`` when any provider shown is TCP."""
    shown = "/".join(names)
    if family == "socket":
        return Transport.socket, f"NET/{shown} is TCP sockets"
    if family == "ibverbs":
        layers = {d.link_layer for d in devices if net_family(d.net) == "ibverbs" and d.link_layer}
        if layers == {"RoCE"}:
            return Transport.roce, f"NET/{shown} on RoCE devices"
        if any(n.lower() == "gib" for n in names) and not layers:
            return Transport.roce, "NET/gIB (Google's IB-verbs plugin over RoCE)"
        if layers == {"IB"}:
            return Transport.ib, f"NET/{shown} on InfiniBand devices"
        if layers:
            return Transport.ib, f"NET/{shown} on mixed link layers {sorted(layers)}"
        return Transport.ib, f"NET/{shown} (IB verbs); the log does not show the link layer"
    if family == "libfabric":
        provs = {p.lower() for p in ofi_providers}
        tcp = provs & TCP_PROVIDERS
        if tcp:
            return Transport.socket, f"NET/{shown} but the libfabric provider is {sorted(tcp)}: that is TCP, not EFA"
        if provs and provs <= EFA_PROVIDERS:
            return Transport.efa, f"NET/{shown} with libfabric provider efa"
        if provs:
            return Transport.unknown, f"NET/{shown} over libfabric provider {sorted(provs)}, not known to be EFA"
        return Transport.unknown, f"NET/{shown} but no 'Selected Provider' line shows the libfabric provider; " \
            "cannot confirm EFA"
    if family == "tcpx":
        return Transport.tcpx, f"NET/{shown} (GPUDirect-TCPX)"
    return Transport.unknown, f"an unrecognised network plugin {names}"


def _from_connections(
    net_conns: Counter[tuple[str, bool]], devices: list[NetDevice], ofi_providers: list[str]
) -> tuple[Transport, list[str]]:
    """The transport the counted ``via NET/...`` connection lines prove."""
    reasons: list[str] = []
    families: Counter[str] = Counter()
    for (name, _gdr), n in net_conns.items():
        families[net_family(name)] += n
    if families.get("socket"):
        total = sum(families.values())
        if len(families) > 1:
            reasons.append(
                f"{families['socket']} of {total} network connections use NET/Socket; the job is bound "
                "by its slowest links, so it counts as sockets"
            )
        else:
            reasons.append(f"all {total} network connections use NET/Socket")
        return Transport.socket, reasons
    if len(families) > 1:
        reasons.append(f"connections over several network plugins {dict(families)}: cannot tell which carried data")
        return Transport.unknown, reasons
    names = sorted({name for (name, _g) in net_conns})
    t, what = family_transport(next(iter(families)), names, devices, ofi_providers)
    reasons.append(f"connections via {what}")
    return t, reasons


# libfabric providers: which prove EFA, which are TCP under another name (one set for every rule here).
EFA_PROVIDERS = frozenset({"efa", "efa-direct"})
TCP_PROVIDERS = frozenset({"tcp", "sockets", "tcp;ofi_rxm", "udp", "udp;ofi_rxd", "sockets;ofi_rxm"})


def _tcp_under_another_name(networks: list[str], plugins: list[str], ofi_providers: list[str]) -> str | None:
    """Why init lines alone prove TCP: every selected network is sockets, or libfabric runs over tcp."""
    if networks and all(net_family(n) == "socket" for n in networks):
        return f"NCCL selected the {'/'.join(networks)} network (TCP sockets)"
    provs = {p.lower() for p in ofi_providers}
    tcp = provs & TCP_PROVIDERS
    if tcp and all(net_family(n) in ("libfabric", "socket") for n in networks):
        return f"the libfabric provider is {'/'.join(sorted(tcp))}, which is TCP, not EFA"
    if not networks and plugins and all(net_family(p) == "socket" for p in plugins):
        return f"the only net plugin that started is {'/'.join(plugins)} (TCP sockets)"
    return None


# What ``--expect`` accepts besides a transport name: ``rdma`` is any kernel-bypass fabric transport.
EXPECT_SETS: dict[str, frozenset[Transport]] = {
    "rdma": frozenset({Transport.ib, Transport.roce, Transport.efa}),
    **{t.value: frozenset({t}) for t in Transport if t not in (Transport.unknown, Transport.mixed)},
}


def judge_expectation(report: NcclReport, expect: str) -> tuple[Verdict, list[str]]:
    """``nccl inspect --expect``: pass only when the logs prove the expected transport.

    ``failed`` when the run failed; ``degraded`` when the transport is another one, ``unknown`` (not proven)
    or ``mixed``; ``pass`` when it is in the expected set. A transport inferred from the selection alone
    (no connection line) passes, with the reason saying so."""
    want = EXPECT_SETS[expect]
    names = "/".join(sorted(t.value for t in want))
    t = report.inter_node_transport
    if report.failed:
        first = report.failures[0].why if report.failures else "see failures"
        return Verdict.failed, [f"the run failed: {first}"]
    if report.unread_count:
        return Verdict.degraded, [f"{report.unread_count} file(s) or line(s) not read: the logs cannot prove "
                                  f"what every rank did (expected {names})"]
    if t in want:
        why = f"inter-node transport {t.value}, as expected ({expect})"
        if report.transport_basis == "selection":
            why += "; inferred from the network every node selected, not proven from connection lines"
        return Verdict.pass_, [why]
    if t is Transport.unknown:
        return Verdict.degraded, [f"expected {names}, but the logs do not prove the transport: "
                                  + "; ".join(report.reasons)]
    if t is Transport.none:
        return Verdict.degraded, [f"expected {names}, but the job ran on one node ({report.scope.value}): no "
                                  "inter-node transport was used to check"]
    return Verdict.degraded, [f"expected {names}, but the inter-node transport is {t.value}: "
                              + "; ".join(report.reasons)]
