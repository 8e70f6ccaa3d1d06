"""Where a running job is slow: the late rank and the slow node, from NCCL Inspector records alone (pure).

Every rank of a communicator writes its own record of each collective (``nccl.inspector.CollRecord``): the
communicator's ``id`` and the collective's ``coll_sn`` are the same on every rank (NCCL's per-communicator,
per-function sequence number, the same counter RAS reports as launch counts), so the records of one collective
instance are aligned across ranks by ``(id, coll, coll_sn)``, never by time: dump timestamps come from each
node's own clock, and clocks skew.

**The late rank.** ``coll_exec_time_us`` is the GPU kernel's time. A rank that reaches the collective late
starts its kernel last, while every other rank's kernel has been running, waiting for it: in an aligned instance
the late rank shows the *shortest* execution time, and the others' excess over it is how long they waited. A
process is *late* when it is the shortest in most instances (``late_share``) by a margin that is not jitter
(``late_min_s`` and ``late_fraction`` of the instance's time). A CPU-side straggler (data loader, checkpoint)
looks exactly the same here: the finding is "rank N is late", never "its fabric is slow".

**The slow node.** A communicator's busbw is compared with the job's other communicators of the same shape (same
collective, ranks, nodes and ranks per node: ``peers``): below ``slow_ratio`` of their median it is *slow*. A slow
link or rail slows every communicator across nodes that contains the process (GPU, and its NIC) behind it, while
that process's other communicators are not slow. A process is a *candidate* when at least one of its communicators
across nodes is slow and none of them is healthy; the candidates that explain the slow communicators (a greedy
cover, most slow communicators first) are the suspects, each with its node. Communicators no candidate explains
are reported, unplaced. Two candidates that explain exactly the same communicators are both named, each with half
the confidence: the records cannot tell them apart.

**Rounds and confidence.** A *round* is every process's next dump (its own count of distinct dump times, so no
cross-node clock is read); a finding holds over rounds when :meth:`Attribution.judge` sees it again after the
round advanced. Confidence is the share of rounds it held (up to ``rounds``), times the coverage of the records
(ranks that reported per instance over ``n_ranks``; dropped or missing records lower it, #2304), split between
tied suspects. Bounded: ``max_instances`` pending instances (an instance is folded into per-process lateness and
per-communicator busbw once every rank reported it), ``window`` values per communicator and per process.
"""

from __future__ import annotations

import statistics
from array import array
from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from fabricguard.nccl.inspector import JUDGED, CollRecord, per_node, shape_text

Process = tuple[str, int]  # (hostname, pid): one rank's process, one file ``<hostname>-pid<pid>.log``


@dataclass
class _Comm:
    id: str
    name: str | None
    nranks: int
    nnodes: int
    members: dict[int, Process] = field(default_factory=dict)  # comm rank -> process
    busbw: dict[str, deque[float]] = field(default_factory=dict)  # collective -> recent large-message busbw


@dataclass
class _Lat:
    """One process's latest aligned collectives, compactly: was it the shortest, how long the others waited (s),
    how long the collective took (s)."""

    shortest: array[int] = field(default_factory=lambda: array("b"))
    waits: array[float] = field(default_factory=lambda: array("d"))
    times: array[float] = field(default_factory=lambda: array("d"))

    def add(self, shortest: bool, wait: float, took: float, window: int) -> None:
        self.shortest.append(1 if shortest else 0)
        self.waits.append(wait)
        self.times.append(took)
        if len(self.waits) > window:
            del self.shortest[0], self.waits[0], self.times[0]


