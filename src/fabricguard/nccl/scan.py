"""Streaming scanner for NCCL_DEBUG=INFO logs and nccl-tests output.

Reads files line by line in binary, so memory stays flat on multi-GiB logs of 512-rank jobs. Most
lines of a large log are repetitive (collective traces, topology dumps); each line costs one substring
search for ``NCCL `` and, for NCCL lines, one dictionary lookup on the first bytes of the message.
Only the rare lines that carry a fact (version, selected network, devices, connections, init,
failures, nccl-tests rows) are decoded and matched with regular expressions.

Formats covered (from NCCL's own source and real logs): ``host:pid:tid [dev] NCCL INFO ...`` with any
prefix before it (``kubectl logs --timestamps``, ``--prefix``, launcher tags); connection lines
``Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0(1)/GDRDMA`` (2.12+), ``Channel 00 : 0[1b000] ->
1[1c000] via P2P/IPC`` (2.4-2.11) and ``Ring 00 : 3 -> 4 [send] via NET/IB/0/GDRDMA`` (2.3); WARN lines
with or without a ``[timestamp]`` and ``file.cc:line`` prefix.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from fabricguard.nccl.report import (
    Evidence,
    NcclReport,
    NcclTestsRow,
    NcclTestsTable,
    NetDevice,
    decide_transport,
    net_family,
)

MAX_EVIDENCE_PER_KIND = 3

_PREFIX = re.compile(rb"([A-Za-z0-9_.\-]+):(\d+):(\d+) \[(\d+)\]\s*$")
_VERSION = re.compile(rb"NCCL version (\S+)")
_USING_NETWORK = re.compile(rb"Using network (.+?)\s*$")
_NET_USING = re.compile(rb"NET/(\S+?) ?: Using (.*?)(?:; OOB|\s*$)")
_DEVICE = re.compile(rb"\[(\d+)\]([A-Za-z0-9_.\-]+)(?::(\d+))?(?:/(IB|RoCE|ETH|Ethernet))?")
_RANKS = re.compile(rb"\brank (\d+) n[Rr]anks (\d+)")
_NNODES = re.compile(rb"\bnNodes (\d+)")
_VIA_NET = re.compile(r"^NET/(.+?)/(\d+)(?:\(\d+\))?(/GDRDMA)?(?:/Shared)?\s*$")
_GDR_LINE = re.compile(rb"GPU Direct RDMA (Enabled|Disabled)")
_OFI_PROVIDER = re.compile(rb"Selected [Pp]rovider is ([A-Za-z0-9_;\-]+)")
_NET_NOT_FOUND = re.compile(rb"[Nn]etwork (\S+) not found")
_PERF_NAME = re.compile(rb"\b([a-z_]+_perf)(?:_mpi)?\b")
_AVG_BUSBW = re.compile(rb"Avg bus bandwidth\s*:\s*([0-9.eE+\-]+|N/A)")

# Connection-line message prefixes (first 4 bytes after "NCCL INFO ").
_CONN_PREFIXES = {b"Chan", b"Ring", b"Coll", b"NVLS", b"Tree"}

# WARN text that NCCL prints without anything having failed.
_BENIGN_WARN = (b"NUMA auto balancing",)

# Lines outside NCCL's own prefix that mean the job's collectives failed.
_ERROR_MARKERS = (
    b"DistBackendError",
    b"NCCL error",
    b"ncclSystemError",
    b"ncclInternalError",
    b"ncclInvalidUsage",
    b"ncclRemoteError",
    b"ncclUnhandledCudaError",
    b"Watchdog caught collective operation timeout",
    b"Test NCCL failure",
    b"Test CUDA failure",
)


@dataclass
class _TableState:
    columns: list[str]
    table: NcclTestsTable


@dataclass
class _Scan:
    versions: dict[str, None] = field(default_factory=dict)
    networks: dict[str, None] = field(default_factory=dict)
    hosts: set[str] = field(default_factory=set)
    max_nranks: int = 0
    max_nnodes: int = 0
    net_conns: Counter[tuple[str, bool]] = field(default_factory=Counter)
    intra: Counter[str] = field(default_factory=Counter)
    devices: dict[tuple[str, int, str], NetDevice] = field(default_factory=dict)
    gdr_lines: Counter[str] = field(default_factory=Counter)
    ofi: dict[str, None] = field(default_factory=dict)
    failures: list[Evidence] = field(default_factory=list)
    failure_count: int = 0
    evidence: dict[str, list[Evidence]] = field(default_factory=dict)
    tables: list[NcclTestsTable] = field(default_factory=list)
    via_cache: dict[bytes, tuple[str, str, bool] | None] = field(default_factory=dict)
    bytes: int = 0

    def note(self, kind: str, file: str, line: int, raw: bytes, why: str) -> None:
        bucket = self.evidence.setdefault(kind, [])
        if len(bucket) < MAX_EVIDENCE_PER_KIND:
            bucket.append(Evidence(file, line, _text(raw), why))

    def add_host(self, prefix: bytes) -> None:
        h = _host_of(prefix)
        if h:
            self.hosts.add(h)

    def fail(self, file: str, line: int, raw: bytes, why: str) -> None:
        self.failure_count += 1
        if len(self.failures) < 20:
            self.failures.append(Evidence(file, line, _text(raw), why))


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace").rstrip("\r\n")[:500]


def _host_of(prefix: bytes) -> str | None:
    m = _PREFIX.search(prefix)
    return m.group(1).decode("ascii", "replace") if m else None


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
    return ("intra", head or s, False)


def _num(tok: str) -> float | None:
    try:
        return float(tok)
    except ValueError:
        return None


def _int(tok: str) -> int | None:
    try:
        return int(tok)
    except ValueError:
        try:
            f = float(tok)  # older nccl-tests print an error magnitude such as 0e+00
        except ValueError:
            return None
        return 0 if f == 0 else 1


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
        key = "wrong" if name in ("#wrong", "wrong", "error", "#error") else name
        if key in first:
            second[key] = tok
        else:
            first[key] = tok
    if "busbw" not in first:
        return None

    def wrong(d: dict[str, str]) -> int | None:
        v = d.get("wrong")
        if v is None or v == "N/A":
            return None
        return _int(v)

    root = _int(first["root"]) if "root" in first else None
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
    )


CHUNK = 8 * 1024 * 1024

# Every line that carries a fact contains "NCCL" followed by one of these. Python's regex engine
# finds the literal prefix at memchr-like speed and rejects the thousands of per-collective trace
# lines ("NCCL INFO AllReduce: opCount ...") in C, so only fact lines reach Python code.
_HIT = re.compile(
    rb"NCCL(?: INFO (?:Chan|Ring|Coll|NVLS|Usin|NET/|NCCL vers|comm |nccl|GPU Direct|Selected)"
    rb"| WARN | version | error| failure|\.cpp:\d+\] Watchdog)"
)


class _FileScan:
    """State of one file's scan: line-number cursor and the open nccl-tests table."""

    def __init__(self, path: Path, st: _Scan) -> None:
        self.st = st
        self.fname = str(path)
        self.table: _TableState | None = None
        self.perf_name: str | None = None
        if "_perf" in path.name:
            m = _PERF_NAME.search(path.name.encode())
            self.perf_name = m.group(1).decode() if m else None
        self.base_line = 1  # line number of the current chunk's first line
        self.cur_pos = 0
        self.cur_line = 1
        self.chunk = b""

    def lineno(self, pos: int) -> int:
        # Positions arrive in increasing order within a chunk, so counting is one pass at most.
        self.cur_line += self.chunk.count(b"\n", self.cur_pos, pos)
        self.cur_pos = pos
        return self.cur_line

    def line_at(self, pos: int) -> tuple[int, int]:
        start = self.chunk.rfind(b"\n", 0, pos) + 1
        end = self.chunk.find(b"\n", pos)
        return start, (len(self.chunk) if end < 0 else end)

    def feed(self, chunk: bytes) -> None:
        self.chunk = chunk
        self.cur_pos = 0
        self.cur_line = self.base_line
        events: list[tuple[int, re.Match[bytes] | None]] = [(m.start(), m) for m in _HIT.finditer(chunk)]
        if self.table is not None:
            events.append((0, None))
        pos = chunk.find(b"#")
        if pos >= 0 or self.table is not None:
            while pos >= 0:
                events.append((pos, None))
                nl = chunk.find(b"\n", pos)
                if nl < 0:
                    break
                pos = chunk.find(b"#", nl)
            # nccl-tests output is small; its CUDA failures carry no NCCL marker.
            f = chunk.find(b"Test CUDA failure")
            while f >= 0:
                events.append((f, None))
                f = chunk.find(b"Test CUDA failure", f + 1)
            events.sort(key=lambda e: e[0])
        done_until = -1
        for pos, m in events:
            if pos < done_until:
                continue
            start, end = self.line_at(pos)
            if start < done_until:
                continue
            raw = chunk[start:end]
            if m is not None:
                self.nccl_line(raw, pos - start, start)
                done_until = end
            else:
                done_until = self.other_lines(start)
        self.base_line = self.cur_line + chunk.count(b"\n", self.cur_pos)

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
            if b"NCCL" in raw:
                # An NCCL line inside a table region is still an NCCL fact.
                m = _HIT.search(raw)
                if m:
                    self.nccl_line(raw, m.start(), pos)
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
                            self.fname, self.lineno(pos), raw, f"nccl-tests counted {w} wrong elements at {row.size} B"
                        )
                    pos = end + 1
                    continue
            if b"#" in raw:
                cols = _header_columns(raw)
                if cols is not None:
                    if self.perf_name is None:
                        i = chunk.rfind(b"_perf", max(0, pos - 65536), pos)
                        if i >= 0:
                            m = _PERF_NAME.search(chunk, max(0, i - 64), i + 10)
                            if m:
                                self.perf_name = m.group(1).decode()
                    self.table = _TableState(cols, NcclTestsTable(self.perf_name, self.fname, self.lineno(pos)))
                    st.tables.append(self.table.table)
                    pos = end + 1
                    continue
                m = _AVG_BUSBW.search(raw)
                if m and self.table is not None:
                    v = m.group(1)
                    self.table.table.avg_busbw_gbps = None if v == b"N/A" else float(v)
                    self.table = None
                    self.perf_name = None
                elif b"_perf" in raw:
                    m = _PERF_NAME.search(raw)
                    if m:
                        self.perf_name = m.group(1).decode()
            elif b"Test CUDA failure" in raw:
                st.fail(self.fname, self.lineno(pos), raw, "nccl-tests: CUDA failure")
            if self.table is None:
                return end
            stray += 1
            if stray > 200:
                self.table = None
                return end
            pos = end + 1
        return n

    def nccl_line(self, raw: bytes, i: int, line_start: int) -> None:
        st, fname = self.st, self.fname
        level = raw[i + 5 : i + 9]
        if level == b"INFO":
            msg = raw[i + 10 :]
            head = msg[:4]
            if head in _CONN_PREFIXES:
                j = msg.find(b" via ")
                if j < 0:
                    if head == b"NVLS":
                        st.intra["NVLS"] += 1
                    return
                suffix = msg[j + 5 :]
                parsed = st.via_cache.get(suffix)
                if parsed is None and suffix not in st.via_cache:
                    parsed = _parse_via(suffix)
                    st.via_cache[suffix] = parsed
                if parsed is None:
                    return
                kind, name, gdr = parsed
                st.add_host(raw[:i])
                if kind == "net":
                    key = (name, gdr)
                    if key not in st.net_conns:
                        fam = net_family(name)
                        st.note(
                            f"conn:{name}:{gdr}",
                            fname,
                            self.lineno(line_start),
                            raw,
                            f"connection via NET/{name}"
                            + (" with GPUDirect RDMA" if gdr else " without GPUDirect RDMA")
                            + ("" if fam != "socket" else " (TCP sockets)"),
                        )
                    st.net_conns[key] += 1
                else:
                    if name not in st.intra:
                        st.note(
                            f"intra:{name}", fname, self.lineno(line_start), raw, f"intra-node connection via {name}"
                        )
                    st.intra[name] += 1
                return
            if head == b"Usin":
                m = _USING_NETWORK.search(msg)
                if m:
                    net = m.group(1).decode("utf-8", "replace")
                    if net not in st.networks:
                        st.networks[net] = None
                        st.note("network", fname, self.lineno(line_start), raw, f"NCCL selected network {net}")
                    st.add_host(raw[:i])
                return
            if head == b"NET/":
                _net_line(st, fname, self.lineno(line_start), raw, msg)
                return
            if head == b"NCCL":
                m = _VERSION.search(msg)
                if m:
                    self.version(m, raw, line_start)
                st.add_host(raw[:i])
                return
            if b" nranks " in msg or b" nRanks " in msg:
                m = _RANKS.search(msg)
                if m:
                    st.max_nranks = max(st.max_nranks, int(m.group(2)))
                    st.add_host(raw[:i])
                m = _NNODES.search(msg)
                if m:
                    nn = int(m.group(1))
                    if nn > st.max_nnodes:
                        st.max_nnodes = nn
                        st.note("nnodes", fname, self.lineno(line_start), raw, f"communicator spans {nn} nodes")
                return
            if b"GPU Direct RDMA" in msg:
                _gdr_line(st, fname, self.lineno(line_start), raw, msg)
            elif b"rovider" in msg:
                _ofi_line(st, fname, self.lineno(line_start), raw, msg)
            return
        if level == b"WARN":
            if any(b in raw for b in _BENIGN_WARN):
                return
            msg = raw[i + 10 :]
            m = _NET_NOT_FOUND.search(msg)
            why = "NCCL WARN"
            if b"Failed to initialize any NET plugin" in msg:
                why = "the forced network is not available: NCCL refused to fall back"
            elif m:
                why = f"network {m.group(1).decode()} not found: NCCL refused to fall back"
            st.fail(fname, self.lineno(line_start), raw, why)
            return
        if level == b"vers":
            # nccl-tests and old NCCL print the version bare, without the INFO prefix.
            m = _VERSION.search(raw, i)
            if m:
                self.version(m, raw, line_start)
            return
        for marker in _ERROR_MARKERS:
            if marker in raw:
                st.fail(fname, self.lineno(line_start), raw, f"collective failure ({marker.decode()})")
                return

    def version(self, m: re.Match[bytes], raw: bytes, line_start: int) -> None:
        v = m.group(1).decode("utf-8", "replace")
        if v not in self.st.versions:
            self.st.versions[v] = None
            self.st.note("version", self.fname, self.lineno(line_start), raw, f"NCCL {v}")


