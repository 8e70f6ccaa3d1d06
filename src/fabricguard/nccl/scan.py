"""Streaming scanner for NCCL_DEBUG=INFO logs and nccl-tests output.

Reads files in 8 MiB binary chunks, so memory stays flat on multi-GiB logs of 512-rank jobs. The
work per line must stay in C, because a log can be gigabytes of lines that all carry a fact (the
init of a very large job prints dozens of connection lines per rank). So one compiled regular
expression, anchored on the literal ``NCCL `` and run with ``findall``, returns the facts of a whole
chunk: the text after `` via `` of every connection line, the message of every init line that names
a network, device, version, provider or GPUDirect state, and the rank and node counts. A ``Counter``
folds the repeats (every rank prints the same ``Using network IB``), so Python code runs once per
*distinct* fact, not once per line. Rare lines (WARN, errors, nccl-tests tables) are handled line by
line with their line numbers.

Formats covered (from NCCL's own source and real logs): ``host:pid:tid [dev] NCCL INFO ...`` with any
prefix before it (``kubectl logs --timestamps``, ``--prefix``, launcher tags, CloudWatch columns);
connection lines ``Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0(1)/GDRDMA`` (2.12+), ``Channel 00
: 0[1b000] -> 1[1c000] via P2P/IPC`` (2.4-2.11) and ``Ring 00 : 3 -> 4 [send] via NET/IB/0/GDRDMA``
(2.3); device lists ``[0]mlx5_0:1/IB`` and the merged form ``[0]={[0] mlx5_2:1/RoCE, [1]
mlx5_3:1/RoCE}`` (2.2x); WARN lines with or without a ``[timestamp]`` and ``file.cc:line`` prefix;
nccl-tests tables with a ``#wrong`` count column or the older ``error`` magnitude column.

The scanner is incremental, and this is its public API (``nccl inspect`` and the live follower both use it):
one :class:`ScanState` per job; one :class:`FileScanner` per file, fed complete lines in order with
:meth:`FileScanner.feed`; :func:`conclude` draws the report from the state at any time without changing it,
so a follower feeds what was appended and concludes again, with no copy of the state.
"""

from __future__ import annotations

import functools
import os
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from fabricguard.nccl.report import (
    MAX_HOSTS_LISTED,
    RDMA_TRANSPORTS,
    Evidence,
    NcclReport,
    NcclTestsRow,
    NcclTestsTable,
    NetDevice,
    Scope,
    Span,
    decide_transport,
    job_span,
    net_family,
)
from fabricguard.profile.model import Transport
from fabricguard.userfiles import (
    MAX_JOB_FILES,
    MAX_LINE_BYTES,
    LineCutter,
    SourceError,
    looks_binary,
    open_in,
    walk_files,
)

MAX_EVIDENCE_PER_KIND = 3
MAX_FAILURES = 20
QUOTE_CHARS = 240

# WARN lines name the source between the device and NCCL: "[0] file.cc:42 NCCL WARN", and aws-ofi-nccl
# 1.1x its function: "[0] int nccl_net_ofi_create_plugin(nccl_net_ofi_plugin_t**):259 NCCL WARN".
_PREFIX = re.compile(rb"([A-Za-z0-9_.\-]+):(\d+):(\d+) \[(\d+)\](?: [^\[\]\n]{0,200}?:\d+)?\s*$")
# What ends a prefix glued onto the next line's: "host:pid:" right before where the regex found a host.
_LEADING_TIMESTAMP = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d) ")
_GLUED = re.compile(rb"[A-Za-z0-9_.\-]:\d+:$")
_VERSION = re.compile(rb"NCCL version (\S+)")
_NET_USING = re.compile(rb"NET/(\S+?) ?: Using (.*?)(?:; OOB|\s*$)")
# "[0]mlx5_0:1/IB" and, inside the merged form "[0]={[0] mlx5_2:1/RoCE, ...}", "[0] mlx5_2:1/RoCE".
_DEVICE = re.compile(rb"\[(\d+)\] ?([A-Za-z0-9_.\-]+)(?::(\d+))?(?:/(IB|RoCE|ETH|Ethernet))?")
_VIA_NET = re.compile(r"^NET/(.+?)/(\d+)(?:\(\d+\))?(/GDRDMA)?(?:/Shared)?\s*$")
_GDR_LINE = re.compile(rb"GPU Direct RDMA (Enabled|Disabled)")
_OFI_PROVIDER = re.compile(rb"Selected [Pp]rovider is ([A-Za-z0-9_;\-]+)")
_LOADED_PLUGIN = re.compile(rb"Loaded (?:net|NET) plugin (\S+)")
_PROFILER = re.compile(rb"PROFILER/Plugin: Loaded (.+?) \(v(\d+)\)")  # NCCL loads one profiler plugin
_NET_NOT_FOUND = re.compile(rb"[Nn]etwork (\S+) not found")
_PERF_NAME = re.compile(rb"\b([a-z_]+_perf)(?:_mpi)?\b")
_AVG_BUSBW = re.compile(rb"Avg bus bandwidth\s*:\s*([0-9.eE+\-]+|N/A)")
_OUT_OF_BOUNDS = re.compile(rb"Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)")
_RANK_HOST = re.compile(rb"#\s+Rank\s+(\d+) .*?\bon\s+(\S+)\s+device\b")

# Two passes over a chunk collect every fact, each anchored on a literal so the regex engine skips
# ahead in C ("via" is rare in trace lines, unlike a leading space). Connection lines: the transport
# after "via "; anything that does not parse as a NET or intra-node transport is ignored. Other facts come
# back as ONE group per line (a tuple per match, and hashing it in the Counter, cost a third of the pass when
# every line is a fact): an init fact's message from its keyword, a communicator's "nRanks N nNodes N localRanks
# N" (the same for every rank of it, so they fold), or what marks a rare line: a bare WARN/version/error/failure
# word, or a torch watchdog's ".cpp:...Watchdog caught" / "(SeqNum... ran for". `_fact_kind` tells them apart.
_VIA = re.compile(rb"via ((?:NET|P2P|SHM|NVLS|NVL|CollNet|COLLNET)[^\n]*)")
_FACT_WORDS = (
    rb"(?:Using (?:internal |external )?[Nn]etwork|NET/|NCCL version|GPU Direct|Selected|Loaded"
    rb"|PROFILER/Plugin: Loaded|Assigned NET plugin|Assigned (?:GIN|RMA) plugin"
    rb"|Initialized NET plugin|Failed to initialize NET plugin)"
)
_FACTS = re.compile(
    # The lookahead rejects per-collective trace lines ("AllReduce:", "Send:") in one step. Each branch only
    # reaches the group at a place where just one of its alternatives can match. A communicator line is read up to
    # its first "nRanks N" by runs of other bytes taken whole (possessive: no position is tried twice), not by a
    # lazy scan that tries a lookahead at every byte: 3 such lines per rank were a third of the pass in the worst
    # case. Same first "nRanks" as the lazy form: tests/nccl/test_scan_one_group.py.
    rb"NCCL(?: (?:INFO (?=[UNGLncrIFP]|As|Sel)(?:(?=" + _FACT_WORDS + rb")"
    rb"|(?:nccl|comm |rank )(?>[^n\n]*+(?:n(?![Rr]anks \d)[^n\n]*+)*+)(?=n[Rr]anks \d))"
    rb"|(?=(?:WARN|version|error|failure)\b))|(?=\.cpp:\d+\]|\(SeqNum))"
    rb"(" + _FACT_WORDS + rb"[^\n]*|n[Rr]anks \d+(?: nNodes \d+)?(?: localRanks \d+)?"
    rb"|(?:WARN|version|error|failure)\b|\.cpp:\d+\][^\n]*?Watchdog caught|\(SeqNum[^\n]*?ran for)"
)
_COMM_SIZE = re.compile(rb"n[Rr]anks (\d+)(?: nNodes (\d+))?(?: localRanks (\d+))?")
_MARKER_WORDS = frozenset((b"WARN", b"version", b"error", b"failure"))
_TORCH_MARKS = (b".cpp:", b"(SeqNum")
FACT, COMM, MARKER = 0, 1, 2


def _fact_kind(found: bytes) -> int:
    """What a `_FACTS` match holds: an init fact's message, a communicator's size, or a rare line's mark."""
    if found in _MARKER_WORDS or found.startswith(_TORCH_MARKS):
        return MARKER
    return COMM if found[:1] == b"n" else FACT


