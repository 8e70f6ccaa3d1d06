"""What an NCCL log proves: the typed result of ``nccl inspect`` and the rules that derive the verdict.

The scanner (``scan.py``) only collects facts; this module decides. The one rule that matters most:
never call a socket job RDMA. Mixed evidence (some connections over sockets) is ``socket``; thin
evidence (a network was selected but no connection was logged) is ``unknown``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

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


# Canonical families of a NET plugin name as it appears after "via NET/".
def net_family(name: str) -> str:
    n = name.lower()
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
    nodes: int | None = None
    ranks: int | None = None
    net_devices: list[NetDevice] = field(default_factory=list)
    connections: dict[str, int] = field(default_factory=dict)  # "NET/IB/GDRDMA" -> count
    ofi_provider: list[str] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    failures: list[Evidence] = field(default_factory=list)
    fallbacks: list[Evidence] = field(default_factory=list)  # a net plugin failed to start; NCCL used another
    nccl_tests: list[NcclTestsTable] = field(default_factory=list)
    profiler_plugins: list[str] = field(default_factory=list)  # "PROFILER/Plugin: Loaded X": the one NCCL loaded
    nccl_output: bool = False  # False when no line of the input is NCCL or nccl-tests output
    bytes_read: int = 0

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
            "ranks": self.ranks,
            "net_devices": [d.to_dict() for d in self.net_devices],
            "connections": self.connections,
            "ofi_provider": self.ofi_provider,
            "reasons": self.reasons,
            "failures": [e.to_dict() for e in self.failures],
            "fallbacks": [e.to_dict() for e in self.fallbacks],
            "evidence": [e.to_dict() for e in self.evidence],
            "nccl_tests": [t.to_dict() for t in self.nccl_tests],
            "profiler_plugins": self.profiler_plugins,
            "nccl_output": self.nccl_output,
            "bytes_read": self.bytes_read,
        }


def decide_transport(
    net_conns: Counter[tuple[str, bool]],
    networks: list[str],
    devices: list[NetDevice],
    ofi_providers: list[str],
    nodes: int | None,
    saw_intra_connections: bool,
    failed: bool,
    plugins: list[str] | None = None,
) -> tuple[Transport, list[str]]:
    """The inter-node transport from counted NET connections and init facts, with the reasons.

    ``net_conns`` counts (net name, gdrdma) over every ``via NET/...`` connection line; ``plugins``
    names the net plugins that loaded or listed devices (``Loaded net plugin X``, ``NET/X : Using``).
    """
    reasons: list[str] = []
    families: Counter[str] = Counter()
    for (name, _gdr), n in net_conns.items():
        families[net_family(name)] += n
    if families:
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
        fam = next(iter(families))
        names = sorted({name for (name, _g) in net_conns})
        if fam == "ibverbs":
            layers = {d.link_layer for d in devices if net_family(d.net) == "ibverbs" and d.link_layer}
            if layers == {"RoCE"}:
                reasons.append(f"connections via NET/{'/'.join(names)} on RoCE devices")
                return Transport.roce, reasons
            if any(n.lower() == "gib" for n in names) and not layers:
                reasons.append("connections via NET/gIB (Google's IB-verbs plugin over RoCE)")
                return Transport.roce, reasons
            if layers == {"IB"}:
                reasons.append(f"connections via NET/{'/'.join(names)} on InfiniBand devices")
            elif layers:
                reasons.append(f"connections via NET/{'/'.join(names)} on mixed link layers {sorted(layers)}")
            else:
                reasons.append(
                    f"connections via NET/{'/'.join(names)} (IB verbs); the log does not show the link layer"
                )
            return Transport.ib, reasons
        if fam == "libfabric":
            provs = {p.lower() for p in ofi_providers}
            if provs and provs <= {"efa", "efa-direct"}:
                reasons.append(f"connections via NET/{'/'.join(names)} with libfabric provider efa")
                return Transport.efa, reasons
            if provs & {"tcp", "sockets", "tcp;ofi_rxm", "udp"}:
                reasons.append(
                    f"connections via NET/{'/'.join(names)} but the libfabric provider is {sorted(provs)}: "
                    "that is TCP, not EFA"
                )
                return Transport.socket, reasons
            reasons.append(
                f"connections via NET/{'/'.join(names)} but no 'Selected Provider' line shows the libfabric "
                "provider; cannot confirm EFA"
            )
            return Transport.unknown, reasons
        if fam == "tcpx":
            reasons.append(f"connections via NET/{'/'.join(names)} (GPUDirect-TCPX)")
            return Transport.tcpx, reasons
        reasons.append(f"connections via an unrecognised network plugin {names}")
        return Transport.unknown, reasons

    # No connection line mentions a network.
    multi_node = nodes is not None and nodes > 1
    if multi_node:
        tcp = _tcp_under_another_name(networks, plugins or [], ofi_providers)
        if tcp:
            reasons.append(
                f"{nodes} nodes and {tcp}; no connection lines were logged (set NCCL_DEBUG_SUBSYS=INIT,NET to see them)"
            )
            return Transport.socket, reasons
        reasons.append(
            f"{nodes} nodes but no network connection lines were logged; the selected network "
            f"({', '.join(networks) or 'none shown'}) alone does not prove what carried the data "
            "(set NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=INIT,NET)"
        )
        return Transport.unknown, reasons
    if nodes == 1 and (saw_intra_connections or not failed):
        reasons.append("all ranks on one node: no inter-node transport")
        return Transport.none, reasons
    if failed:
        reasons.append("NCCL failed before any connection was made")
    else:
        reasons.append("the log shows neither connections nor how many nodes took part")
    return Transport.unknown, reasons


_TCP_PROVIDERS = {"tcp", "sockets", "tcp;ofi_rxm", "udp", "udp;ofi_rxd", "sockets;ofi_rxm"}


def _tcp_under_another_name(networks: list[str], plugins: list[str], ofi_providers: list[str]) -> str | None:
    """Why init lines alone prove TCP: every selected network is sockets, or libfabric runs over tcp."""
    if networks and all(net_family(n) == "socket" for n in networks):
        return f"NCCL selected the {'/'.join(networks)} network (TCP sockets)"
    provs = {p.lower() for p in ofi_providers}
    if provs and provs <= _TCP_PROVIDERS and all(net_family(n) in ("libfabric", "socket") for n in networks):
        return f"the libfabric provider is {'/'.join(sorted(provs))}, which is TCP, not EFA"
    if not networks and plugins and all(net_family(p) == "socket" for p in plugins):
        return f"the only net plugin that started is {'/'.join(plugins)} (TCP sockets)"
    return None