@dataclass(frozen=True)
class LateRank:
    """A process that reaches its collectives late: every other rank of its communicators waits for it."""

    hostname: str
    pid: int
    ranks: dict[str, int]  # communicator id -> its rank there
    instances: int  # aligned instances it took part in (window)
    shortest: int  # ... in which its execution time was the shortest
    lateness_s: float  # median of how long the others waited for it
    rounds: int  # consecutive rounds it held
    confidence: float

    @property
    def share(self) -> float:
        return self.shortest / self.instances if self.instances else 0.0

    @property
    def rank(self) -> int:
        """Its rank in its widest communicator (the job's world when there is one)."""
        return next(iter(self.ranks.values()), -1)

    def to_dict(self) -> dict[str, Any]:
        return {"hostname": self.hostname, "pid": self.pid, "rank": self.rank, "ranks": self.ranks,
                "instances": self.instances, "shortest": self.shortest, "lateness_seconds": round(self.lateness_s, 6),
                "rounds": self.rounds, "confidence": round(self.confidence, 3)}


@dataclass(frozen=True)
class SlowComm:
    id: str
    name: str | None
    collective: str
    busbw_gbps: float
    peers_gbps: float  # median of its shape peers
    nranks: int
    nnodes: int

    @property
    def ratio(self) -> float:
        return self.busbw_gbps / self.peers_gbps if self.peers_gbps else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "collective": self.collective,
                "busbw_gbps": round(self.busbw_gbps, 3), "peers_gbps": round(self.peers_gbps, 3),
                "ratio": round(self.ratio, 3), "nranks": self.nranks, "nnodes": self.nnodes}


@dataclass(frozen=True)
class SlowNode:
    """A node whose process (GPU and its NIC) every slow communicator it is in points at."""

    hostname: str
    pids: tuple[int, ...]
    explains: tuple[str, ...]  # the slow communicators' ids it explains
    ratio: float  # the slow communicators' busbw over their peers' (median)
    tied_with: tuple[str, ...]  # other nodes that explain exactly the same communicators
    rounds: int
    confidence: float

    def to_dict(self) -> dict[str, Any]:
        return {"hostname": self.hostname, "pids": list(self.pids), "explains": list(self.explains),
                "ratio": round(self.ratio, 3), "tied_with": list(self.tied_with), "rounds": self.rounds,
                "confidence": round(self.confidence, 3)}


@dataclass(frozen=True)
class NodeView:
    """One node's share of the job's busbw: per shape, the median busbw of its worst process's communicators,
    and that process's median ratio to their peers (1.0: like every other node)."""

    hostname: str
    busbw_gbps: dict[int, float]  # ranks per node -> GB/s
    ratio: float

    def to_dict(self) -> dict[str, Any]:
        return {"hostname": self.hostname, "ratio": round(self.ratio, 3),
                "busbw_gbps": {shape_text(k): round(v, 3) for k, v in sorted(self.busbw_gbps.items())}}


@dataclass(frozen=True)
class AttributionView:
    """What the records say now: late ranks, slow nodes (with the rounds they held), unplaced slow communicators,
    the per-node view, and how complete the records were."""

    late: list[LateRank]
    slow: list[SlowNode]
    unplaced: list[SlowComm]
    slow_comms: list[SlowComm]
    nodes: list[NodeView]
    round: int
    coverage: float  # records received / records expected over aligned instances (1.0: nothing dropped)
    instances: int
    processes: int
    rounds_needed: int

    def confirmed_late(self) -> list[LateRank]:
        return [r for r in self.late if r.rounds >= self.rounds_needed]

    def confirmed_slow(self) -> list[SlowNode]:
        return [n for n in self.slow if n.rounds >= self.rounds_needed]

    def to_dict(self) -> dict[str, Any]:
        return {"round": self.round, "coverage": round(self.coverage, 3), "instances": self.instances,
                "processes": self.processes, "rounds_needed": self.rounds_needed,
                "late_ranks": [r.to_dict() for r in self.late], "slow_nodes": [n.to_dict() for n in self.slow],
                "unplaced_slow_communicators": [c.to_dict() for c in self.unplaced],
                "slow_communicators": [c.to_dict() for c in self.slow_comms],
                "nodes": [n.to_dict() for n in self.nodes]}