# Which ranks of which communicator a line names: read only in chunks of a log that shows one host, where
# every rank of the communicator seen there proves a single-node job (the rank makes every line distinct,
# so the bulk pass above leaves it out).
_RANK_LINE = re.compile(
    rb"NCCL INFO [^\n]*?\brank (\d+) n[Rr]anks (\d+)"
    rb"(?: cudaDev \d+(?: nvmlDev \d+)? busId \w+ commId (0x[0-9a-fA-F]+))?"
)
_RARE = re.compile(rb"NCCL (?:WARN|version|error|failure)\b|Watchdog caught collective")
# In a chunk dense with facts (the init of a very large job), hosts are read from the line each process
# prints once per communicator, and only when no "nNodes" line already gave the node count.
_USING_NETWORK_LINE = re.compile(rb"NCCL INFO Using network ")
# The out-of-band (bootstrap) address each process uses: two addresses under one hostname are two nodes
# (VMs or containers that share a hostname such as "localhost" or "ubuntu").
_BOOTSTRAP_LINE = re.compile(rb"NCCL INFO Bootstrap ?: Using \[?\d*\]?\s*[^\s:]+:([^\s<]+)<")
OOB_HOSTS = 8
# NCCL 2.3 names the network it chose "internal" (IB, Socket) or "external" (a plugin).
_OLD_NETWORK = re.compile(rb"^Using (?:internal|external) Network ")
# A file this small that arrives in one chunk (a pasted log) has the prefix of every NCCL line read for hosts,
# and is checked for nccl-tests lines without their "#"; a larger one (or a follower's appended lines) has
# hosts read only up to its last fact line (past it, per-collective lines of the same processes).
SMALL_CHUNK_BYTES = 256 * 1024
_NCCL_LINE = re.compile(rb"NCCL (?:INFO|WARN) ")
# What a process used: the network it selected, or (older NCCL) the net whose devices it listed.
_PROCESS_NETS = re.compile(rb"NCCL INFO (?:Using network ([^\n]*)|NET/(\S+?) ?: Using \[)")
# The network each process selected, in every chunk that selects one: which network each host used.
_SELECTED_LINE = re.compile(rb"NCCL INFO (?:Using network ([^\n]*)|Assigned NET plugin ([^\n]*?) to comm)")
_SELECTION_FACT = (b"Using network", b"Assigned NET plugin")
DENSE_FACT_LINES = 4096

# WARN text that NCCL and its plugins print without anything having failed, and what each means: a warning
# that quotes the line, never a failure.
_NOTICES: tuple[tuple[bytes, str], ...] = (
    (rb"NUMA auto balancing", "NUMA auto balancing is on (a performance notice)"),
    (rb"Cannot get incoming CPU|Maximum retry reached", "a FastSocket notice; the run continues"),
    (rb"PFN functions not found", "a CUDA driver notice; the run continues"),
    (rb"Could not find a path for pattern|falling back to simple order", "a topology search notice"),
    (rb"using default", "a setting fell back to its default"),
    (rb"async event : (?:port active|GID table change|client reregist|LID change)", "an InfiniBand port event"),
    # The provider line that follows says what libfabric chose.
    (rb"NET/OFI No eligible providers were found", "aws-ofi-nccl found no provider of its first choice"),
    (rb"Cannot initialize CollNet|CollNet is not supported or fails to initialize",
     "CollNet (in-network reduction, e.g. SHARP) is not available: NCCL used the point-to-point network"),
)
_BENIGN_WARN = re.compile(b"|".join(b"(" + pat + b")" for pat, _why in _NOTICES))
# RAS (NCCL 2.24+) listens on one client port per host: a second process on the host cannot bind it, warns,
# and runs on ("RAS failed to establish a client listening socket").
_RAS_BIND = re.compile(rb"Call to bind failed")
_RAS_NOTE = b"RAS failed to establish a client listening socket"
_READ_ALREADY = re.compile(rb"(?m)^(?:[ \t]*#|.*(?:NCCL|Watchdog|DistBackendError|Test CUDA failure)).*$")
# nccl-tests lines that keep their shape when a markdown renderer eats the leading "#".
_MANGLED = re.compile(
    rb"(?m)^(?=[ \t]*(?:nThread \d+ nGpus \d+|Rank\s+\d+ (?:Group\s+\d+ )?Pid\s+\d+ on\s+\S+\s+device\b"
    rb"|Out of bounds values\s*:|Avg bus bandwidth\s*:|size\s+count\s+type\b|Using devices\s*$"
    rb"|Collective test (?:starting|concluded)))"
)
# WARN text of errors that break communication, whatever plugin prints them.
_FATAL_WARN = re.compile(
    rb"Got completion|wrong type|Connection closed|Connection reset|Error encountered progressing"
    rb"|Failed to execute operation|Call to ibv_\w+ failed|Message truncated|Cuda failure|remote process exited"
    rb"|Duplicate GPU|[Tt]imeout|[Tt]imed out"
)
# WARN text from a net plugin that could not start: evidence of a fallback when the same process then
# selected a network of another kind, a failure otherwise.
_PLUGIN_INIT_WARN = re.compile(
    rb"NET/OFI|aws-ofi|libibverbs|ibvwrap|NET/IB|net_ib|IBext|NET/Plugin|[Nn][Ee][Tt] plugin"
)

# Lines outside NCCL's own WARN prefix that mean the job's collectives failed.
_ERROR_MARKERS = (
    (b"Watchdog caught collective operation timeout", "collective timed out"),
    (b"DistBackendError", "torch.distributed backend error"),
    (b"Test NCCL failure", "nccl-tests: NCCL failure"),
    (b"Test CUDA failure", "nccl-tests: CUDA failure"),
    (b"NCCL error", "NCCL error"),
    (b"ncclSystemError", "NCCL error"),
    (b"ncclInternalError", "NCCL error"),
    (b"ncclInvalidUsage", "NCCL error"),
    (b"ncclRemoteError", "NCCL error"),
    (b"ncclUnhandledCudaError", "NCCL error"),
)


def _warn_family(text: bytes) -> str:
    """Which net plugin a WARN comes from: the family it would fall back *from*."""
    if b"OFI" in text or b"ofi" in text:
        return "libfabric"
    if b"ibverbs" in text or b"ibvwrap" in text or b"IB" in text or b"net_ib" in text:
        return "ibverbs"
    return "plugin"


@dataclass
class _TableState:
    columns: list[str]
    table: NcclTestsTable


@dataclass
class _PendingWarn:
    """A net-plugin WARN whose meaning (fallback or failure) depends on what the process did next."""

    key: tuple[str, str] | None  # (host, pid) from the line's prefix
    family: str
    evidence: Evidence


