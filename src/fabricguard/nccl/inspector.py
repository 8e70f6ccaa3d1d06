"""NCCL Inspector records: typed, read incrementally and boundedly, summarised per collective across nodes.

The Inspector is NCCL's own profiler plugin (NVIDIA/nccl ``plugins/profiler/inspector``, ``ext-profiler/inspector``
before 2.29.7; built as ``libnccl-profiler-inspector.so``). In JSON mode each *process* writes one file,
``<NCCL_INSPECTOR_DUMP_DIR>/<hostname>-pid<pid>.log``, holding every communicator of the process interleaved: one
compact JSON object per line, keys in a fixed order, doubles printed with ``%lf`` (six decimals) and NaN as the
string ``"nan"``::

    {"header":{"id":"0x7f..","comm_name":"DP","rank":0,"n_ranks":16,"nnodes":2},
     "metadata":{"inspector_output_format_version":"v4.0","git_rev":"","rec_mechanism":"nccl_profiler_interface",
                 "dump_timestamp_us":1764576000123456,"hostname":"llm-sft-workers-0-0","pid":211},
     "coll_perf":{"coll":"AllReduce","coll_sn":812,"coll_msg_size_bytes":268435456,"coll_exec_time_us":1490,
                  "coll_timing_source":"kernel_gpu","coll_algobw_gbs":180.158..,"coll_busbw_gbs":337.796..}}

What differs between versions (read from the plugin's source at each tag):

- 2.28.3 - 2.29.7: the header has ``id, rank, n_ranks, nnodes``; each dump writes, per communicator, only the
  *latest* completed collective (a sample), so a file holds at most one record per communicator per interval.
  The interval's default 0 starts no dump thread at all.
- 2.30: the header gains ``comm_name`` (after ``id``); each dump drains a per-communicator ring of completed
  collectives (``NCCL_INSPECTOR_DUMP_COLL_RING_SIZE``, default 1024, the oldest overwritten), so every collective
  at or above ``NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES`` appears once; ``p2p_perf`` records (Send/Recv) appear
  beside ``coll_perf`` unless ``NCCL_INSPECTOR_ENABLE_P2P=0``; only GPU-timed (``kernel_gpu``) events are kept
  unless ``NCCL_INSPECTOR_REQUIRE_KERNEL_TIMING=0``. The default interval is -1: no dump thread, and (despite
  the README) no dump at teardown either, so nothing is written unless an interval is set.
- Every version: ``inspector_output_format_version`` is ``"v4.0"``; ``dump_timestamp_us`` is the time of the
  write, not of the collective; the file is opened with ``fopen("w")`` (a restarted process with the same
  hostname and pid truncates the previous file); a dump larger than the stdio buffer reaches the disk in pieces,
  so a reader sees half lines; a string the writer cannot escape (a control character in a comm name) leaves
  a malformed line; ``coll_msg_size_bytes`` is per rank for AllGather and ReduceScatter (busbw accounts for it);
  uint8 collectives may report a size near 2^64.

This module reads those files as they grow: a file's offset is kept, only complete lines are parsed (a half
line waits), a truncated or replaced file starts over, a poll reads at most ``budget_bytes`` per file (a
backlog is caught up over several polls), an overlong line is dropped, and nothing is read twice. Only
communicators that span nodes (``nnodes > 1``) are kept: those are the ones the fabric carries. For each
collective the bus bandwidth of the *large* messages (nccl-tests' total size S at or above a threshold; small
ones measure latency, not the fabric) is summarised as a median over the records kept.
"""

from __future__ import annotations

import json
import os
import re
import statistics
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabricguard.times import MAX_EPOCH_US
from fabricguard.userfiles import LineCutter, SourceError, open_in

FORMAT_VERSIONS = frozenset({"v4.0"})
FILE_NAME = re.compile(r"^(?P<host>.+)-pid(?P<pid>\d+)\.log$")
# Collectives whose busbw is normalised to the link rate (nccl-tests' factors): the ones judged against a floor.
JUDGED = ("AllReduce", "AllGather", "ReduceScatter")
# nccl-tests counts S as the whole gathered / scattered buffer; the Inspector's size for these is per rank.
_PER_RANK = frozenset({"AllGather", "AllGatherV", "ReduceScatter"})
_BOGUS_SIZE = 1 << 56  # uint8 collectives: a size near 2^64
_SINGLE_NODE = b'"nnodes":1}'  # the header's last key: an intra-node communicator, skipped before parsing
MAX_LINE = 256 * 1024  # a verbose record with many channels is a few kB; longer is not a record
_HEAD = 64


