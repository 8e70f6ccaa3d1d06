"""Multi-communicator jobs written as NCCL Inspector records (v2.30 format, ``tests/inspector_records.py``).

A job is ``nodes`` pods x ``gpus`` processes (one file per process, ``<hostname>-pid<pid>.log``) and a set of
communicators over them, the way real parallel layouts split the world:

* :func:`hsdp`: hybrid-sharded data parallelism (FSDP/HSDP): shard groups of two whole nodes (all GPUs of each,
  16 ranks over 2 nodes) and replicate groups with *one GPU per node* (one per GPU index and position in the
  shard group): the replicate groups run at one NIC's bandwidth by design.
* :func:`megatron`: tensor parallel inside the node (``nnodes`` 1, never judged), context-parallel pairs of
  nodes on one rail (2 ranks, 2 nodes) and data-parallel groups across every second node on one rail.

Healthy figures are an H200 RoCE pool's (8 x 400 Gb/s NICs): ~355 GB/s busbw on whole-node communicators, ~48
on one-GPU-per-node ones. Faults: ``slow`` = {(node, gpu): factor}: every communicator across nodes that contains
that process runs at ``factor`` of its bandwidth (a rail at a third: 1/3); ``late`` = (node, gpu, delay_us): the
process reaches every collective ``delay_us`` late, so every other rank's kernel waits that long (its own
execution time is the shortest). Execution times carry a deterministic +-2% jitter per rank.

Each dump round (60 s apart, each process's dump thread at its own offset) writes, per communicator, the
``per_dump`` collectives completed since the last dump, all with the same ``coll_sn`` on every rank: what the
2.30 plugin's ring gives. ``drop`` = {(node, gpu)}: processes whose plugin writes nothing (a crashed or
disabled plugin).
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from inspector_records import Comm, bandwidths, coll_line, exec_us_for

FULL_BUSBW = 355.0
NIC_BUSBW = 48.0
AR_BYTES = 256 << 20


@dataclass
class Group:
    comm: Comm
    members: list[tuple[int, int]]  # (node, gpu) in rank order


@dataclass
class LayoutJob:
    name: str
    nodes: int
    gpus: int
    groups: list[Group]
    slow: dict[tuple[int, int], float] = field(default_factory=dict)
    late: tuple[int, int, int] | None = None
    drop: set[tuple[int, int]] = field(default_factory=set)
    shape_busbw: dict[int, float] = field(default_factory=dict)  # ranks per node -> busbw (default: healthy)
    per_dump: int = 3
    start_us: int = 1_764_576_000_000_000
    seed: int = 7

    def host(self, node: int) -> str:
        return f"{self.name}-workers-0-{node}"

    def pid(self, node: int, gpu: int) -> int:
        return 300 + gpu

    def file(self, node: int, gpu: int) -> str:
        return f"{self.host(node)}-pid{self.pid(node, gpu)}.log"

    def healthy_busbw(self, g: Group) -> float:
        per_node = g.comm.nranks // g.comm.nnodes
        if per_node in self.shape_busbw:
            return self.shape_busbw[per_node]
        return FULL_BUSBW if per_node >= self.gpus else NIC_BUSBW * per_node

    def dump(self, rnd: int) -> dict[str, str]:
        """Every process's lines for dump round ``rnd`` (0-based): file name -> text."""
        rng = random.Random(self.seed * 1_000_003 + rnd)
        out: dict[str, list[str]] = {}
        for g in self.groups:
            if g.comm.nranks < 2:
                continue  # a one-rank group (DP of 1) runs no collective across anything
            bw = self.healthy_busbw(g)
            if g.comm.nnodes > 1:
                for m in g.members:
                    bw *= self.slow.get(m, 1.0)
            base = exec_us_for("AllReduce", AR_BYTES, g.comm.nranks, bw)
            for i in range(self.per_dump):
                sn = rnd * self.per_dump + i + 1
                for rank, (node, gpu) in enumerate(g.members):
                    if (node, gpu) in self.drop:
                        continue
                    us = base * (1 + rng.uniform(-0.02, 0.02))
                    late = self.late
                    if late is not None and (late[0], late[1]) in g.members and (node, gpu) != late[:2]:
                        us += late[2]
                    us_i = max(1, round(us))
                    dump_us = self.start_us + rnd * 60_000_000 + node * 1_700 + gpu * 113
                    out.setdefault(self.file(node, gpu), []).append(coll_line(
                        g.comm, rank, self.host(node), self.pid(node, gpu), dump_us, "AllReduce", sn, AR_BYTES,
                        us_i))
        return {f: "".join(lines) for f, lines in out.items()}

    def write(self, directory: Path, rounds: range) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for r in rounds:
            for name, text in self.dump(r).items():
                with (directory / name).open("a") as f:
                    f.write(text)


def _id(kind: str, *parts: int) -> str:
    h = 0x1F3C9E4A00000000 + zlib.crc32(repr((kind, *parts)).encode())
    return f"0x{h:x}"


def hsdp(name: str = "llm-hsdp", nodes: int = 4, gpus: int = 8, **kw: object) -> LayoutJob:
    """Shard groups: node pairs (2k, 2k+1), all GPUs; replicate groups: for each position j in the pair and GPU g,
    the GPU g of nodes j, j+2, j+4, ... (one GPU per node)."""
    groups = []
    for k in range(nodes // 2):
        members = [(2 * k + j, g) for j in range(2) for g in range(gpus)]
        groups.append(Group(Comm(_id("shard", k), 2 * gpus, 2, f"shard{k}"), members))
    for j in range(2):
        for g in range(gpus):
            members = [(n, g) for n in range(j, nodes, 2)]
            groups.append(Group(Comm(_id("replicate", j, g), len(members), len(members), f"rep{j}.{g}"), members))
    return LayoutJob(name, nodes, gpus, groups, **kw)  # type: ignore[arg-type]


def megatron(name: str = "llm-3d", nodes: int = 16, gpus: int = 8, **kw: object) -> LayoutJob:
    """TP=gpus inside each node, CP=2 across node pairs (one rail), DP=nodes/2 across every second node."""
    groups = []
    for n in range(nodes if gpus > 1 else 0):
        groups.append(Group(Comm(_id("tp", n), gpus, 1, f"tp{n}"), [(n, g) for g in range(gpus)]))
    for k in range(nodes // 2):
        for g in range(gpus):
            groups.append(Group(Comm(_id("cp", k, g), 2, 2, f"cp{k}.{g}"), [(2 * k, g), (2 * k + 1, g)]))
    for cp in range(2):
        for g in range(gpus):
            members = [(n, g) for n in range(cp, nodes, 2)]
            groups.append(Group(Comm(_id("dp", cp, g), len(members), len(members), f"dp{cp}.{g}"), members))
    return LayoutJob(name, nodes, gpus, groups, **kw)  # type: ignore[arg-type]


__all__ = ["LayoutJob", "bandwidths", "hsdp", "megatron"]