@dataclass
class ScanState:
    """What the lines of one job's logs have shown so far (every file of the job feeds the same state)."""

    versions: dict[str, None] = field(default_factory=dict)
    networks: dict[str, None] = field(default_factory=dict)
    hosts: set[str] = field(default_factory=set)
    max_nranks: int = 0
    max_nnodes: int = 0
    net_conns: Counter[tuple[str, bool]] = field(default_factory=Counter)
    intra: Counter[str] = field(default_factory=Counter)
    devices: dict[tuple[str, int, str], NetDevice] = field(default_factory=dict)
    plugins: dict[str, None] = field(default_factory=dict)  # "Loaded net plugin X" and NET/X device lists
    profilers: dict[str, None] = field(default_factory=dict)  # "PROFILER/Plugin: Loaded X (vN)"
    gdr_lines: Counter[str] = field(default_factory=Counter)
    ofi: dict[str, None] = field(default_factory=dict)
    failures: list[Evidence] = field(default_factory=list)
    failure_count: int = 0
    warnings: list[Evidence] = field(default_factory=list)  # benign WARN lines, quoted, with what they mean
    warning_count: int = 0
    pending: list[_PendingWarn] = field(default_factory=list)
    selected: dict[tuple[str, str] | None, set[str]] = field(default_factory=dict)  # process -> networks
    listed: dict[tuple[str, str] | None, set[str]] = field(default_factory=dict)  # process -> device lists
    evidence: dict[str, list[Evidence]] = field(default_factory=dict)
    tables: list[NcclTestsTable] = field(default_factory=list)
    via_cache: dict[bytes, tuple[str, str, bool] | None] = field(default_factory=dict)
    hot_via: bytes = b""  # the text after "via " most connection lines of the job show, counted apart
    facts_seen: set[bytes] = field(default_factory=set)
    device_lists: set[tuple[bytes, bytes]] = field(default_factory=set)  # (net, "[0]mlx5_0:1/IB ...") parsed
    prefix_cache: dict[bytes, tuple[str, str] | None] = field(default_factory=dict)
    nccl_output: bool = False
    bytes_read: int = 0
    # What proves how many hosts the job spans: ranks seen per communicator (keyed by commId, else by
    # size), the node count and local rank count each communicator size reported, nccl-tests' rank table.
    comm_ranks: dict[str, set[int]] = field(default_factory=dict)
    comm_size: dict[str, int] = field(default_factory=dict)
    nnodes_by_size: dict[int, int] = field(default_factory=dict)
    local_by_size: dict[int, int] = field(default_factory=dict)
    test_ranks: dict[int, str] = field(default_factory=dict)  # nccl-tests "# Rank N ... on HOST device"
    host_nets: dict[str, set[str]] = field(default_factory=dict)  # host -> networks its processes selected
    oob: dict[str, set[str]] = field(default_factory=dict)  # host -> bootstrap addresses seen under that name
    init_failed: dict[str, Evidence] = field(default_factory=dict)  # "Failed to initialize NET plugin X"
    assigned: dict[str, None] = field(default_factory=dict)  # "Assigned NET plugin X to comm" (2.27+)
    gin: dict[str, None] = field(default_factory=dict)  # "Assigned GIN|RMA plugin X to comm" (2.31+)
    unread: list[Evidence] = field(default_factory=list)  # files or lines not read, with why
    mangled: Evidence | None = None  # the first nccl-tests line read without its "#" marker

    def unread_line(self, file: str, line: int, count: int) -> None:
        self.unread.append(Evidence(file, line, "", f"{count} line(s) longer than {MAX_LINE_BYTES:,} bytes "
                                    "not read (no NCCL line is that long)"))

    def wants(self, kind: str) -> bool:
        return len(self.evidence.get(kind, ())) < MAX_EVIDENCE_PER_KIND

    def note(self, kind: str, file: str, line: int, raw: bytes, why: str) -> None:
        bucket = self.evidence.setdefault(kind, [])
        if len(bucket) < MAX_EVIDENCE_PER_KIND:
            bucket.append(Evidence(file, line, _text(raw), why))

    def process(self, prefix: bytes) -> tuple[str, str] | None:
        """(host, pid) named by a line's prefix, cached: a rank prints thousands of lines with one prefix."""
        if prefix[:1].isdigit() and (ts := _LEADING_TIMESTAMP.match(prefix)):
            prefix = prefix[ts.end() :]  # `kubectl logs --timestamps`: one prefix per process, not one per line
        try:
            return self.prefix_cache[prefix]
        except KeyError:
            m = _PREFIX.search(prefix)
            # Two lines glued by the paste ("g183:161258:16169g183:161258:16169 [0]"): the host the regex finds
            # starts inside the first line's thread id, so it names no real host.
            key = (m.group(1).decode("ascii", "replace"), m.group(2).decode()) if m and not _GLUED.search(
                prefix, 0, m.start()) else None
            if len(self.prefix_cache) < 1_000_000:
                self.prefix_cache[prefix] = key
            if key:
                self.hosts.add(key[0])
            return key

    def node_floor(self) -> int:
        """Nodes the lines prove at least: distinct hosts, and distinct bootstrap addresses under one name."""
        return len(self.hosts) + sum(max(0, len(a) - 1) for h, a in self.oob.items() if h in self.hosts)

    def warning(self, file: str, line: int, raw: bytes, why: str) -> None:
        """A WARN line that is not a failure: kept (a few of each kind) so a person sees it, with its meaning."""
        self.warning_count += 1
        same = sum(1 for w in self.warnings if w.why == why)
        if len(self.warnings) < MAX_FAILURES and same < MAX_EVIDENCE_PER_KIND:
            self.warnings.append(Evidence(file, line, _text(raw), why))

    def fail(self, file: str, line: int, raw: bytes, why: str) -> None:
        self.failure_count += 1
        if len(self.failures) < MAX_FAILURES:
            self.failures.append(Evidence(file, line, _text(raw), why))


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace").rstrip("\r\n")[:500]


def _quote(raw: bytes) -> str:
    """The failing line's own words, for a reason a person can act on."""
    s = raw.decode("utf-8", "replace").strip()
    return s if len(s) <= QUOTE_CHARS else s[: QUOTE_CHARS - 1] + "…"


# In the init of a large job most connection lines end the same way (16 channels of "via P2P/CUMEM/read" per rank):
# those are counted with one `bytes.count` of the exact line end, and the regex returns only the others, so no
# bytes object is made and hashed per such line. The hot suffix is learned from the job's earlier chunks.
HOT_VIA_LINES = 256  # a suffix seen fewer times in a chunk is not worth a count of its own


@functools.lru_cache(maxsize=64)
def _via_except(hot: bytes) -> re.Pattern[bytes]:
    return re.compile(rb"via (?!" + re.escape(hot) + rb"\n)((?:NET|P2P|SHM|NVLS|NVL|CollNet|COLLNET)[^\n]*)")


def _connections(chunk: bytes, end: int, hot: bytes) -> Counter[bytes]:
    """The text after "via " of every connection line of ``chunk`` up to ``end`` (the newline after its last "via "
    or the chunk's end), counted: exactly what ``Counter(_VIA.findall(chunk, 0, end))`` gives.

    With a ``hot`` suffix (no newline, no "via " in it), lines that end in "via <hot>" are counted with
    ``bytes.count`` and the regex skips them. Why that is the same count: every "via <hot>\n" stands where
    `_VIA` would match (hot starts with a transport) and `_VIA` would take exactly ``hot`` there; the one way it
    would not match there is when an earlier "via " on the same line already took the rest of the line, and then
    that match's text holds "via ": when any text found holds "via ", the plain pass is made instead."""
    if hot:
        found = Counter(_via_except(hot).findall(chunk, 0, end + 1))
        if not any(b"via " in suffix for suffix in found):
            n = chunk.count(b"via " + hot + b"\n", 0, end + 1)
            if n:
                found[hot] += n
            return found
    return Counter(_VIA.findall(chunk, 0, end))


def _hot_suffix(found: Counter[bytes], hot: bytes) -> bytes:
    """The suffix to count apart in the next chunk: the most common one of this chunk, when common enough."""
    suffix, n = found.most_common(1)[0] if found else (b"", 0)
    if n < HOT_VIA_LINES or b"via " in suffix or b"\n" in suffix:
        return hot if found.get(hot, 0) >= HOT_VIA_LINES else b""
    return suffix


def _parse_via(suffix: bytes) -> tuple[str, str, bool] | None:
    """('net'|'intra', name, gdrdma) from what follows ' via '."""
    s = suffix.decode("utf-8", "replace").strip()
    if s.startswith("NET/"):
        m = _VIA_NET.match(s)
        if m:
            return ("net", m.group(1), bool(m.group(3)))
        # Older or unusual forms, e.g. "NET/Socket/0" without index match issues.
        name = s[4:].split("/", 1)[0]
        return ("net", name, "/GDRDMA" in s)
    if s.startswith("COLLNET/") or s.startswith("CollNet"):
        return ("intra", "CollNet", "/GDRDMA" in s)
    head = s.split("/", 1)[0]
    if head in ("P2P", "SHM", "NVLS", "NVL"):
        sub = s.split("/")
        detail = sub[1] if len(sub) > 1 else ""
        label = f"{head}/{detail}" if head == "P2P" and detail else head
        return ("intra", label, False)
    return None  # " via " in some other text


def _num(tok: str) -> float | None:
    try:
        return float(tok)
    except ValueError:
        return None


def _count(tok: str) -> int | None:
    try:
        return int(tok)
    except ValueError:
        return None


def _header_columns(raw: bytes) -> list[str] | None:
    s = raw.decode("utf-8", "replace")
    i = s.find("#")
    if i < 0:
        return None
    toks = s[i + 1 :].split()
    if "size" in toks and "count" in toks and "busbw" in toks and "time" in toks:
        start = toks.index("size")
        return toks[start:]
    return None