class InspectorInputError(ValueError):
    """A directory of Inspector records cannot be read; the message names it and says what to change."""


@dataclass(slots=True, eq=True)
class CollRecord:
    """One ``coll_perf`` record: what one rank saw of one collective of one communicator."""

    comm: str
    comm_name: str | None
    rank: int
    nranks: int
    nnodes: int
    version: str
    dump_us: int
    hostname: str
    pid: int
    coll: str
    sn: int
    msg_bytes: int
    exec_us: int
    timing: str | None
    algbw_gbps: float | None
    busbw_gbps: float | None

    @property
    def size_bytes(self) -> int:
        """nccl-tests' S: the total buffer (per-rank size x ranks for AllGather and ReduceScatter)."""
        return self.msg_bytes * self.nranks if self.coll in _PER_RANK else self.msg_bytes

    @property
    def per_node(self) -> int:
        """The communicator's ranks per node (its shape with ``nnodes``); 0 when they do not divide evenly."""
        return per_node(self.nranks, self.nnodes)


def per_node(nranks: int, nnodes: int) -> int:
    """Ranks per node of a communicator of ``nranks`` over ``nnodes`` (0: uneven, judged only against its peers).
    A hybrid-sharded job has node-pair shard groups (all GPUs of each node) and replicate groups with one GPU per
    node: the two reach different bandwidths by design, so each shape is judged on its own."""
    return nranks // nnodes if nnodes > 0 and nranks % nnodes == 0 else 0


def shape_text(ranks_per_node: int) -> str:
    return f"{ranks_per_node}/node" if ranks_per_node else "uneven"


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None  # "nan", absent or anything else: no figure
    f = float(v)
    return f if f == f and f not in (float("inf"), float("-inf")) else None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


# What a record's numbers can be (a tenant writes these files): anything outside is not a record. 2^63 as a dump
# time would stop whoever turns it into a datetime; a 2^64 size or rank count is no collective.
MAX_RANKS = 1 << 24
MAX_COUNT = 1 << 62  # a collective's sequence number, its execution time in microseconds, a pid
MAX_GBPS = 100_000.0  # 100 TB/s of bus bandwidth: far past any link, so a bigger figure is not a measurement


def _checked(rec: CollRecord) -> CollRecord | None:
    """``rec`` when every number in it is in range (the dump time a real instant, ranks and counts possible),
    else None; a bandwidth out of range is left out (no figure) rather than dropping the record."""
    if not (1 <= rec.nnodes <= rec.nranks <= MAX_RANKS and 0 <= rec.rank < rec.nranks):
        return None
    if not (0 <= rec.dump_us <= MAX_EPOCH_US and 0 <= rec.msg_bytes < _BOGUS_SIZE):
        return None
    if not (0 <= rec.exec_us <= MAX_COUNT and 0 <= rec.sn <= MAX_COUNT and 0 <= rec.pid <= MAX_COUNT):
        return None
    for f in ("algbw_gbps", "busbw_gbps"):
        v = getattr(rec, f)
        if v is not None and not (0.0 <= v <= MAX_GBPS):
            setattr(rec, f, None)
    return rec