def _scan_file(path: Path, st: _Scan) -> None:
    fs = _FileScan(path, st)
    rest = b""
    with path.open("rb") as f:
        while True:
            block = f.read(CHUNK)
            if not block:
                break
            st.bytes += len(block)
            data = rest + block
            cut = data.rfind(b"\n")
            if cut < 0:
                rest = data
                continue
            rest = data[cut + 1 :]
            fs.feed(data[: cut + 1])
    if rest:
        fs.feed(rest)


def _net_line(st: _Scan, fname: str, lineno: int, raw: bytes, msg: bytes) -> None:
    if b"Using" in msg:
        m = _NET_USING.search(msg)
        if m:
            net = m.group(1).decode("utf-8", "replace")
            listed = m.group(2)
            found = False
            for dm in _DEVICE.finditer(listed):
                idx = int(dm.group(1))
                name = dm.group(2).decode()
                ll = dm.group(4).decode() if dm.group(4) else None
                if ll in ("ETH", "Ethernet"):
                    ll = "RoCE"
                if net.lower() == "socket":
                    ll = None
                key = (net, idx, name)
                if key not in st.devices:
                    st.devices[key] = NetDevice(net, idx, name, ll)
                    found = True
            if found:
                st.note(f"devices:{net}", fname, lineno, raw, f"NET/{net} devices")
        return
    if b"GPU Direct RDMA" in msg:
        _gdr_line(st, fname, lineno, raw, msg)
    elif b"rovider" in msg:
        _ofi_line(st, fname, lineno, raw, msg)