def _parse_row(columns: list[str], raw: bytes) -> NcclTestsRow | None:
    toks = raw.decode("utf-8", "replace").split()
    n = len(columns)
    if len(toks) < n:
        return None
    toks = toks[-n:]  # anything before (timestamps, pod prefixes) is dropped
    if not toks[0].isdigit() or not toks[1].isdigit():
        return None
    first: dict[str, str] = {}
    second: dict[str, str] = {}
    for name, tok in zip(columns, toks, strict=True):
        key = name.lstrip("#")
        if key in first:
            second[key] = tok
        else:
            first[key] = tok
    if "busbw" not in first:
        return None

    def wrong(d: dict[str, str]) -> int | None:
        # "#wrong" counts wrong elements; the older "error" column is a magnitude, not a count.
        v = d.get("wrong")
        return None if v is None or v == "N/A" else _count(v)

    def error(d: dict[str, str]) -> float | None:
        v = d.get("error")
        return None if v is None or v == "N/A" else _num(v)

    root = _count(first["root"]) if "root" in first else None
    return NcclTestsRow(
        size=int(first["size"]),
        count=int(first["count"]),
        type=first.get("type", "?"),
        redop=first.get("redop", "none"),
        root=root,
        oop_time_us=_num(first.get("time", "")),
        oop_algbw=_num(first.get("algbw", "")),
        oop_busbw=_num(first.get("busbw", "")),
        oop_wrong=wrong(first),
        ip_time_us=_num(second.get("time", "")) if second else None,
        ip_algbw=_num(second.get("algbw", "")) if second else None,
        ip_busbw=_num(second.get("busbw", "")) if second else None,
        ip_wrong=wrong(second) if second else None,
        oop_max_error=error(first),
        ip_max_error=error(second) if second else None,
    )


CHUNK = 8 * 1024 * 1024