# The writer's exact layout (both header variants): read without building a dict; anything else (escapes, another
# key order, "nan") takes the general path.
_S = rb'"([^"\\]*)"'
# Digit counts are bounded (an integer of thousands of digits is no record: int() would refuse it); a line with
# more takes the general path, where json's own limit refuses it.
_FAST = re.compile(
    rb'\{"header":\{"id":' + _S + rb',(?:"comm_name":' + _S + rb',)?'
    rb'"rank":(\d{1,19}),"n_ranks":(\d{1,19}),"nnodes":(\d{1,19})\},'
    rb'"metadata":\{"inspector_output_format_version":' + _S + rb',"git_rev":"[^"\\]*","rec_mechanism":"[^"\\]*",'
    rb'"dump_timestamp_us":(\d{1,19}),"hostname":' + _S + rb',"pid":(\d{1,19})\},'
    rb'"coll_perf":\{"coll":' + _S + rb',"coll_sn":(\d{1,19}),"coll_msg_size_bytes":(\d{1,19}),'
    rb'"coll_exec_time_us":(\d{1,19}),'
    rb'(?:"coll_timing_source":' + _S + rb',)?'
    rb'"coll_algobw_gbs":(\d{1,20}\.\d{1,20}),"coll_busbw_gbs":(\d{1,20}\.\d{1,20})[,}]'
)


def _fast(line: bytes) -> CollRecord | None:
    m = _FAST.match(line)
    if m is None:
        return None
    g = m.groups()
    size, nranks, nnodes = int(g[11]), int(g[3]), int(g[4])
    if size >= _BOGUS_SIZE or nranks < 1 or nnodes < 1:
        return None
    return _checked(CollRecord(
        g[0].decode(), g[1].decode() if g[1] is not None else None, int(g[2]), nranks, nnodes, g[5].decode(),
        int(g[6]), g[7].decode(), int(g[8]), g[9].decode(), int(g[10]), size, int(g[12]),
        g[13].decode() if g[13] is not None else None, float(g[14]), float(g[15])))


def parse_record(line: bytes | str) -> CollRecord | None:
    """The ``coll_perf`` record of one line, or None (a ``p2p_perf`` record, a malformed or foreign line)."""
    if isinstance(line, bytes):
        try:
            rec = _fast(line)
        except UnicodeDecodeError:
            rec = None
        if rec is not None:
            return rec
    try:
        doc = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: a tenant's deeply nested line
        return None
    if not isinstance(doc, dict):
        return None
    h, m, c = doc.get("header"), doc.get("metadata"), doc.get("coll_perf")
    if not isinstance(h, dict) or not isinstance(m, dict) or not isinstance(c, dict):
        return None
    nranks, nnodes, rank = _int(h.get("n_ranks")), _int(h.get("nnodes")), _int(h.get("rank"))
    size, exec_us, sn = _int(c.get("coll_msg_size_bytes")), _int(c.get("coll_exec_time_us")), _int(c.get("coll_sn"))
    coll, comm = c.get("coll"), h.get("id")
    if None in (nranks, nnodes, rank, size, exec_us, sn) or not isinstance(coll, str) or not isinstance(comm, str):
        return None
    assert nranks is not None and nnodes is not None and rank is not None
    assert size is not None and exec_us is not None and sn is not None
    if nranks < 1 or nnodes < 1 or size < 0 or size >= _BOGUS_SIZE or exec_us < 0:
        return None
    name = h.get("comm_name")
    timing = c.get("coll_timing_source")
    return _checked(CollRecord(
        comm=comm, comm_name=name if isinstance(name, str) else None, rank=rank, nranks=nranks, nnodes=nnodes,
        version=str(m.get("inspector_output_format_version") or ""), dump_us=_int(m.get("dump_timestamp_us")) or 0,
        hostname=str(m.get("hostname") or ""), pid=_int(m.get("pid")) or 0, coll=coll, sn=sn, msg_bytes=size,
        exec_us=exec_us, timing=timing if isinstance(timing, str) else None,
        algbw_gbps=_num(c.get("coll_algobw_gbs")), busbw_gbps=_num(c.get("coll_busbw_gbs"))))


def is_inspector_file(path: Path, root: Path | None = None) -> bool:
    """Whether ``path`` is an Inspector JSON file: named ``<host>-pid<pid>.log`` and starting with its header.
    It is opened with ``userfiles.open_in`` (never through a link out of ``root``, default its folder)."""
    if not FILE_NAME.match(path.name):
        return False
    try:
        with open_in(root or path.parent, path) as f:
            return f.read(16).startswith(b'{"header":{"id":')
    except (OSError, SourceError):
        return False


# ------------------------------------------------------------------------------------------------ reading


