"""Writer of NCCL Inspector JSON records in the plugin's exact output format, for fixtures, tests and the bench.

The format is the one the plugin's JSON writer produces (NVIDIA/nccl ``plugins/profiler/inspector``:
``inspector_json.cc`` and ``json.cc`` at v2.30.7-1, commit 73cf112295c33aee2b895f329f592f2a9b4b0f97;
``ext-profiler/inspector/inspector.cc`` at v2.28.9-1, commit dbc86fd06e8b0c4517b95d8958a09ccacf9520c9): one
compact object per line (no spaces), keys in the writer's order, integers as ``%d``/``%lu``, doubles as ``%lf``
(six decimals), NaN as ``"nan"``, ``/`` escaped as ``\\/`` in strings. Bandwidths are computed the way the
plugin computes them from the integer execution time: algbw = traffic / 1e9 / (us / 1e6) with traffic the
message size (x nranks for AllGather and ReduceScatter), busbw = algbw x nccl-tests' factor.

Nothing here was captured on a GPU: a session lent one runs ``bench/agent/h200_agent_check.sh``, which keeps the
real output under ``bench/device/``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

FACTOR = {"AllReduce": lambda n: 2 * (n - 1) / n, "AllGather": lambda n: (n - 1) / n,
          "ReduceScatter": lambda n: (n - 1) / n, "Broadcast": lambda n: 1.0, "Reduce": lambda n: 1.0}
PER_RANK = {"AllGather", "ReduceScatter"}


def _s(v: str) -> str:
    return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("/", "\\/") + '"'


def _d(v: float) -> str:
    return '"nan"' if v != v else f"{v:f}"


@dataclass
class Comm:
    id: str
    nranks: int
    nnodes: int
    name: str = "unknown"


def exec_us_for(coll: str, msg_bytes: int, nranks: int, busbw_gbps: float) -> int:
    """The integer execution time that gives ``busbw_gbps`` for this collective (what the plugin would see)."""
    traffic = msg_bytes * nranks if coll in PER_RANK else msg_bytes
    algbw = busbw_gbps / FACTOR[coll](nranks)
    return max(1, round(traffic / 1e9 / algbw * 1e6))


def bandwidths(coll: str, msg_bytes: int, nranks: int, exec_us: int) -> tuple[float, float]:
    traffic = msg_bytes * nranks if coll in PER_RANK else msg_bytes
    t = exec_us / 1e6
    algbw = traffic / 1e9 / t if t else 0.0
    return algbw, algbw * FACTOR[coll](nranks)


def coll_line(comm: Comm, rank: int, host: str, pid: int, dump_us: int, coll: str, sn: int, msg_bytes: int,
              exec_us: int, *, version: str = "2.30", timing: str = "kernel_gpu", busbw: float | None = None,
              git_rev: str = "") -> str:
    """One coll_perf record line as the plugin of ``version`` ("2.28" or "2.30") writes it, newline included."""
    algbw, bus = bandwidths(coll, msg_bytes, comm.nranks, exec_us)
    if busbw is not None:
        bus = busbw
    header = f'"id":{_s(comm.id)},'
    if version >= "2.30":
        header += f'"comm_name":{_s(comm.name)},'
    header += f'"rank":{rank},"n_ranks":{comm.nranks},"nnodes":{comm.nnodes}'
    meta = (f'"inspector_output_format_version":"v4.0","git_rev":{_s(git_rev)},'
            f'"rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":{dump_us},"hostname":{_s(host)},'
            f'"pid":{pid}')
    perf = (f'"coll":{_s(coll)},"coll_sn":{sn},"coll_msg_size_bytes":{msg_bytes},"coll_exec_time_us":{exec_us},'
            f'"coll_timing_source":{_s(timing)},"coll_algobw_gbs":{_d(algbw)},"coll_busbw_gbs":{_d(bus)}')
    return '{"header":{' + header + '},"metadata":{' + meta + '},"coll_perf":{' + perf + "}}\n"


def p2p_line(comm: Comm, rank: int, host: str, pid: int, dump_us: int, op: str, sn: int, peer: int, msg_bytes: int,
             exec_us: int) -> str:
    """One p2p_perf record (2.30 and later)."""
    t = exec_us / 1e6
    bw = msg_bytes / 1e9 / t if t else 0.0
    return ('{"header":{' + f'"id":{_s(comm.id)},"comm_name":{_s(comm.name)},"rank":{rank},"n_ranks":{comm.nranks},'
            f'"nnodes":{comm.nnodes}' + '},"metadata":{' + '"inspector_output_format_version":"v4.0","git_rev":"",'
            f'"rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":{dump_us},"hostname":{_s(host)},'
            f'"pid":{pid}' + '},"p2p_perf":{' + f'"p2p":{_s(op)},"p2p_sn":{sn},"p2p_peer":{peer},'
            f'"p2p_msg_size_bytes":{msg_bytes},"p2p_exec_time_us":{exec_us},"p2p_timing_source":"kernel_gpu",'
            f'"p2p_algobw_gbs":{_d(bw)},"p2p_busbw_gbs":{_d(bw)}' + "}}\n")


@dataclass
class Job:
    """A data-parallel job: ``nodes`` pods (hostnames as a JobSet names them) x ``gpus`` processes each."""

    name: str = "llm-sft"
    nodes: int = 2
    gpus: int = 8
    version: str = "2.30"
    busbw: dict[str, float] | None = None  # per collective, across nodes
    intra_busbw: float = 420.0  # the NVLink communicator (nnodes 1)
    start_us: int = 1_764_576_000_000_000  # 2025-12-01T08:00:00Z

    def host(self, node: int) -> str:
        return f"{self.name}-workers-0-{node}"

    def pid(self, node: int, gpu: int) -> int:
        return 200 + gpu

    def file(self, node: int, gpu: int) -> str:
        return f"{self.host(node)}-pid{self.pid(node, gpu)}.log"

    @property
    def world(self) -> Comm:
        return Comm("0x7f3c9e4a1b2c3d", self.nodes * self.gpus, self.nodes, "DP")

    @property
    def node_comm(self) -> Comm:
        return Comm("0x5d1e0a7b9c4f21", self.gpus, 1, "TP")

    def dump(self, node: int, gpu: int, index: int, *, per_dump: int = 4) -> str:
        """What one process writes at its ``index``-th dump (interval 60 s): its latest collectives per comm."""
        bw = self.busbw or {"AllReduce": 355.0, "AllGather": 340.0, "ReduceScatter": 338.0}
        dump_us = self.start_us + index * 60_000_000 + node * 1_700 + gpu * 113
        rank = node * self.gpus + gpu
        host, pid = self.host(node), self.pid(node, gpu)
        lines = []
        n = 1 if self.version < "2.30" else per_dump  # 2.28/2.29: the latest collective per communicator only
        for k in range(n):
            sn = index * per_dump + k + 1
            for coll, size in (("AllReduce", 256 << 20), ("AllGather", 32 << 20), ("ReduceScatter", 32 << 20)):
                if coll not in bw:
                    continue
                us = exec_us_for(coll, size, self.world.nranks, bw[coll] * (1 + 0.01 * math.sin(sn + rank)))
                lines.append(coll_line(self.world, rank, host, pid, dump_us, coll, sn, size, us,
                                       version=self.version))
            # A small all-reduce (latency bound: not judged) and the intra-node communicator (not the fabric).
            lines.append(coll_line(self.world, rank, host, pid, dump_us, "AllReduce", sn, 65536,
                                   exec_us_for("AllReduce", 65536, self.world.nranks, 9.5), version=self.version))
            if self.gpus > 1:
                lines.append(coll_line(self.node_comm, gpu, host, pid, dump_us, "AllReduce", sn, 128 << 20,
                                       exec_us_for("AllReduce", 128 << 20, self.gpus, self.intra_busbw),
                                       version=self.version))
        return "".join(lines)

    def write(self, directory: Path, dumps: int, *, first: int = 0) -> int:
        """Append ``dumps`` dumps of every process to ``directory``; returns the bytes written."""
        directory.mkdir(parents=True, exist_ok=True)
        total = 0
        for node in range(self.nodes):
            for gpu in range(self.gpus):
                text = "".join(self.dump(node, gpu, i) for i in range(first, first + dumps))
                with (directory / self.file(node, gpu)).open("a", encoding="ascii") as f:
                    f.write(text)
                total += len(text)
        return total