def _gdr_line(st: _Scan, fname: str, lineno: int, raw: bytes, msg: bytes) -> None:
    m = _GDR_LINE.search(msg)
    if m:
        state = m.group(1).decode()
        if not st.gdr_lines[state]:
            st.note(f"gdr:{state}", fname, lineno, raw, f"GPUDirect RDMA {state.lower()}")
        st.gdr_lines[state] += 1


def _ofi_line(st: _Scan, fname: str, lineno: int, raw: bytes, msg: bytes) -> None:
    m = _OFI_PROVIDER.search(msg)
    if m:
        p = m.group(1).decode()
        if p not in st.ofi:
            st.ofi[p] = None
            st.note("ofi", fname, lineno, raw, f"libfabric provider {p}")


def _is_text(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return b"\x00" not in head


class LogInputError(ValueError):
    """A path given to ``inspect`` that cannot be read; the message names it."""


def collect_files(paths: Iterable[Path], exclude: Iterable[str] = ()) -> list[Path]:
    """Expand directories into the text files under them, in a stable order."""
    excl = tuple(exclude)
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            for f in sorted(q for q in p.rglob("*") if q.is_file()):
                if any(f.match(x) for x in excl) or f.name.startswith("."):
                    continue
                if _is_text(f):
                    out.append(f)
        elif p.is_file():
            out.append(p)
        elif not p.exists():
            raise LogInputError(f"{p}: no such file or directory")
        else:
            raise LogInputError(f"{p}: not a regular file or directory")
    return out


def inspect_paths(paths: Iterable[Path | str], exclude: Iterable[str] = ()) -> NcclReport:
    """Scan logs (files or directories) and conclude what transport the job really used."""
    files = collect_files([Path(p) for p in paths], exclude)
    st = _Scan()
    for f in files:
        try:
            _scan_file(f, st)
        except PermissionError:
            raise LogInputError(f"{f}: permission denied") from None
        except IsADirectoryError:
            raise LogInputError(f"{f}: is a directory") from None
    return _conclude(st, [str(f) for f in files])


def _conclude(st: _Scan, files: list[str]) -> NcclReport:
    nodes: int | None
    if st.max_nnodes:
        nodes = st.max_nnodes
    elif st.hosts:
        nodes = len(st.hosts)
    else:
        nodes = None
    failed = st.failure_count > 0
    transport, reasons = decide_transport(
        st.net_conns,
        list(st.networks),
        list(st.devices.values()),
        list(st.ofi),
        nodes,
        bool(st.intra),
        failed,
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
        reasons.append(f"{st.failure_count} failure line(s); first: {st.failures[0].why}")
    evidence: list[Evidence] = []
    for kind in sorted(st.evidence):
        evidence.extend(st.evidence[kind])
    evidence.extend(st.failures[:MAX_EVIDENCE_PER_KIND])
    conns: dict[str, int] = {}
    for (name, g), n in sorted(st.net_conns.items()):
        conns[f"NET/{name}" + ("/GDRDMA" if g else "")] = n
    for name, n in sorted(st.intra.items()):
        conns[name] = n
    return NcclReport(
        files=files,
        nccl_version=list(st.versions),
        networks=list(st.networks),
        inter_node_transport=transport,
        gpudirect_rdma=gdr,
        intra_node=sorted(st.intra),
        failed=failed,
        nodes=nodes,
        ranks=st.max_nranks or None,
        net_devices=list(st.devices.values()),
        connections=conns,
        ofi_provider=list(st.ofi),
        evidence=evidence,
        reasons=reasons,
        failures=st.failures,
        nccl_tests=st.tables,
        bytes_read=st.bytes,
    )