class FileScanner:
    """One file's scan into a job's :class:`ScanState`: line-number cursor and the open nccl-tests table.

    :meth:`feed` takes complete lines (a chunk ending in a newline), in file order; ``last=True`` for the
    file's final chunk, which may lack its newline."""

    def __init__(self, path: Path | str, st: ScanState) -> None:
        self.st = st
        self.fname = str(path)
        self.table: _TableState | None = None
        self.perf_name: str | None = None
        name = os.path.basename(self.fname)
        if "_perf" in name:
            m = _PERF_NAME.search(name.encode())
            self.perf_name = m.group(1).decode() if m else None
        self.base_line = 1  # line number of the current chunk's first line
        self.cur_pos = 0
        self.cur_line = 1
        self.chunk = b""
        self.procs_read = False
        # nccl-tests' own footer ("Out of bounds values : 0 OK", "Collective test concluded"): the run this
        # file shows completed, so a WARN after it (sockets closing at teardown) is not a failure. A new
        # test's header opens a new run.
        self.completed: str | None = None

    def lineno(self, pos: int) -> int:
        # Positions arrive in increasing order within a chunk, so counting is one pass at most.
        self.cur_line += self.chunk.count(b"\n", self.cur_pos, pos)
        self.cur_pos = pos
        return self.cur_line

    def line_of(self, pos: int) -> tuple[int, bytes]:
        """Line number and text at ``pos``, for the few facts that become evidence (any order)."""
        start, end = self.line_at(pos)
        return self.base_line + self.chunk.count(b"\n", 0, start), self.chunk[start:end]

    def line_at(self, pos: int) -> tuple[int, int]:
        start = self.chunk.rfind(b"\n", 0, pos) + 1
        end = self.chunk.find(b"\n", pos)
        return start, (len(self.chunk) if end < 0 else end)

    def feed(self, chunk: bytes, last: bool = False, *, next_line: int | None = None) -> None:
        """Scan ``chunk`` (complete lines). ``next_line``: the line number after the chunk, when the caller
        already counted its lines (a :class:`~fabricguard.userfiles.LineCutter` does), so that no newline is
        counted twice; otherwise the chunk's newlines are counted here."""
        self.chunk = chunk
        self.cur_pos = 0
        self.cur_line = self.base_line
        self.procs_read = False
        st = self.st
        rare = False
        conn_lines = 0
        # Connection lines sit in the init part of a rank's log; the regex need not read past the last.
        last_via = chunk.rfind(b"via ")
        via_end = chunk.find(b"\n", last_via)
        if via_end < 0:
            via_end = len(chunk)
        found = Counter[bytes]() if last_via < 0 else _connections(chunk, via_end, st.hot_via)
        if found:
            st.hot_via = _hot_suffix(found, st.hot_via)
        for suffix, n in found.items():
            if self.connection(suffix, n):
                conn_lines += n
        fact_lines = 0
        selections = False
        rank_lines = False
        for found, n in Counter(_FACTS.findall(chunk)).items():
            kind = _fact_kind(found)
            if kind == FACT:
                self.fact(found, n)
                fact_lines += n
                selections = selections or found.startswith(_SELECTION_FACT)
            elif kind == COMM:
                fact_lines += n
                nranks, nnodes, local = _COMM_SIZE.match(found).groups(b"")  # type: ignore[union-attr]
                st.max_nranks = max(st.max_nranks, int(nranks))
                self.communicator(int(nranks), nnodes, local)
                rank_lines = True
                if nnodes and int(nnodes) > st.max_nnodes:
                    st.max_nnodes = int(nnodes)
                    if st.wants("nnodes"):
                        m = re.search(rb" nNodes " + nnodes + rb"\b", chunk)
                        if m:
                            line, raw = self.line_of(m.start())
                            st.note("nnodes", self.fname, line, raw, f"communicator spans {int(nnodes)} nodes")
            else:
                rare = True
        if fact_lines or conn_lines or rare or b"NCCL INFO" in chunk:
            st.nccl_output = True
        read_to = 0
        pasted = self.base_line == 1 and len(chunk) <= SMALL_CHUNK_BYTES  # a whole small file, not appended lines
        if pasted and st.nccl_output:
            # Every line's host: a paste may hold another host's lines after the last fact line.
            read_to = self.hosts(0, 0, len(chunk))
        elif fact_lines or conn_lines:
            read_to = self.hosts(fact_lines, conn_lines, via_end if conn_lines else 0)
        if read_to and len(st.hosts) <= OOB_HOSTS:
            # Hosts that share a name ("localhost", "ubuntu"): a job with few names is read for bootstrap addresses
            # too; one with many has names of its own.
            self.oob_addresses(read_to)
        # Which host selected what matters only while no connection line decides the transport.
        if selections and not st.net_conns:
            self.host_selections()
        if rank_lines and len(st.hosts) <= 1 and not st.nnodes_by_size:
            self.ranks_seen()
        self.rare_lines(rare)
        if pasted and not st.tables:
            self.mangled()
        if next_line is not None:
            self.base_line = next_line
        elif not last:  # the next chunk's line numbers start here; a file's last chunk needs no count
            self.base_line = self.cur_line + chunk.count(b"\n", self.cur_pos)

    def mangled(self) -> None:
        """nccl-tests output whose ``#`` markers a markdown renderer ate (`` nThread 1 nGpus 1 ...``,
        `` Rank  0 Group 0 Pid ... on host device 0``): read again with the markers put back, and say so."""
        st, chunk = self.st, self.chunk
        first = _MANGLED.search(chunk)
        if first is None:
            return
        line, raw = self.line_of(first.start())
        st.mangled = Evidence(self.fname, line, _text(raw), "nccl-tests output without its '#' markers (a "
                              "markdown renderer eats them): read with the markers put back")
        st.nccl_output = True
        failures = len(st.failures)
        original = chunk.split(b"\n")
        base, pos, line0 = self.base_line, self.cur_pos, self.cur_line
        # Read again only the nccl-tests lines: what the first pass read (NCCL lines, lines that kept their
        # "#") is blanked, keeping the line numbers, so nothing is counted twice.
        self.chunk = _MANGLED.sub(rb"#\g<0>", _READ_ALREADY.sub(b"", chunk))
        self.cur_pos, self.cur_line = 0, base
        try:
            self.rare_lines(False)
        finally:
            self.chunk, self.cur_pos, self.cur_line = chunk, pos, line0
        # Quote the lines as they are in the file, not as repaired.
        for k in range(failures, len(st.failures)):
            e = st.failures[k]
            i = e.line - base
            if 0 <= i < len(original):
                st.failures[k] = Evidence(e.file, e.line, _text(original[i]), e.why)

    def hosts(self, fact_lines: int, conn_lines: int, via_end: int) -> int:
        """Hosts named by the prefix of every NCCL line up to the chunk's last fact line; returns where the
        lines read end (0 in a chunk dense with facts, whose hosts come from its "Using network" lines)."""
        st, chunk = self.st, self.chunk
        if fact_lines + conn_lines > DENSE_FACT_LINES:
            if not st.max_nnodes:
                for m in _USING_NETWORK_LINE.finditer(chunk):
                    st.process(chunk[chunk.rfind(b"\n", 0, m.start()) + 1 : m.start()])
            return 0
        end = via_end
        seen = 0
        for m in _FACTS.finditer(chunk) if fact_lines else ():
            if _fact_kind(m.group(1)) == MARKER:
                continue
            seen += 1
            if seen >= fact_lines:
                end = max(end, m.end())
                break  # the rest of the chunk holds no fact line: no need to read it again
        # Past the last fact only per-collective trace lines remain, printed by the same processes.
        for m in _NCCL_LINE.finditer(chunk, 0, end):
            st.process(chunk[chunk.rfind(b"\n", 0, m.start()) + 1 : m.start()])
        return end

    def oob_addresses(self, end: int) -> None:
        """The bootstrap address of each process up to ``end`` (the init lines), by host name."""
        st, chunk = self.st, self.chunk
        i = chunk.find(b"INFO Bootstrap", 0, end)  # bytes.find skips ahead in C; the regex reads the lines found
        while i >= 0:
            start, stop = self.line_at(i)
            m = _BOOTSTRAP_LINE.search(chunk, start, stop)
            if m:
                key = st.process(chunk[start : m.start()])
                if key:
                    addrs = st.oob.setdefault(key[0], set())
                    if len(addrs) < 1024:
                        addrs.add(m.group(1).decode("ascii", "replace"))
            i = chunk.find(b"INFO Bootstrap", stop, end)

    def communicator(self, size: int, nnodes: bytes, local: bytes) -> None:
        """One communicator line: its size, and where given its node count and local rank count."""
        st = self.st
        if nnodes:
            st.nnodes_by_size[size] = max(st.nnodes_by_size.get(size, 0), int(nnodes))
        if local:
            st.local_by_size[size] = max(st.local_by_size.get(size, 0), int(local))

    def ranks_seen(self) -> None:
        """The ranks each communicator (by commId, else by size) shows in this chunk."""
        st = self.st
        for rank, size_raw, comm_id in set(_RANK_LINE.findall(self.chunk)):
            size = int(size_raw)
            key = comm_id.decode() if comm_id else f"size:{size}"
            st.comm_size[key] = size
            ranks = st.comm_ranks.setdefault(key, set())
            if len(ranks) < 65536:
                ranks.add(int(rank))

    def host_selections(self) -> None:
        """The networks each host's processes selected (``Using network``, ``Assigned NET plugin``): with
        an exact node count, a network every node selected is the job's transport when no connection line
        was logged."""
        st, chunk = self.st, self.chunk
        rfind, pairs = chunk.rfind, set()
        for m in _SELECTED_LINE.finditer(chunk):
            s0 = m.start()
            pairs.add((chunk[rfind(b"\n", 0, s0) + 1 : s0], m.group(1) or m.group(2)))
        for prefix, raw in pairs:
            key = st.process(prefix)
            if key:
                nets = st.host_nets.setdefault(key[0], set())
                if len(nets) < 8:
                    nets.add(raw.decode("utf-8", "replace").strip())

    def connection(self, suffix: bytes, n: int) -> bool:
        """Count ``n`` connections with this text after " via "; False when it is not a transport."""
        st = self.st
        parsed = st.via_cache.get(suffix)
        if parsed is None and suffix not in st.via_cache:
            parsed = _parse_via(suffix)
            st.via_cache[suffix] = parsed
        if parsed is None:
            return False
        kind, name, gdr = parsed
        if kind == "net":
            key = (name, gdr)
            ekind = f"conn:{name}:{gdr}"
            if key not in st.net_conns and st.wants(ekind):
                line, raw = self.line_of(self.chunk.find(b"via " + suffix))
                fam = net_family(name)
                st.note(
                    ekind,
                    self.fname,
                    line,
                    raw,
                    f"connection via NET/{name}"
                    + (" with GPUDirect RDMA" if gdr else " without GPUDirect RDMA")
                    + ("" if fam != "socket" else " (TCP sockets)"),
                )
            st.net_conns[key] += n
        else:
            if name not in st.intra and st.wants(f"intra:{name}"):
                line, raw = self.line_of(self.chunk.find(b"via " + suffix))
                st.note(f"intra:{name}", self.fname, line, raw, f"intra-node connection via {name}")
            st.intra[name] += n
        return True

    def fact(self, msg: bytes, n: int) -> None:
        st = self.st
        if msg.startswith(b"GPU Direct") or b"GPU Direct RDMA" in msg:
            m = _GDR_LINE.search(msg)
            if m:
                state = m.group(1).decode()
                if not st.gdr_lines[state] and st.wants(f"gdr:{state}"):
                    line, raw = self.line_of(self.chunk.find(msg))
                    st.note(f"gdr:{state}", self.fname, line, raw, f"GPUDirect RDMA {state.lower()}")
                st.gdr_lines[state] += n
            return
        if msg in st.facts_seen:
            return
        if len(st.facts_seen) < 100_000:
            st.facts_seen.add(msg)
        if msg.startswith((b"Assigned GIN plugin", b"Assigned RMA plugin")):
            # NCCL 2.31+: the backend of the device API (GPU-initiated networking) a communicator got.
            name = msg.split(b" plugin ", 1)[1].removesuffix(b" to comm").decode("utf-8", "replace").strip()
            if name and name not in st.gin:
                st.gin[name] = None
                line, raw = self.line_of(self.chunk.find(msg))
                st.note("gin", self.fname, line, raw, f"NCCL assigned device-API (GIN) backend {name}")
            return
        if msg.startswith(b"Assigned NET plugin") or msg.startswith(b"Initialized NET plugin"):
            # NCCL 2.27+: the plugin that started, and the one a communicator got (its selected network).
            name = msg.split(b" plugin ", 1)[1].removesuffix(b" to comm").decode("utf-8", "replace").strip()
            if name:
                st.plugins.setdefault(name, None)
                if msg.startswith(b"Assigned") and name not in st.assigned:
                    st.assigned[name] = None
                    line, raw = self.line_of(self.chunk.find(msg))
                    why = f"NCCL assigned network {name} to a communicator"
                    st.note("network:assigned", self.fname, line, raw, why)
            return
        if msg.startswith(b"Failed to initialize NET plugin"):
            name = msg[len(b"Failed to initialize NET plugin") :].decode("utf-8", "replace").strip()
            if name and name not in st.init_failed:
                line, raw = self.line_of(self.chunk.find(msg))
                why = f"NCCL could not initialize NET plugin {name}"
                st.init_failed[name] = Evidence(self.fname, line, _text(raw), why)
            return
        old = _OLD_NETWORK.match(msg)
        if msg.startswith(b"Using network") or old:
            net = msg[old.end() if old else len(b"Using network") :].decode("utf-8", "replace").strip()
            if net and net not in st.networks:
                st.networks[net] = None
                line, raw = self.line_of(self.chunk.find(msg))
                st.note("network", self.fname, line, raw, f"NCCL selected network {net}")
            return
        if msg.startswith(b"NCCL version"):
            m = _VERSION.match(msg)
            if m:
                self.version(m.group(1), self.chunk.find(msg))
            return
        m = _PROFILER.match(msg)
        if m:
            name = m.group(1).decode("utf-8", "replace")
            if name not in st.profilers:
                st.profilers[name] = None
                line, raw = self.line_of(self.chunk.find(msg))
                st.note("profiler", self.fname, line, raw, f"NCCL loaded profiler plugin {name}")
            return
        m = _LOADED_PLUGIN.search(msg)
        if m:
            st.plugins.setdefault(m.group(1).decode("utf-8", "replace"), None)
            return
        m = _OFI_PROVIDER.search(msg)
        if m:
            p = m.group(1).decode().rstrip(",")
            if p not in st.ofi:
                st.ofi[p] = None
                line, raw = self.line_of(self.chunk.find(msg))
                st.note("ofi", self.fname, line, raw, f"libfabric provider {p}")
            return
        if b"Using" in msg:
            self.devices(msg)
        elif msg.startswith(b"NET/") and (b" Connected" in msg or b" Accepted" in msg):
            # FastSocket logs its data connections this way, with no "via NET/" line.
            st.plugins.setdefault(msg[4:].split(b" ", 1)[0].rstrip(b":").decode("utf-8", "replace"), None)

    def devices(self, msg: bytes) -> None:
        st = self.st
        m = _NET_USING.search(msg)
        if not m:
            return
        # Every node prints the same device list with its own OOB address after it: parse each list once.
        listed: tuple[bytes, bytes] = (m.group(1), m.group(2))
        if listed in st.device_lists:
            return
        if len(st.device_lists) < 100_000:
            st.device_lists.add(listed)
        net = m.group(1).decode("utf-8", "replace")
        found = False
        for dm in _DEVICE.finditer(m.group(2)):
            idx = int(dm.group(1))
            name = dm.group(2).decode()
            ll = dm.group(4).decode() if dm.group(4) else None
            if ll in ("ETH", "Ethernet"):
                ll = "RoCE"
            if net_family(net) == "socket":
                ll = None
            key = (net, idx, name)
            if key not in st.devices:
                st.devices[key] = NetDevice(net, idx, name, ll)
                found = True
        if found:
            st.plugins.setdefault(net, None)
            if st.wants(f"devices:{net}"):
                line, raw = self.line_of(self.chunk.find(msg))
                st.note(f"devices:{net}", self.fname, line, raw, f"NET/{net} devices")

    def version(self, v_raw: bytes, pos: int) -> None:
        v = v_raw.decode("utf-8", "replace").rstrip(",")
        if v not in self.st.versions:
            self.st.versions[v] = None
            line, raw = self.line_of(pos)
            self.st.note("version", self.fname, line, raw, f"NCCL {v}")

    # --- rare lines: WARN, errors, nccl-tests, line by line -------------------------------------------

    def rare_lines(self, nccl_rare: bool) -> None:
        chunk = self.chunk
        events: list[tuple[int, bool]] = []  # (position, is a rare NCCL or torch line)
        if nccl_rare:
            events += [(m.start(), True) for m in _RARE.finditer(chunk)]
        if self.table is not None:
            events.append((0, False))
        pos = chunk.find(b"#")
        if pos >= 0:
            # nccl-tests output is small; its CUDA failures carry no NCCL marker.
            f = chunk.find(b"Test CUDA failure")
            while f >= 0:
                events.append((f, False))
                f = chunk.find(b"Test CUDA failure", f + 1)
        while pos >= 0:
            events.append((pos, False))
            nl = chunk.find(b"\n", pos)
            if nl < 0:
                break
            pos = chunk.find(b"#", nl)
        if not events:
            return
        events.sort()
        done_until = -1
        for pos, nccl in events:
            if pos < done_until:
                continue
            start, end = self.line_at(pos)
            if start < done_until:
                continue
            if nccl:
                self.rare_nccl(chunk[start:end], pos - start, start)
                done_until = end
            else:
                done_until = self.other_lines(start)

    def rare_nccl(self, raw: bytes, i: int, line_start: int) -> None:
        if raw.startswith(b"Watchdog", i):
            self.markers(raw, line_start)
            return
        level = raw[i + 5 : i + 9]
        if level == b"WARN":
            self.warn(raw, i, line_start)
            return
        if level == b"vers":
            # nccl-tests and old NCCL print the version bare, without the INFO prefix.
            m = _VERSION.match(raw, i)
            if m and b"NCCL INFO" not in raw[:i]:
                self.version(m.group(1), line_start)
            return
        self.markers(raw, line_start)

    def markers(self, raw: bytes, line_start: int) -> bool:
        for marker, label in _ERROR_MARKERS:
            j = raw.find(marker)
            if j >= 0:
                self.st.fail(self.fname, self.lineno(line_start), raw, f"{label}: {_quote(raw[j:])}")
                return True
        return False

    def warn(self, raw: bytes, i: int, line_start: int) -> None:
        st = self.st
        msg = raw[i + 10 :]
        notice = _BENIGN_WARN.search(msg)
        if notice:
            why = _NOTICES[(notice.lastindex or 1) - 1][1]
            st.warning(self.fname, self.lineno(line_start), raw, f"warning: {why}: {_quote(msg)}")
            return
        key = st.process(raw[:i])
        line = self.lineno(line_start)
        if _RAS_BIND.search(msg) and (b"ras/" in raw[:i] or b"client_support" in raw[:i]
                                      or self.chunk.find(_RAS_NOTE, line_start, line_start + 4096) >= 0):
            st.warning(self.fname, line, raw, "warning: NCCL's RAS could not take its client port (another "
                       f"process on the host holds it); collectives are not affected: {_quote(msg)}")
            return
        if self.completed is not None:
            st.warning(self.fname, line, raw, f"warning: after the run completed ({self.completed}), at "
                       f"teardown: {_quote(msg)}")
            return
        prov = _OFI_PROVIDER.search(msg)
        if prov:  # some builds print the provider as a WARN: "Selected provider is tcp" is a fact, not a failure
            p = prov.group(1).decode("utf-8", "replace").rstrip(",")
            if p not in st.ofi:
                st.ofi[p] = None
                st.note("ofi", self.fname, line, raw, f"libfabric provider {p}")
            return
        m = _NET_NOT_FOUND.search(msg)
        if b"Failed to initialize any NET plugin" in msg:
            why = f"no network plugin could start, and NCCL refused to fall back: {_quote(msg)}"
            st.fail(self.fname, line, raw, why)
        elif m:
            st.fail(self.fname, line, raw, f"network {m.group(1).decode()} not found: NCCL refused to fall back")
        elif _PLUGIN_INIT_WARN.search(msg) and not _FATAL_WARN.search(msg):
            ev = Evidence(self.fname, line, _text(raw), f"NCCL WARN {_quote(msg)}")
            st.pending.append(_PendingWarn(key, _warn_family(msg), ev))
            self.what_processes_used()  # its init lines share the chunk
        else:
            st.fail(self.fname, line, raw, f"NCCL WARN {_quote(msg)}")

    def what_processes_used(self) -> None:
        """Record, once per chunk, the networks each process selected and the devices it listed."""
        if self.procs_read:
            return
        self.procs_read = True
        st, chunk = self.st, self.chunk
        for m in _PROCESS_NETS.finditer(chunk):
            key = st.process(chunk[chunk.rfind(b"\n", 0, m.start()) + 1 : m.start()])
            if m.group(1) is not None:
                st.selected.setdefault(key, set()).add(m.group(1).decode("utf-8", "replace").strip())
            else:
                st.listed.setdefault(key, set()).add(m.group(2).decode("utf-8", "replace"))

    def other_lines(self, start: int) -> int:
        """Non-NCCL lines from ``start``: nccl-tests headers, rows, averages, failures. Returns end offset."""
        st, chunk = self.st, self.chunk
        pos = start
        n = len(chunk)
        stray = 0  # non-row lines seen while a table is open; a truncated table closes after many
        while pos < n:
            end = chunk.find(b"\n", pos)
            if end < 0:
                end = n
            raw = chunk[pos:end]
            if b"NCCL" in raw or b"Watchdog" in raw or b"DistBackendError" in raw:
                # An NCCL line inside a table region: its facts were counted in bulk; rare ones here.
                m = _RARE.search(raw)
                if m:
                    self.rare_nccl(raw, m.start(), pos)
                elif b"NCCL INFO" not in raw:
                    self.markers(raw, pos)
                if self.table is None:
                    return end
                pos = end + 1
                continue
            if self.table is not None:
                row = _parse_row(self.table.columns, raw)
                if row is not None:
                    self.table.table.rows.append(row)
                    w = (row.oop_wrong or 0) + (row.ip_wrong or 0)
                    if w:
                        st.fail(
                            self.fname,
                            self.lineno(pos),
                            raw,
                            f"nccl-tests counted {w} wrong elements at {row.size} B: {_quote(raw)}",
                        )
                    pos = end + 1
                    continue
            if b"#" in raw:
                if self.hash_line(raw, pos, chunk):
                    pos = end + 1
                    continue
            elif b"Test CUDA failure" in raw:
                self.markers(raw, pos)
            if self.table is None:
                return end
            stray += 1
            if stray > 200:
                self.table = None
                return end
            pos = end + 1
        return n

    def hash_line(self, raw: bytes, pos: int, chunk: bytes) -> bool:
        """An nccl-tests ``#`` line; True when it opened a table."""
        st = self.st
        if b"Collective test concluded" in raw:
            self.completed = "nccl-tests: " + _quote(raw.split(b"#", 1)[-1])
            return False
        if b"nThread" in raw or b"Collective test starting" in raw:
            self.completed = None  # a new test run
        cols = _header_columns(raw)
        if cols is not None:
            self.completed = None
            if self.perf_name is None:
                i = chunk.rfind(b"_perf", max(0, pos - 65536), pos)
                if i >= 0:
                    m = _PERF_NAME.search(chunk, max(0, i - 64), i + 10)
                    if m:
                        self.perf_name = m.group(1).decode()
            self.table = _TableState(cols, NcclTestsTable(self.perf_name, self.fname, self.lineno(pos)))
            st.tables.append(self.table.table)
            st.nccl_output = True
            return True
        m = _OUT_OF_BOUNDS.search(raw)
        if m:
            bad = int(m.group(1))
            if self.table is not None:
                self.table.table.out_of_bounds = bad
            elif st.tables:
                st.tables[-1].out_of_bounds = bad
            st.nccl_output = True
            if bad or m.group(2) == b"FAILED":
                st.fail(self.fname, self.lineno(pos), raw, f"nccl-tests found wrong results: {_quote(raw)}")
            else:
                self.completed = "nccl-tests: " + _quote(raw.split(b"#", 1)[-1])
            return False
        m = _AVG_BUSBW.search(raw)
        if m and self.table is not None:
            v = m.group(1)
            self.table.table.avg_busbw_gbps = None if v == b"N/A" else float(v)
            self.table = None
            self.perf_name = None
            return False
        m = _RANK_HOST.search(raw)
        if m:
            host = m.group(2).decode("utf-8", "replace")
            st.hosts.add(host)
            st.test_ranks.setdefault(int(m.group(1)), host)
            return False
        if b"_perf" in raw:
            m = _PERF_NAME.search(raw)
            if m:
                self.perf_name = m.group(1).decode()
        return False