@dataclass
class ReadStats:
    files: int = 0
    bytes: int = 0
    lines: int = 0
    records: int = 0  # coll_perf records parsed (any nnodes)
    kept: int = 0  # ... of communicators spanning nodes
    single_node: int = 0
    other: int = 0  # p2p_perf records, malformed or foreign lines, overlong lines
    truncations: int = 0
    refused: int = 0  # files not opened: a link out of the job's directory, not a regular file

    def add(self, o: ReadStats) -> None:
        for k in ("bytes", "lines", "records", "kept", "single_node", "other", "truncations", "refused"):
            setattr(self, k, getattr(self, k) + getattr(o, k))


@dataclass
class _FileState:
    inode: tuple[int, int]
    offset: int = 0
    cutter: LineCutter = field(default_factory=lambda: LineCutter(MAX_LINE))
    head: bytes = b""
    cut_first: bool = False  # started inside the file: the bytes up to the first newline are a cut line


@dataclass
class InspectorFollower:
    """Incremental reader of every Inspector file in ``directory`` (NCCL_INSPECTOR_DUMP_DIR of one job).

    The directory is the tenant's: files are opened with ``userfiles.open_in`` (never through a link out of
    ``root``, the job's directory; default ``directory``) and cut into lines by ``userfiles.LineCutter`` (an
    overlong line is dropped, never buffered). No file handle is held between polls: a file whose size and inode
    did not change costs one ``stat``. ``budget_bytes`` bounds what one poll reads per file, ``max_files`` how many
    files are followed."""

    directory: Path
    max_files: int = 4096
    budget_bytes: int = 4 << 20
    tail_bytes: int | None = None  # a file first seen larger than this is read from its last tail_bytes only
    root: Path | None = None
    _files: dict[str, _FileState] = field(default_factory=dict)
    total: ReadStats = field(default_factory=ReadStats)

    def _names(self) -> list[str]:
        try:
            with os.scandir(self.directory) as it:
                names = sorted(e.name for e in it if FILE_NAME.match(e.name) and e.is_file(follow_symlinks=False))
        except OSError:
            return []
        return names[: self.max_files]

    def poll(self) -> tuple[list[CollRecord], ReadStats]:
        """The records of communicators spanning nodes appended since the last poll, and what it cost."""
        stats = ReadStats()
        out: list[CollRecord] = []
        names = self._names()
        base = os.fspath(self.directory)
        for name in names:
            path = os.path.join(base, name)
            try:
                st = os.stat(path, follow_symlinks=False)
            except OSError:
                continue
            inode = (st.st_dev, st.st_ino)
            fs = self._files.get(name)
            if fs is None or fs.inode != inode or st.st_size < fs.offset:
                if fs is not None:
                    stats.truncations += 1  # replaced, or reopened with fopen("w") by a restarted process
                first = fs is None
                fs = self._files[name] = _FileState(inode)
                if first and self.tail_bytes is not None and st.st_size > self.tail_bytes:
                    # A controller that starts late needs the latest minutes, not the job's whole history: start
                    # at a line boundary within the last tail_bytes (the head check is skipped for such a file).
                    fs.offset = st.st_size - self.tail_bytes
                    fs.head = b"-"
            if st.st_size == fs.offset:
                continue
            self._read(path, fs, stats, out)
        stats.files = len(self._files)
        self.total.files = stats.files
        self.total.add(stats)
        return out, stats

    def _read(self, path: str, fs: _FileState, stats: ReadStats, out: list[CollRecord]) -> None:
        try:
            f = open_in(self.root or self.directory, Path(path))
        except SourceError:
            stats.refused += 1  # a link out of the job's directory, or not a regular file
            return
        with f:
            fd = f.fileno()
            try:
                if fs.head == b"-":
                    # Started inside the file: unless the byte before is a newline, the first line read is cut.
                    fs.cut_first = os.pread(fd, 1, fs.offset - 1) != b"\n"
                    fs.head = b""
                elif fs.head and os.pread(fd, len(fs.head), 0) != fs.head:
                    stats.truncations += 1  # rewritten in place past the old size between two polls
                    fs.offset, fs.cutter, fs.head, fs.cut_first = 0, LineCutter(MAX_LINE), b"", False
                block = os.pread(fd, self.budget_bytes, fs.offset)
            except OSError:
                return
        if not block:
            return
        if len(fs.head) < _HEAD and fs.offset == len(fs.head):
            fs.head += block[: _HEAD - len(fs.head)]
        fs.offset += len(block)
        stats.bytes += len(block)
        if fs.cut_first:
            nl = block.find(b"\n")
            if nl < 0:
                return
            block, fs.cut_first = block[nl + 1 :], False
        dropped = fs.cutter.overlong
        lines = fs.cutter.feed(block)
        stats.other += fs.cutter.overlong - dropped
        if lines:
            self._lines(lines, stats, out)

    @staticmethod
    def _lines(data: bytes, stats: ReadStats, out: list[CollRecord]) -> None:
        for line in data.split(b"\n"):
            if not line:
                continue  # the end of the block, or an overlong line the cutter dropped
            stats.lines += 1
            if _SINGLE_NODE in line and b'"coll_perf"' in line:
                stats.records += 1
                stats.single_node += 1
                continue
            rec = parse_record(line)
            if rec is None:
                stats.other += 1
                continue
            stats.records += 1
            if rec.nnodes > 1:
                stats.kept += 1
                out.append(rec)
            else:
                stats.single_node += 1


