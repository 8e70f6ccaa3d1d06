"""Writer of realistic multi-node NCCL_DEBUG=INFO logs, for fixtures and the 1 GiB benchmark.

The line shapes follow real NCCL output (see tests/fixtures/nccl/h200-2.28.9 for a real single-node
2.28.9 log, and the connection formats NCCL has printed since 2.3: ``Ring``, ``Channel 00``,
``Channel 00/0 ... [send] via NET/IB/0/GDRDMA``). Only what a real rank prints is written, in the order
it prints it: bootstrap, version, network plugin, device list, network selection, init, ring and tree
layout, connections, init completion, and (with the COLL subsystem) one line per collective call.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Fabric:
    net: str  # name as NCCL prints it after "Using network"
    devices: list[str] = field(default_factory=list)  # e.g. ["mlx5_0:1/IB"]
    gdr: bool = True
    ofi_provider: str | None = None  # aws-ofi-nccl: "efa" or "tcp"
    plugin_line: str = "NET/Plugin: Could not find: libnccl-net.so"


IB = Fabric("IB", [f"mlx5_{i}:1/IB" for i in range(4)])
ROCE = Fabric("IB", [f"mlx5_{i}:1/RoCE" for i in range(4)])
GIB = Fabric(
    "gIB",
    [f"mlx5_{i}:1/RoCE" for i in range(8)],
    plugin_line="NET/Plugin: Loaded net plugin gIB (v9)",
)
EFA = Fabric(
    "Libfabric",
    [],
    ofi_provider="efa",
    plugin_line="NET/Plugin: Loaded net plugin Libfabric (v9)",
)
EFA_TCP = Fabric(
    "Libfabric",
    [],
    gdr=False,
    ofi_provider="tcp",
    plugin_line="NET/Plugin: Loaded net plugin Libfabric (v9)",
)
TCPX = Fabric("GPUDirectTCPX", [], gdr=False, plugin_line="NET/Plugin: Loaded net plugin GPUDirectTCPX (v7)")
SOCKET = Fabric("Socket", ["eth0:10.0.0.{node}<0>"], gdr=False)


@dataclass
class Job:
    nodes: int = 2
    gpus_per_node: int = 8
    version: str = "2.21.5+cuda12.4"
    fabric: Fabric = field(default_factory=lambda: IB)
    channels: int = 4
    ib_disabled_env: bool = False
    steps: int = 0  # collective calls logged per rank (NCCL_DEBUG_SUBSYS includes COLL)
    connection_lines: bool = True
    style: str = "2.12+"  # "2.12+" | "2.4" (Channel 00 : a[bus] -> b[bus]) | "2.3" (Ring 00 : a -> b)

    @property
    def ranks(self) -> int:
        return self.nodes * self.gpus_per_node


def host(node: int) -> str:
    return f"gpu-node-{node:03d}"


def _prefix(job: Job, rank: int, tid_offset: int = 0) -> str:
    node, local = divmod(rank, job.gpus_per_node)
    pid = 4000 + rank
    return f"{host(node)}:{pid}:{pid + tid_offset} [{local}]"


def _conn(job: Job, ch: int, src: int, dst: int, direction: str, via: str) -> str:
    g = job.gpus_per_node
    if job.style == "2.3":
        if direction:
            return f"Ring {ch:02d} : {src} -> {dst} [{direction}] via {via}"
        return f"Ring {ch:02d} : {src}[{src % g}] -> {dst}[{dst % g}] via {via}"
    if job.style == "2.4":
        bus = lambda r: f"{0x1b + (r % g) * 0x10:x}000"  # noqa: E731
        d = f" [{direction}]" if direction else ""
        return f"Channel {ch:02d} : {src}[{bus(src)}] -> {dst}[{bus(dst)}]{d} via {via}"
    d = f" [{direction}]" if direction else ""
    return f"Channel {ch:02d}/0 : {src}[{src % g}] -> {dst}[{dst % g}]{d} via {via}"


def rank_lines(job: Job, rank: int) -> Iterator[str]:
    """Every line one rank prints, in order."""
    g = job.gpus_per_node
    node, local = divmod(rank, g)
    p0 = _prefix(job, rank)
    p = _prefix(job, rank, 71)
    f = job.fabric
    info = " NCCL INFO "
    yield f"{p0}{info}Bootstrap : Using eth0:10.0.0.{node + 1}<0>"
    if job.ib_disabled_env:
        yield f"{p0}{info}NCCL_IB_DISABLE set by environment to 1."
    yield f"{p0}{info}cudaDriverVersion 12040"
    yield f"{p0}{info}NCCL version {job.version}"
    yield f"{p}{info}{f.plugin_line}"
    if f.ofi_provider:
        yield f"{p}{info}NET/OFI Initializing aws-ofi-nccl 1.13.2"
        fabric = "efa-direct" if f.ofi_provider == "efa" else f.ofi_provider
        yield f"{p}{info}NET/OFI Selected provider is {f.ofi_provider}, fabric is {fabric} (found 32 nics)"
    elif f.net == "Socket":
        if job.ib_disabled_env:
            yield f"{p}{info}transport/net_ib.cc:852 -> 3"
            yield f"{p}{info}Failed to initialize NET plugin IB"
        yield f"{p}{info}NET/Socket : Using [0]eth0:10.0.0.{node + 1}<0>"
        yield f"{p}{info}Initialized NET plugin Socket"
    elif f.devices:
        devs = " ".join(f"[{i}]{d}" for i, d in enumerate(f.devices))
        yield f"{p}{info}NET/{f.net} : Using {devs} [RO]; OOB eth0:10.0.0.{node + 1}<0>"
        yield f"{p}{info}Initialized NET plugin {f.net}"
    yield f"{p}{info}Assigned NET plugin {f.net} to comm"
    yield f"{p}{info}Using network {f.net}"
    comm = f"0x{0x55d0c8a0 + rank * 0x100:x}"
    yield (
        f"{p}{info}ncclCommInitRankConfig comm {comm} rank {rank} nranks {job.ranks} cudaDev {local} "
        f"nvmlDev {local} busId {0x1b + local * 0x10:x}000 commId 0x9f1e2d3c4b5a6978 - Init START"
    )
    if f.gdr:
        yield f"{p}{info}GPU Direct RDMA Enabled for GPU {local} / HCA {local % max(1, len(f.devices))} (distance 3 <= 4), read 1 mode Default"
    yield f"{p}{info}Setting affinity for GPU {local} to 0-47,96-143"
    yield (
        f"{p}{info}comm {comm} rank {rank} nRanks {job.ranks} nNodes {job.nodes} localRanks {g} "
        f"localRank {local} MNNVL 0"
    )
    if rank == 0:
        ring = " ".join(f"{r:4d}" for r in range(job.ranks))
        for ch in range(job.channels):
            yield f"{p}{info}Channel {ch:02d}/{job.channels:02d} : {ring}"
    yield f"{p}{info}Trees [0] {rank + 1 if rank + 1 < job.ranks else -1}/-1/-1->{rank}->{rank - 1}"
    yield f"{p}{info}P2P Chunksize set to 131072"
    if job.connection_lines:
        nxt, prv = (rank + 1) % job.ranks, (rank - 1) % job.ranks
        net_suffix = "/GDRDMA" if f.gdr else ""
        for ch in range(job.channels):
            dev = ch % max(1, len(f.devices) or 1)
            if nxt // g != node:
                yield f"{p}{info}" + _conn(job, ch, rank, nxt, "send", f"NET/{f.net}/{dev}{net_suffix}")
            else:
                yield f"{p}{info}" + _conn(job, ch, rank, nxt, "", "P2P/CUMEM/read" if job.style == "2.12+" else "P2P/IPC")
            if prv // g != node:
                yield f"{p}{info}" + _conn(job, ch, prv, rank, "receive", f"NET/{f.net}/{dev}{net_suffix}")
    yield f"{p}{info}Connected all rings, use ring PXN 0 GDR {1 if f.gdr else 0}"
    yield f"{p}{info}Connected all trees"
    yield (
        f"{p}{info}ncclCommInitRankConfig comm {comm} rank {rank} nranks {job.ranks} cudaDev {local} "
        f"nvmlDev {local} busId {0x1b + local * 0x10:x}000 commId 0x9f1e2d3c4b5a6978 - Init COMPLETE"
    )
    for step in range(job.steps):
        yield (
            f"{p0}{info}AllReduce: opCount {step:x} sendbuff 0x7f3a{step % 4096:04x}00000 recvbuff "
            f"0x7f3a{step % 4096:04x}00000 count 262144000 datatype 9 op 0 root 0 comm {comm} "
            f"[nranks={job.ranks}] stream 0x5601d2c3e4f0"
        )


def write_per_rank(job: Job, out: Path) -> list[Path]:
    """One file per rank, named like NCCL_DEBUG_FILE=%h.%p."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in range(job.ranks):
        node = r // job.gpus_per_node
        path = out / f"{host(node)}.{4000 + r}.log"
        path.write_text("\n".join(rank_lines(job, r)) + "\n")
        paths.append(path)
    return paths