def _scan_file(path: Path, st: ScanState, root: Path | None = None, max_bytes: int | None = None) -> None:
    """Feed one file's complete lines to the scanner, in linear time: a line longer than ``MAX_LINE_BYTES``
    that spans reads is dropped (and named in ``st.unread``), never buffered. Under a job directory (``root``)
    the file is opened without following a link out of it. Reading stops once ``st.bytes_read`` would pass
    ``max_bytes`` (the rest of the file is named in ``st.unread``)."""
    fs = FileScanner(path, st)
    cutter = LineCutter()
    with open_in(root, path) if root is not None else path.open("rb") as f:
        block = f.read(CHUNK)
        while block:
            if max_bytes is not None and st.bytes_read + len(block) > max_bytes:
                st.unread.append(Evidence(str(path), cutter.lines + 1, "", f"not read past line {cutter.lines}: the "
                                          f"job's logs are over the {max_bytes:,} bytes read per job"))
                break
            st.bytes_read += len(block)
            # One block ahead: the file's last block (a whole rank file, most often) has its newlines counted
            # only if a line number past it is asked for (an unterminated last line).
            ahead = f.read(CHUNK)
            before = cutter.lines
            lines = cutter.feed(block, count=bool(ahead))
            if lines:
                lines = _skip_absurd_lines(path, lines, before, fs, st, refuse=root is None)
                if lines and ahead:
                    fs.feed(lines, next_line=cutter.lines + 1)
                elif lines:
                    fs.feed(lines, last=True)
            block = ahead
        last = cutter.finish()
        if last:
            fs.base_line = cutter.lines
            if _skip_absurd_lines(path, last, cutter.lines - 1, fs, st, refuse=root is None):
                fs.feed(last, last=True)
    if cutter.overlong:
        st.unread_line(str(path), cutter.overlong_line or 0, cutter.overlong)