def read_dir(directory: Path, *, budget_bytes: int = 64 << 20, root: Path | None = None
             ) -> tuple[list[CollRecord], ReadStats]:
    """Every record of communicators spanning nodes in a finished job's Inspector directory (files opened only
    within ``root``, default the directory itself)."""
    f = InspectorFollower(directory, budget_bytes=budget_bytes, root=root)
    records: list[CollRecord] = []
    while True:
        got, st = f.poll()
        records += got
        if not st.bytes:
            break
    return records, f.total


# ------------------------------------------------------------------------------------------------ summary


@dataclass(frozen=True)
class CollectiveFigure:
    """The bus bandwidth of one collective at large message sizes, over the communicators spanning nodes."""

    collective: str
    busbw_gbps: float  # median of the records kept
    min_gbps: float
    max_gbps: float
    records: int
    nnodes: int  # the widest communicator seen
    nranks: int
    sizes: tuple[int, int]  # smallest and largest S kept
    first_us: int
    last_us: int
    comms: int
    hosts: int
    per_node: int | None = None  # the communicators' ranks per node (None: every shape pooled; 0: uneven)

    def to_dict(self) -> dict[str, Any]:
        return {"collective": self.collective, "ranks_per_node": self.per_node, "busbw_gbps": round(self.busbw_gbps, 3),
                "min_gbps": round(self.min_gbps, 3), "max_gbps": round(self.max_gbps, 3), "records": self.records,
                "nnodes": self.nnodes, "nranks": self.nranks, "min_size_bytes": self.sizes[0],
                "max_size_bytes": self.sizes[1], "first_dump_us": self.first_us, "last_dump_us": self.last_us,
                "communicators": self.comms, "hosts": self.hosts}


def usable(rec: CollRecord, large_bytes: int) -> bool:
    """A record that measures the fabric: spans nodes, large, GPU-timed or kernel-timed, with a busbw."""
    return (rec.nnodes > 1 and rec.size_bytes >= large_bytes and rec.busbw_gbps is not None
            and rec.busbw_gbps > 0 and rec.timing != "collective_cpu")


def _figure(coll: str, rs: list[CollRecord], shape: int | None) -> CollectiveFigure:
    bw = [r.busbw_gbps for r in rs if r.busbw_gbps is not None]
    return CollectiveFigure(
        coll, statistics.median(bw), min(bw), max(bw), len(rs), max(r.nnodes for r in rs),
        max(r.nranks for r in rs), (min(r.size_bytes for r in rs), max(r.size_bytes for r in rs)),
        min(r.dump_us for r in rs), max(r.dump_us for r in rs), len({r.comm for r in rs}),
        len({r.hostname for r in rs}), shape)


def summarize(records: Iterable[CollRecord], large_bytes: int) -> dict[str, CollectiveFigure]:
    """Per collective, the busbw of its large-message records on communicators that span nodes (every shape
    pooled: the canary's figure, whose communicators all have one shape)."""
    by: dict[str, list[CollRecord]] = {}
    for r in records:
        if usable(r, large_bytes):
            by.setdefault(r.coll, []).append(r)
    return {coll: _figure(coll, rs, None) for coll, rs in sorted(by.items())}


