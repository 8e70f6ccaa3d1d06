"""Connection lines that end the same way are counted with one ``bytes.count`` (issue 31 item 5): on any input,
hostile or not, the count must be the one the plain regex pass gives, and a whole scan must give the same report
whichever way a chunk was counted."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from fabricguard.nccl import inspect_paths, scan
from nccl_logs import IB, Job, rank_lines

HOT = b"P2P/CUMEM/read"


def _plain(chunk: bytes) -> Counter[bytes]:
    last = chunk.rfind(b"via ")
    if last < 0:
        return Counter()
    end = chunk.find(b"\n", last)
    return Counter(scan._VIA.findall(chunk, 0, len(chunk) if end < 0 else end))


def _fast(chunk: bytes, hot: bytes) -> Counter[bytes]:
    last = chunk.rfind(b"via ")
    if last < 0:
        return Counter()
    end = chunk.find(b"\n", last)
    return scan._connections(chunk, len(chunk) if end < 0 else end, hot)


PIECES = [
    b"g:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
    b"g:1:2 [0] NCCL INFO Channel 00/0 : 7[7] -> 8[0] [receive] via NET/IB/0/GDRDMA",
    b"via P2P/CUMEM/read", b"via P2P/CUMEM/read via NET/IB/0", b"via NET/IB/0 via P2P/CUMEM/read",
    b"routed via eth0 via P2P/CUMEM/read", b"via P2P/CUMEM/readX", b"via P2P/CUMEM/rea", b"via P2P/CUMEM/read\r",
    b"via P2P/CUMEM/read\x00", b"\x00via P2P/CUMEM/read", b"via via P2P/CUMEM/read", b"via SHM/direct/direct",
    b"via P2P/CUMEM/read via P2P/CUMEM/read", b"NCCL INFO AllReduce: opCount 1", b"", b"via ",
    b"via NVLS", b"via COLLNET/x", b"via P2P/IPC", b"via P2P/IPC/read",
]


@settings(max_examples=40, deadline=None)
@given(hs.lists(hs.sampled_from(PIECES), max_size=40), hs.sampled_from([b"\n", b"\r\n"]), hs.booleans(),
       hs.sampled_from([HOT, HOT + b"\r", b"NET/IB/0/GDRDMA", b"P2P/IPC", b"SHM/direct/direct"]))
def test_counting_a_hot_suffix_apart_gives_the_plain_count(
    pieces: list[bytes], eol: bytes, end_with_eol: bool, hot: bytes
) -> None:
    chunk = eol.join(pieces) + (eol if end_with_eol else b"")
    assert _fast(chunk, hot) == _plain(chunk)


@pytest.mark.parametrize("chunk", [
    b"x via P2P/CUMEM/read via P2P/CUMEM/read\n",  # two on a line: the first takes the rest of it
    b"x via NET/IB/0 via P2P/CUMEM/read\n" * 3 + b"y via P2P/CUMEM/read\n",
    b"a via P2P/CUMEM/read\nb via P2P/CUMEM/read",  # the chunk's last line without its newline
    b"a via P2P/CUMEM/read\r\nb via P2P/CUMEM/read\r\n",  # CRLF: the hot suffix has no \\r, nothing counted apart
    b"a\x00via P2P/CUMEM/read\nvia P2P/CUMEM/read\x00\n",
    b"".join(b"n via NET/IB/%d/GDRDMA\n" % i for i in range(300)) + b"via P2P/CUMEM/read\n" * 5,
])
def test_hostile_connection_lines(chunk: bytes) -> None:
    for hot in (HOT, b"NET/IB/0 via P2P/CUMEM/read"[:8], b"NET/IB/7/GDRDMA"):
        assert _fast(chunk, hot) == _plain(chunk)


def test_the_hot_suffix_is_learned_only_when_common_and_never_holds_via() -> None:
    assert scan._hot_suffix(Counter({HOT: 300, b"NET/IB/0": 20}), b"") == HOT
    assert scan._hot_suffix(Counter({HOT: 30}), b"") == b""  # too few lines to pay for a count of its own
    assert scan._hot_suffix(Counter({b"P2P/x via NET/y": 900, HOT: 300}), HOT) == HOT
    assert scan._hot_suffix(Counter({b"P2P/x via NET/y": 900}), HOT) == b""
    assert scan._hot_suffix(Counter({b"NET/IB/0": 900, HOT: 300}), HOT) == b"NET/IB/0"


def _write(path: Path, text: bytes) -> Path:
    path.write_bytes(text)
    return path


def test_a_whole_scan_reports_the_same_counted_apart_or_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Small chunks so that the hot suffix is learned in the first and used in the next ones; hostile lines
    # (two "via " on a line, CRLF, NUL bytes, a line cut at a chunk's end) sit among them.
    job = Job(nodes=4, gpus_per_node=8, fabric=IB, version="2.27.7+cuda12.9", channels=16, steps=2)
    lines = [line.encode() for r in range(32) for line in rank_lines(job, r)]
    hostile = [b"g:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read via NET/Socket/0",
               b"g:1:2 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM/read\r",
               b"g:1:2 [0] NCCL INFO Channel 02/0 : 0[0] -> 1[1] via P2P/CUMEM/read\x00",
               b"g:1:2 [0] NCCL INFO Channel 03/0 : 0[0] -> 1[1] via NET/IB/1/GDRDMA via P2P/CUMEM/read"]
    for i, h in enumerate(hostile):
        lines.insert(400 + 300 * i, h)
    text = b"\n".join(lines) + b"\n"
    log = _write(tmp_path / "job.log", text)
    monkeypatch.setattr(scan, "CHUNK", 4096)
    monkeypatch.setattr(scan, "HOT_VIA_LINES", 8)
    hots: list[bytes] = []
    counted = scan._connections

    def spy(chunk: bytes, end: int, hot: bytes) -> Counter[bytes]:
        hots.append(hot)
        return counted(chunk, end, hot)

    monkeypatch.setattr(scan, "_connections", spy)
    fast = inspect_paths([log])
    assert HOT in hots and len(hots) > 10  # the fast path ran, on many chunks
    monkeypatch.setattr(scan, "HOT_VIA_LINES", 10**9)  # never counted apart
    plain = inspect_paths([log])
    assert fast == plain
    assert fast.connections == plain.connections and fast.connections["P2P/CUMEM"] > 100