@dataclass
class Attribution:
    """Streaming per-rank and per-node analysis of one job's Inspector records (feed :meth:`add`, read
    :meth:`judge`). Deterministic in the records; bounded in memory."""

    large_bytes: int = 64 << 20
    rounds: int = 3  # a finding is confirmed after holding this many rounds
    slow_ratio: float = 0.7
    late_share: float = 0.6
    late_min_s: float = 0.001
    late_fraction: float = 0.1
    min_instances: int = 6
    min_peers: int = 3
    max_instances: int = 1024  # pending (not yet complete) instances kept
    window: int = 64
    _comms: dict[str, _Comm] = field(default_factory=dict)
    _inst: OrderedDict[tuple[str, str, int], dict[Process, tuple[int, float | None]]] = field(
        default_factory=OrderedDict)
    _born: dict[tuple[str, str, int], int] = field(default_factory=dict)  # pending instance -> round first seen
    _seen: dict[tuple[str, str], int] = field(default_factory=dict)  # (comm, coll) -> highest coll_sn seen
    _lat: dict[Process, _Lat] = field(default_factory=dict)
    _cover: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=4096))
    _dumps: dict[Process, tuple[int, int]] = field(default_factory=dict)  # process -> (last dump_us, count)
    _progress: int = 0  # new (comm, coll, sn) instances first seen: the job advancing
    _judged_round: int = -1
    _streak_late: dict[Process, int] = field(default_factory=dict)
    _streak_slow: dict[str, int] = field(default_factory=dict)
    _last: AttributionView | None = None

    @property
    def progress(self) -> int:
        """How many collective instances the job has been seen to start (grows while it advances)."""
        return self._progress

    @property
    def round(self) -> int:
        """The median over processes of how many dumps each wrote (clock-free)."""
        if not self._dumps:
            return 0
        return int(statistics.median_low(c for _, c in self._dumps.values()))

    def add(self, records: Iterable[CollRecord]) -> None:
        rnd = self.round  # once per batch: a median over the processes
        for r in records:
            proc = (r.hostname, r.pid)
            last, count = self._dumps.get(proc, (-1, 0))
            if r.dump_us != last:
                self._dumps[proc] = (r.dump_us, count + 1)
            if r.nnodes < 2:
                continue
            c = self._comms.get(r.comm)
            if c is None:
                c = self._comms[r.comm] = _Comm(r.comm, r.comm_name, r.nranks, r.nnodes)
            c.members[r.rank] = proc
            key = (r.comm, r.coll, r.sn)
            inst = self._inst.get(key)
            if inst is None:
                if r.sn <= self._seen.get(key[:2], -1) - self.window:
                    continue  # long finished (a late file, a restart's tail): not a new instance
                inst = self._inst[key] = {}
                self._born[key] = rnd
                if r.sn > self._seen.get(key[:2], -1):
                    self._seen[key[:2]] = r.sn
                    self._progress += 1
                if len(self._inst) > self.max_instances:
                    old, execs = self._inst.popitem(last=False)
                    self._born.pop(old, None)
                    self._finish(old, execs)
            bw = r.busbw_gbps if (r.coll in JUDGED and r.size_bytes >= self.large_bytes and r.busbw_gbps is not None
                                  and r.busbw_gbps > 0 and r.timing != "collective_cpu") else None
            inst[proc] = (r.exec_us, bw)
            if len(inst) >= c.nranks:
                self._born.pop(key, None)
                self._finish(key, self._inst.pop(key))

    def _finish(self, key: tuple[str, str, int], execs: dict[Process, tuple[int, float | None]]) -> None:
        """An instance every rank reported (or the oldest pending one): its lateness and busbw are kept."""
        c = self._comms[key[0]]
        self._cover.append((len(execs), c.nranks))
        if len(execs) < 2 or len(execs) * 2 < c.nranks:
            return  # too few ranks reported this instance to say who was late
        bws = [b for _, b in execs.values() if b is not None]
        if bws:
            # The rank that waited least moved the same bytes in the shortest time: its busbw is the link's,
            # a late rank's wait is not counted against the communicator.
            c.busbw.setdefault(key[1], deque(maxlen=self.window)).append(max(bws))
        longest = max(us for us, _ in execs.values())
        shortest = min(us for us, _ in execs.values())
        ties = sum(1 for us, _ in execs.values() if us == shortest)
        for p, (us, _) in execs.items():
            d = self._lat.get(p)
            if d is None:
                d = self._lat[p] = _Lat()
            d.add(ties == 1 and us == shortest, (longest - us) / 1e6, longest / 1e6, self.window)

    # ------------------------------------------------------------------------------------------------ judging

    def _lateness(self) -> tuple[dict[Process, tuple[int, int, list[float], list[float]]], float]:
        """Per process: (instances, times shortest, waits in s, instance times in s); and the records' coverage."""
        stats = {p: (len(d.waits), sum(d.shortest), list(d.waits), list(d.times))
                 for p, d in self._lat.items() if d.waits}
        got = sum(g for g, _ in self._cover)
        expected = sum(e for _, e in self._cover)
        return stats, (got / expected if expected else 1.0)

    def _late(self, stats: dict[Process, tuple[int, int, list[float], list[float]]]
              ) -> list[tuple[Process, int, int, float]]:
        out = []
        for p, (n, s, waits, times) in stats.items():
            if n < self.min_instances or s / n < self.late_share:
                continue
            wait = statistics.median(waits[-self.window:])
            if wait < self.late_min_s or wait < self.late_fraction * statistics.median(times[-self.window:]):
                continue
            out.append((p, n, s, wait))
        return sorted(out, key=lambda t: (-t[3], t[0]))

    def _comm_figures(self) -> tuple[list[SlowComm], dict[tuple[str, str], float], dict[tuple[str, str], float]]:
        """(slow communicators, busbw per (comm, collective), ratio per (comm, collective)) for judged comms."""
        by_shape: dict[tuple[str, int, int, int], list[tuple[_Comm, float]]] = {}
        for c in self._comms.values():
            for coll, vals in c.busbw.items():
                if vals:
                    key = (coll, c.nranks, c.nnodes, per_node(c.nranks, c.nnodes))
                    by_shape.setdefault(key, []).append((c, statistics.median(vals)))
        slow: list[SlowComm] = []
        bw: dict[tuple[str, str], float] = {}
        ratio: dict[tuple[str, str], float] = {}
        for (coll, _nr, _nn, _k), comms in by_shape.items():
            if len(comms) < self.min_peers:
                continue  # too few of its shape to compare with
            med = statistics.median(v for _, v in comms)
            for c, v in comms:
                bw[(c.id, coll)] = v
                ratio[(c.id, coll)] = v / med if med else 1.0
                if med and v < self.slow_ratio * med:
                    slow.append(SlowComm(c.id, c.name, coll, v, med, c.nranks, c.nnodes))
        return sorted(slow, key=lambda s: (s.ratio, s.id)), bw, ratio

    def _suspects(self, slow: list[SlowComm], ratio: dict[tuple[str, str], float]
                  ) -> tuple[list[tuple[str, list[Process], list[str], list[str]]], list[SlowComm]]:
        """(node suspects as (hostname, processes, comms explained, tied nodes), slow comms no one explains)."""
        slow_ids = {(s.id, s.collective) for s in slow}
        in_slow: dict[Process, set[tuple[str, str]]] = {}
        healthy: set[Process] = set()
        for (cid, coll) in ratio:
            c = self._comms[cid]
            for p in c.members.values():
                if (cid, coll) in slow_ids:
                    in_slow.setdefault(p, set()).add((cid, coll))
                else:
                    healthy.add(p)
        cands = {p: comms for p, comms in in_slow.items() if p not in healthy}
        left = set(slow_ids)
        chosen: list[tuple[str, list[Process], list[str], list[str]]] = []
        by_node: dict[str, set[tuple[str, str]]] = {}
        procs: dict[str, list[Process]] = {}
        for p, comms in cands.items():
            by_node.setdefault(p[0], set()).update(comms)
            procs.setdefault(p[0], []).append(p)
        while left and by_node:
            best = max(by_node, key=lambda h: (len(by_node[h] & left), h))
            gain = by_node[best] & left
            if not gain:
                break
            tied = sorted(h for h in by_node if h != best and by_node[h] & left == gain)
            for h in [best, *tied]:
                chosen.append((h, sorted(procs[h]), sorted(f"{c}" for c, _ in by_node[h]),
                               [t for t in [best, *tied] if t != h]))
                del by_node[h]
            left -= gain
        unplaced = [s for s in slow if (s.id, s.collective) in left]
        return chosen, unplaced

    def _nodes(self, bw: dict[tuple[str, str], float], ratio: dict[tuple[str, str], float]) -> list[NodeView]:
        per_proc: dict[Process, list[tuple[str, str]]] = {}
        for key in ratio:
            for p in self._comms[key[0]].members.values():
                per_proc.setdefault(p, []).append(key)
        worst: dict[str, tuple[float, Process]] = {}
        for p, keys in per_proc.items():
            r = statistics.median(ratio[k] for k in keys)
            if p[0] not in worst or (r, p) < worst[p[0]]:
                worst[p[0]] = (r, p)
        out = []
        for host, (r, p) in sorted(worst.items()):
            shapes: dict[int, list[float]] = {}
            for k in per_proc[p]:
                c = self._comms[k[0]]
                shapes.setdefault(per_node(c.nranks, c.nnodes), []).append(bw[k])
            out.append(NodeView(host, {k: statistics.median(v) for k, v in shapes.items()}, r))
        return out

    def judge(self) -> AttributionView:
        """The findings now; a finding's ``rounds`` grows once per round in which it is seen again. Between two
        rounds the last view stands (judging costs a pass over every process and communicator)."""
        rnd = self.round
        advanced = rnd > self._judged_round
        if not advanced and self._last is not None:
            return self._last
        if advanced:
            # Instances still missing ranks two rounds after they were first seen will not complete: their
            # records were dropped (or the plugin on those ranks failed). Judged with what came, counted as missing.
            for key in [k for k, born in self._born.items() if born < rnd - 1]:
                del self._born[key]
                self._finish(key, self._inst.pop(key))
        stats, coverage = self._lateness()
        late = self._late(stats)
        slow, bw, ratio = self._comm_figures()
        chosen, unplaced = self._suspects(slow, ratio)
        if advanced:
            self._judged_round = rnd
            now_late = {p for p, *_ in late}
            self._streak_late = {p: self._streak_late.get(p, 0) + 1 for p in now_late}
            now_slow = {h for h, *_ in chosen}
            self._streak_slow = {h: self._streak_slow.get(h, 0) + 1 for h in now_slow}
        cov = min(1.0, coverage)
        late_out = []
        for p, n, s, wait in late:
            ranks = {c.id: r for c in sorted(self._comms.values(), key=lambda c: (-c.nranks, c.id))
                     for r, q in c.members.items() if q == p}
            rounds = self._streak_late.get(p, 0)
            late_out.append(LateRank(p[0], p[1], ranks, n, s, wait, rounds,
                                     min(1.0, rounds / self.rounds) * (s / n) * cov))
        slow_out = []
        slow_by_id = {s.id: s for s in slow}
        for host, procs, explains, tied in chosen:
            rounds = self._streak_slow.get(host, 0)
            r = statistics.median(slow_by_id[c].ratio for c in explains if c in slow_by_id) if explains else 1.0
            slow_out.append(SlowNode(host, tuple(p[1] for p in procs), tuple(explains), r, tuple(tied), rounds,
                                     min(1.0, rounds / self.rounds) * cov / (1 + len(tied))))
        view = AttributionView(late_out, slow_out, unplaced, slow, self._nodes(bw, ratio), rnd, cov,
                               len(self._cover), len(self._dumps), self.rounds)
        self._last = view
        return view