ShapeKey = tuple[str, int]  # (collective, ranks per node; 0 uneven)


def summarize_by_shape(records: Iterable[CollRecord], large_bytes: int) -> dict[ShapeKey, CollectiveFigure]:
    """Per collective and communicator shape (ranks per node), the busbw of its large-message records: a job's
    node-pair shard groups and its one-GPU-per-node replicate groups are figures of their own."""
    by: dict[ShapeKey, list[CollRecord]] = {}
    for r in records:
        if usable(r, large_bytes):
            by.setdefault((r.coll, r.per_node), []).append(r)
    return {k: _figure(k[0], rs, k[1]) for k, rs in sorted(by.items())}


@dataclass
class MinuteFigure:
    """One collective's busbw now: the median over the latest minutes, and how long it has been below a floor."""

    collective: str
    busbw_gbps: float
    records: int
    nnodes: int
    nranks: int
    last_us: int
    below_minutes: int = 0  # trailing minutes (by dump time) whose median was below the floor
    below_since_us: int | None = None
    per_node: int = 0  # the communicators' ranks per node (0: uneven)
    floor_gbps: float | None = None  # the floor this shape was judged against

    @property
    def key(self) -> ShapeKey:
        return self.collective, self.per_node


@dataclass
class Series:
    """A running job's large-message busbw per collective, bucketed by the minute of the dump that wrote it.

    Bounded: ``keep_minutes`` buckets per collective, ``per_minute`` values per bucket. Deterministic in the
    records alone (how they were batched into polls does not matter), so a replay from the start and a
    follower that polled all along reach the same figures."""

    large_bytes: int
    keep_minutes: int = 30
    per_minute: int = 128
    _b: dict[ShapeKey, dict[int, array[float]]] = field(default_factory=dict)
    _shape: dict[ShapeKey, tuple[int, int]] = field(default_factory=dict)

    def add(self, records: Iterable[CollRecord]) -> None:
        touched: set[ShapeKey] = set()
        for r in records:
            if not usable(r, self.large_bytes) or r.busbw_gbps is None:
                continue
            key = (r.coll, r.per_node)
            buckets = self._b.setdefault(key, {})
            vals = buckets.setdefault(r.dump_us // 60_000_000, array("d"))
            if len(vals) < self.per_minute:
                vals.append(r.busbw_gbps)
            nn, nr = self._shape.get(key, (0, 0))
            self._shape[key] = (max(nn, r.nnodes), max(nr, r.nranks))
            touched.add(key)
        for c in touched:
            buckets = self._b[c]
            if len(buckets) > self.keep_minutes:
                for m in sorted(buckets)[: len(buckets) - self.keep_minutes]:
                    del buckets[m]

    def figures(self, floor: Callable[[int], float | None] | float | None = None, minutes: int = 5
                ) -> dict[ShapeKey, MinuteFigure]:
        """Per collective and shape: the median of the latest ``minutes`` buckets; with a floor (one figure, or
        one per ranks-per-node shape), the trailing run of buckets whose own median is below it (judged
        collectives only)."""
        out: dict[ShapeKey, MinuteFigure] = {}
        for c, buckets in sorted(self._b.items()):
            if not buckets:
                continue
            keys = sorted(buckets)
            recent = [v for m in keys if m > keys[-1] - minutes for v in buckets[m]]
            nn, nr = self._shape[c]
            fl = floor(c[1]) if callable(floor) else floor
            fig = MinuteFigure(c[0], statistics.median(recent), len(recent), nn, nr, keys[-1] * 60_000_000,
                               per_node=c[1], floor_gbps=fl if c[0] in JUDGED else None)
            if fl is not None and c[0] in JUDGED:
                run = 0
                for m in reversed(keys):
                    if statistics.median(buckets[m]) >= fl:
                        break
                    run += 1
                if run:
                    first = keys[-run]
                    fig.below_minutes = keys[-1] - first + 1
                    fig.below_since_us = first * 60_000_000
            out[c] = fig
        return out
