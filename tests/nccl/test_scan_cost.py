"""What keeps the scanner near a plain line loop (issue 31 item 5) must not change what it reads.

Each newline is counted once (the line cutter's count carries the line numbers across chunks), each device list
is parsed once however many nodes print it, and numbers of absurd length are looked for in every 8th byte first:
these tests show the line numbers, the devices and the absurd-number refusal stay exact.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from fabricguard.nccl import inspect_paths, scan
from fabricguard.nccl.scan import _may_hold_absurd_number, _no_absurd_numbers
from fabricguard.userfiles import SourceError
from nccl_logs import write_lines

EXACT = re.compile(rb"\d{40,}")


def _refused(text: bytes) -> bool:
    try:
        _no_absurd_numbers(Path("x.log"), text, 0)
    except SourceError:
        return True
    return False


def test_the_sampled_look_for_long_numbers_agrees_with_the_exact_one() -> None:
    rnd = random.Random(31)
    trace = b"gpu-node-0:4000:4000 [0] NCCL INFO AllReduce: opCount 86 sendbuff 0x7f3a008600000 count 262144000\n"
    assert not _may_hold_absurd_number(trace * 1000)  # trace lines take the fast path
    for length in (39, 40, 41, 5000):
        for offset in range(9):  # every position of the run against the 8-byte stride
            body = bytearray(trace * 40)
            at = 1000 + offset
            body[at:at] = b"1" * length
            text = bytes(body)
            assert _refused(text) == (EXACT.search(text) is not None), (length, offset)
            assert _may_hold_absurd_number(text) or length < 40
    # Text dense with digit runs just under the length: many near misses, never a false refusal.
    dense = b" ".join(str(rnd.randrange(10**38, 10**39)).encode() for _ in range(3000))
    assert EXACT.search(dense) is None and not _refused(dense)
    assert _refused(dense + b" " + b"7" * 40)


def test_line_numbers_stay_exact_across_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A small chunk size makes the file span many chunks; the WARN's line number comes from the cutter's count.
    monkeypatch.setattr(scan, "CHUNK", 4096)
    lines = [f"node1:11:11 [0] NCCL INFO AllReduce: opCount {i:x} count 1024 datatype 7" for i in range(3000)]
    lines.insert(2345, "node1:11:11 [0] NCCL WARN Call to ibv_create_qp failed: a failure here")
    path = write_lines(tmp_path / "rank0.log", lines)
    assert path.stat().st_size > 40 * 4096
    r = inspect_paths([path])
    assert r.failed and r.failures[0].line == 2346, r.failures


def test_each_distinct_device_list_is_read_once_and_none_is_lost(tmp_path: Path) -> None:
    # 200 nodes print the same list with their own OOB address; two print another one: both lists count.
    lines = [f"node{n}:1{n}:1{n} [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; "
             f"OOB eth0:10.0.{n // 250}.{n % 250}<0>" for n in range(200)]
    lines += [f"node{n}:1{n}:1{n} [0] NCCL INFO NET/IB : Using [0]mlx5_4:1/IB [RO]; OOB eth0:10.1.0.{n}<0>"
              for n in (300, 301)]
    r = inspect_paths([write_lines(tmp_path / "init.log", lines)])
    assert sorted(d.name for d in r.net_devices) == ["mlx5_0", "mlx5_1", "mlx5_4"]