def write_interleaved(job: Job, out: Path, node: int, timestamps: bool = False) -> Path:
    """One pod's ``kubectl logs`` output: its ranks' lines interleaved, optionally with timestamps."""
    out.mkdir(parents=True, exist_ok=True)
    gens = [rank_lines(job, r) for r in range(node * job.gpus_per_node, (node + 1) * job.gpus_per_node)]
    lines: list[str] = []
    sec = 0
    while gens:
        for gen in list(gens):
            try:
                line = next(gen)
            except StopIteration:
                gens.remove(gen)
                continue
            if timestamps:
                sec += 1
                line = f"2026-11-20T10:{(sec // 60) % 60:02d}:{sec % 60:02d}.{sec * 7919 % 10**9:09d}Z {line}"
            lines.append(line)
    path = out / f"{host(node)}.log"
    path.write_text("\n".join(lines) + "\n")
    return path


def nccl_tests_table(
    collective: str = "all_reduce_perf",
    busbw_peak: float = 355.0,
    validation: bool = True,
    wrong_at: int | None = None,
    ranks: int = 16,
) -> str:
    """nccl-tests output as printed by rank 0 (header, device list, table, averages)."""
    lines = [
        "# nccl-tests version 2.17.6 nccl-headers=22809 nccl-library=22809",
        f"# Collective test starting: {collective}",
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 4(factor) warmup iters: 5 iters: 20 "
        f"agg iters: 1 validation: {1 if validation else 0} graph: 0",
        "#",
        "# Using devices",
    ]
    for r in range(ranks):
        lines.append(f"#  Rank {r:2d} Group  0 Pid {4000 + r:6d} on {host(r // 8)} device  {r % 8} [0x{0x1b + (r % 8) * 16:02x}] NVIDIA H200")
    lines += [
        "NCCL version 2.28.9+cuda13.0",
        "#",
        "#                                                              out-of-place                       in-place          ",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       ",
    ]
    gather = collective in ("all_gather_perf", "alltoall_perf")
    redop = "none" if gather else "sum"
    factor = 2 * (ranks - 1) / ranks if collective == "all_reduce_perf" else (ranks - 1) / ranks
    size = 8
    total_bus = 0.0
    n = 0
    while size <= 8 * 1024**3:
        # A saturating curve: latency-bound at small sizes, approaching the peak at large ones.
        busbw = busbw_peak * size / (size + 64 * 1024**2 / 8)
        algbw = busbw / factor
        t_us = size / (algbw * 1e3) if algbw > 0 else 0.0
        wrong = "N/A" if not validation else ("17" if wrong_at is not None and size == wrong_at else "0")
        count = size // (8 if gather else 4) if not gather else size // 4 // ranks
        lines.append(
            f"{size:12d}  {max(count, 0):12d}     float  {redop:>6s}      -1  {t_us:8.2f}  {algbw:6.2f}  {busbw:6.2f}  "
            f"{wrong:>5s}  {t_us * 1.01:8.2f}  {algbw / 1.01:6.2f}  {busbw / 1.01:6.2f}  {wrong:>5s}"
        )
        total_bus += busbw
        n += 1
        size *= 4
    lines += [
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {total_bus / n:.4f} ",
        "#",
        f"# Collective test concluded: {collective}",
        "",
    ]
    return "\n".join(lines)


PUBLIC = Path(__file__).resolve().parent / "fixtures" / "nccl" / "public"  # real logs from public issues


def lines_of(path: Path) -> list[str]:
    """A fixture's lines, as the scanner's evidence quotes them."""
    return path.read_text().splitlines()


def write_lines(path: Path, lines: list[str]) -> Path:
    """A log built from real lines (each test says which), one per line."""
    path.write_text("\n".join(lines) + "\n")
    return path