# NCCL prints no number longer than a 64-bit one (20 digits; hex addresses are shorter). A run this long is not an
# NCCL line, and Python refuses to turn more than 4,300 digits into an int: the file is refused in one line.
_ABSURD_DIGITS = 40
_ABSURD = re.compile(rb"\d{%d,}" % _ABSURD_DIGITS)
# A regex over every byte costs 30-50x a newline count on trace lines full of digits (hex addresses), so runs are
# looked for in every 8th byte first: a run of 40 digits holds 5 consecutive bytes at multiples of 8.
_STRIDE = 8
_DIGIT_MARKS = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
_SAMPLED_RUN = b"0" * (_ABSURD_DIGITS // _STRIDE)
_MAX_CANDIDATES = 64  # past this many near misses in one chunk, one exact pass over the chunk is cheaper


def _may_hold_absurd_number(lines: bytes) -> bool:
    """Whether ``lines`` may hold a run of ``_ABSURD_DIGITS`` digits; False is exact (no such run)."""
    sampled = lines[::_STRIDE].translate(_DIGIT_MARKS)
    i = sampled.find(_SAMPLED_RUN)
    for _ in range(_MAX_CANDIDATES):
        if i < 0:
            return False
        # The run through bytes i*8 .. i*8+32 lies (40 digits of it at least) within this window.
        at = i * _STRIDE
        if _ABSURD.search(lines, max(0, at - _ABSURD_DIGITS), at + 2 * _ABSURD_DIGITS):
            return True
        i = sampled.find(_SAMPLED_RUN, i + 1)
    return i >= 0


def _skip_absurd_lines(path: Path, lines: bytes, before: int, fs: FileScanner, st: ScanState, *,
                       refuse: bool) -> bytes:
    """``lines`` (complete lines after line ``before``) up to the last line holding a number of absurd length
    (fed to ``fs`` around each such line, which is left out and named in ``st.unread`` by file and line), or
    ``lines`` whole when there is none. ``refuse`` (a file given by name, not a job's directory): the first such
    line raises ``SourceError`` instead, so ``nccl inspect`` answers in one line."""
    while _may_hold_absurd_number(lines):
        m = _ABSURD.search(lines)
        if m is None:
            break
        if refuse:
            _no_absurd_numbers(path, lines, before)
        start = lines.rfind(b"\n", 0, m.start()) + 1
        end = lines.find(b"\n", m.end())
        end = len(lines) if end < 0 else end + 1
        digits = len(re.match(rb"\d*", lines[m.start():end]).group())  # type: ignore[union-attr]
        line_no = before + lines.count(b"\n", 0, start) + 1
        st.unread.append(Evidence(str(path), line_no, "", f"line {line_no} holds a number of {digits:,} digits, "
                                  "which no NCCL line does (NCCL prints at most 20); that line was not read"))
        if start:
            fs.feed(lines[:start], next_line=line_no)
        fs.base_line = line_no + 1
        lines, before = lines[end:], line_no
    return lines


def _no_absurd_numbers(path: Path, lines: bytes, before: int) -> None:
    """``SourceError`` naming the line of ``lines`` (which start after line ``before``) that holds a number of
    absurd length."""
    if not _may_hold_absurd_number(lines):
        return
    m = _ABSURD.search(lines)
    if m is None:
        return
    end = m.end()
    while end < len(lines) and lines[end : end + 1].isdigit():
        end += 1
    digits = end - m.start()
    raise SourceError(str(path), before + lines.count(b"\n", 0, m.start()) + 1,
                      f"a number of {digits:,} digits: not an NCCL log line (NCCL prints at most 20)")


def is_text(path: Path, root: Path | None = None) -> bool:
    """Whether a file found under a folder is a log to read: NUL bytes do not make it binary (a log that NCCL
    or Lustre padded with NULs is still a log); control bytes other than NUL do."""
    try:
        with open_in(root, path) if root is not None else path.open("rb") as f:
            head = f.read(4096)
    except (OSError, SourceError):
        return True  # read it, so that the failure is reported by the scan and not dropped here
    return not looks_binary(head)


class LogInputError(ValueError):
    """A path given to ``inspect`` that cannot be read; the message names it."""


@dataclass
class Collected:
    """The files to scan, the folder each was found under (None: named by the caller), and what was not read."""

    files: list[Path] = field(default_factory=list)
    roots: dict[Path, Path | None] = field(default_factory=dict)
    unread: list[Evidence] = field(default_factory=list)


def collect(paths: Iterable[Path], exclude: Iterable[str] = (), *, max_files: int = MAX_JOB_FILES) -> Collected:
    """Expand folders into the text files under them (bounded, never following a link out of the folder)."""
    excl = tuple(exclude)
    out = Collected()
    for p in paths:
        if p.is_dir():
            walk = walk_files(p, max_files=max_files)
            for f in walk.files:
                if any(f.match(x) for x in excl):
                    continue
                if is_text(f, p):
                    out.files.append(f)
                    out.roots[f] = p
            out.unread += [Evidence(str(f), 0, "", why) for f, why in walk.refused]
            if walk.truncated:
                out.unread.append(Evidence(str(p), 0, "", f"{walk.truncated}: the rest was not read"))
        elif p.is_file():
            out.files.append(p)
            out.roots[p] = None
        elif not p.exists():
            raise LogInputError(f"{p}: no such file or directory")
        else:
            raise LogInputError(f"{p}: not a regular file or directory")
    return out


def collect_files(paths: Iterable[Path], exclude: Iterable[str] = ()) -> list[Path]:
    """Expand directories into the text files under them, in a stable order."""
    return collect(paths, exclude).files


def inspect_paths(paths: Iterable[Path | str], exclude: Iterable[str] = (), *,
                  unread: Iterable[Evidence] = (), roots: dict[Path, Path | None] | None = None,
                  max_bytes: int | None = None) -> NcclReport:
    """Scan logs (files or directories) and conclude what transport the job really used.

    A file found under a folder that cannot be read is named in the report's ``unread`` and the rest is read;
    a file named by the caller that cannot be read raises ``LogInputError``. ``unread``: problems already found
    by the caller's own listing; ``roots``: the folder each of ``paths`` (files) was found under;
    ``max_bytes``: read at most this much in all (what is left is named in ``unread``)."""
    c = collect([Path(p) for p in paths], exclude)
    if roots:
        c.roots.update({f: r for f, r in roots.items() if f in c.roots})
    st = ScanState()
    st.unread += list(unread) + c.unread
    for f in c.files:
        root = c.roots.get(f)
        if max_bytes is not None and st.bytes_read >= max_bytes:
            st.unread.append(Evidence(str(f), 0, "", f"not read: the job's logs are over the "
                                      f"{max_bytes:,} bytes read per job"))
            continue
        try:
            _scan_file(f, st, root, max_bytes)
        except SourceError as exc:
            if root is None:
                raise LogInputError(str(exc)) from None
            st.unread.append(Evidence(str(f), 0, "", exc.problem))
        except OSError as exc:
            if root is None:
                raise LogInputError(f"{f}: {exc.strerror or exc}") from None
            st.unread.append(Evidence(str(f), 0, "", f"cannot read: {exc.strerror or exc}"))
    return conclude(st, [str(f) for f in c.files])


def _resolve_pending(
    st: ScanState, networks: dict[str, None]
) -> tuple[list[Evidence], int, list[Evidence], int]:
    """Plugin WARNs: a fallback where the process then used another kind of network, else a failure.

    What the process used: the network it selected, else the devices it listed (older NCCL logs no
    "Using network"), else what the rest of the log selected or listed. Reads ``st`` only: returns
    (fallbacks, fallback count, failures, failure count) with the WARNs that are failures added, so a
    conclusion can be drawn any number of times while the logs are still being fed.
    """
    fallbacks: list[Evidence] = []
    count = 0
    failures = list(st.failures)
    failure_count = st.failure_count
    everywhere = set(networks) | {n for nets in st.selected.values() for n in nets} | set(st.plugins)
    for w in st.pending:
        chosen = st.selected.get(w.key) or st.listed.get(w.key) or everywhere
        same = w.family != "plugin" and any(net_family(n) == w.family for n in chosen)
        others = sorted(n for n in chosen if w.family == "plugin" or net_family(n) != w.family)
        if others and not same:
            count += 1
            if len(fallbacks) >= MAX_FAILURES:
                continue
            why = f"{w.evidence.why.removeprefix('NCCL WARN ')}; NCCL then used network {', '.join(others)}"
            fallbacks.append(Evidence(w.evidence.file, w.evidence.line, w.evidence.text, f"net plugin fallback: {why}"))
        else:
            failure_count += 1
            if len(failures) < MAX_FAILURES:
                failures.append(w.evidence)
    return fallbacks, count, failures, failure_count


def _init_fallbacks(st: ScanState, networks: dict[str, None]) -> list[Evidence]:
    """NCCL 2.27+ ``Failed to initialize NET plugin X`` (INFO), then a network of another kind selected."""
    out: list[Evidence] = []
    for name, ev in st.init_failed.items():
        fam = net_family(name)
        others = sorted(n for n in networks if net_family(n) != fam)
        if fam != "socket" and others:
            why = f"net plugin fallback: NCCL could not initialize NET plugin {name}; NCCL then used network "
            out.append(Evidence(ev.file, ev.line, ev.text, why + ", ".join(others)))
    return out


def conclude(st: ScanState, files: list[str], unread: Iterable[Evidence] = ()) -> NcclReport:
    """The report on everything fed to ``st`` so far; ``st`` is left as it is (feed more, conclude again).
    ``unread``: files the caller could not read, named in the report besides those ``st`` holds."""
    all_unread = [*st.unread, *unread]
    span = job_span(
        st.max_nranks, st.nnodes_by_size, st.local_by_size, st.comm_ranks, st.comm_size, st.test_ranks, st.hosts,
        st.node_floor(),
    )
    if st.mangled is not None and span.scope is Scope.single_node:
        # What else the renderer dropped is unknown: a mangled paste proves no single node.
        span = Span(Scope.part, 1, f"{span.why}, but the paste is mangled", span.hosts, exact=False)
    nodes = span.nodes if span.exact else None
    networks = dict(st.networks)
    for name in st.assigned:  # a communicator's network, also where the "Using network" line was cut off
        networks.setdefault(name, None)
    fallbacks, fallback_count, failures, failure_count = _resolve_pending(st, networks)
    init_fallbacks = _init_fallbacks(st, networks)
    fallbacks += init_fallbacks
    fallback_count += len(init_fallbacks)
    failed = failure_count > 0
    transport, reasons, basis = decide_transport(
        st.net_conns,
        list(networks),
        list(st.devices.values()),
        list(st.ofi),
        nodes,
        bool(st.intra),
        failed,
        plugins=list(st.plugins),
        span=span,
        host_nets=st.host_nets,
    )
    socket_gin = [g for g in st.gin if net_family(g) == "socket"]
    if socket_gin:
        # NCCL 2.32 adds a socket-based GIN: device-API traffic over TCP, however fast the NET transport is.
        why = (f"the device API's GIN backend {', '.join(socket_gin)} runs over TCP sockets: kernels that use it "
               "move data at socket speed")
        if transport in RDMA_TRANSPORTS:
            transport, basis = Transport.mixed, basis
            reasons.insert(0, why + f", while the collectives' network is {', '.join(networks) or 'RDMA'}")
        else:
            reasons.append(why)
    if st.mangled is not None:
        where = f"{Path(st.mangled.file).name}:{st.mangled.line}"
        reasons.append(f"{where}: the paste lost nccl-tests' '#' markers (a markdown renderer eats them), so it "
                       "proves no single node; paste the output as a code block")
    if fallbacks:
        reasons.append(
            f"a net plugin failed to start and NCCL fell back ({fallback_count} line(s)); first: "
            + fallbacks[0].why.split(": ", 1)[1]
        )
    # GPUDirect RDMA: per connection when connections were logged, otherwise from the init lines.
    gdr: bool | None = None
    rdma_conns = {k: n for k, n in st.net_conns.items() if net_family(k[0]) != "socket"}
    if st.net_conns:
        if any(not g for (_n, g) in st.net_conns):
            gdr = False
        elif rdma_conns:
            gdr = True
    elif st.gdr_lines:
        gdr = not st.gdr_lines.get("Disabled") and bool(st.gdr_lines.get("Enabled"))
    if failed:
        reasons.append(f"{failure_count} failure line(s); first: {failures[0].why}")
    evidence: list[Evidence] = []
    for kind in sorted(st.evidence):
        evidence.extend(st.evidence[kind])
    if st.mangled is not None:
        evidence.append(st.mangled)
    evidence.extend(fallbacks[:MAX_EVIDENCE_PER_KIND])
    evidence.extend(failures[:MAX_EVIDENCE_PER_KIND])
    conns: dict[str, int] = {}
    for (name, g), n in sorted(st.net_conns.items()):
        conns[f"NET/{name}" + ("/GDRDMA" if g else "")] = n
    for name, n in sorted(st.intra.items()):
        conns[name] = n
    return NcclReport(
        files=files,
        nccl_version=list(st.versions),
        networks=list(networks),
        inter_node_transport=transport,
        gpudirect_rdma=gdr,
        intra_node=sorted(st.intra),
        failed=failed,
        nodes=nodes,
        nodes_at_least=span.nodes,
        ranks=st.max_nranks or None,
        net_devices=list(st.devices.values()),
        connections=conns,
        ofi_provider=list(st.ofi),
        evidence=evidence,
        reasons=reasons,
        failures=failures,
        fallbacks=fallbacks,
        warnings=list(st.warnings),
        warning_count=st.warning_count,
        nccl_tests=st.tables,
        profiler_plugins=list(st.profilers),
        gin_plugins=list(st.gin),
        nccl_output=st.nccl_output or bool(failures) or bool(st.tables),
        bytes_read=st.bytes_read,
        unread=all_unread[:MAX_FAILURES],
        unread_count=len(all_unread),
        scope=span.scope,
        # The hosts seen; a big job's are not all read (the bulk path reads hosts only where no nNodes line
        # gave the count), so ``hosts_count`` is a floor like ``nodes_at_least``.
        hosts=list(span.hosts[:MAX_HOSTS_LISTED]),
        hosts_count=len(span.hosts),
        transport_basis=basis,
    )
