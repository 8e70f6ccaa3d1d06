"""Follow a running job's NCCL logs: read only what was appended, and conclude as soon as the lines prove it.

NCCL writes its connection lines during communicator init, in the first minutes of a job; a verdict after the
job ends comes days late for a job that runs on sockets. ``LogFollower`` keeps, per file, an open handle, its
inode and the offset read so far, and feeds the same scanner as ``nccl inspect`` with the complete lines appended
since the last poll (a partial last line waits for its newline). It copes with what log files do while a job
runs: they grow, they are still being written (a half line), they are rotated (renamed and recreated: the old
handle is drained first) or truncated (read again from the start). Nothing is ever read twice.

The scanner's rule makes one conclusion final early: a single connection over sockets makes the job ``socket``,
whatever comes later. Any other transport is "so far": a later communicator could still fall back.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from fabricguard.nccl.report import NcclReport
from fabricguard.nccl.scan import CHUNK, FileScanner, ScanState, conclude
from fabricguard.profile.model import Transport

_SNIFF = 4096
_HEAD = 64


@dataclass
class _Tail:
    path: Path
    handle: BinaryIO
    inode: tuple[int, int]
    scan: FileScanner
    offset: int = 0
    partial: bytes = b""
    head: bytes = b""  # the file's first bytes as read: a file rewritten in place no longer starts with them

    def close(self) -> None:
        self.handle.close()


@dataclass(frozen=True)
class LiveVerdict:
    """What the logs prove so far. ``final``: no later line can change the transport (sockets were seen)."""

    transport: Transport
    final: bool
    report: NcclReport


@dataclass
class PollStats:
    files: int = 0
    bytes: int = 0
    rotations: int = 0
    truncations: int = 0


@dataclass
class LogFollower:
    """Incremental reader of every NCCL log file under ``directory`` (one file per rank, as NCCL_DEBUG_FILE writes)."""

    directory: Path
    max_files: int = 4096
    _st: ScanState = field(default_factory=ScanState)
    _tails: dict[str, _Tail] = field(default_factory=dict)
    _skipped: set[str] = field(default_factory=set)
    total: PollStats = field(default_factory=PollStats)

    def _discover(self) -> list[Path]:
        if not self.directory.is_dir():
            return []
        found = []
        for p in sorted(self.directory.rglob("*")):
            if p.name.startswith(".") or str(p) in self._skipped or not p.is_file():
                continue
            found.append(p)
            if len(found) >= self.max_files:
                break
        return found

    def _open(self, path: Path) -> _Tail | None:
        try:
            handle = path.open("rb")
            st = os.fstat(handle.fileno())
        except OSError:
            return None
        head = handle.read(_SNIFF)
        if b"\x00" in head:  # not a log: never follow a binary file
            handle.close()
            self._skipped.add(str(path))
            return None
        handle.seek(0)
        return _Tail(path, handle, (st.st_dev, st.st_ino), FileScanner(path, self._st))

    def _drain(self, tail: _Tail, stats: PollStats, *, final: bool = False) -> None:
        while True:
            block = tail.handle.read(CHUNK)
            if not block:
                break
            if len(tail.head) < _HEAD:
                tail.head += block[: _HEAD - len(tail.head)]
            tail.offset += len(block)
            stats.bytes += len(block)
            self._st.bytes_read += len(block)
            data = tail.partial + block
            cut = data.rfind(b"\n")
            if cut < 0:
                tail.partial = data
                continue
            tail.partial = data[cut + 1 :]
            tail.scan.feed(data[: cut + 1])
        if final and tail.partial:
            # A rotated file is complete: its unterminated last line is a line.
            tail.scan.feed(tail.partial + b"\n")
            tail.partial = b""

    @staticmethod
    def _same_head(tail: _Tail) -> bool:
        if not tail.head:
            return True
        try:
            return os.pread(tail.handle.fileno(), len(tail.head), 0) == tail.head
        except OSError:
            return False

    def poll(self) -> PollStats:
        """Read what every file gained since the last poll; returns what this poll read."""
        stats = PollStats()
        for path in self._discover():
            key = str(path)
            tail = self._tails.get(key)
            if tail is None:
                tail = self._open(path)
                if tail is None:
                    continue
                self._tails[key] = tail
            try:
                st = path.stat()
            except OSError:
                continue
            if (st.st_dev, st.st_ino) != tail.inode:
                # Rotated: what the old file still held is read through the old handle, then the new one starts.
                self._drain(tail, stats, final=True)
                tail.close()
                stats.rotations += 1
                fresh = self._open(path)
                if fresh is None:
                    del self._tails[key]
                    continue
                tail = self._tails[key] = fresh
            elif st.st_size < tail.offset or not self._same_head(tail):
                # Truncated in place (and maybe written again past the old size between two polls): the file
                # starts over, and so do its line numbers.
                stats.truncations += 1
                tail.handle.seek(0)
                tail.offset, tail.partial, tail.head = 0, b"", b""
                tail.scan = FileScanner(path, self._st)
            self._drain(tail, stats)
        stats.files = len(self._tails)
        self.total.files = stats.files
        self.total.bytes += stats.bytes
        self.total.rotations += stats.rotations
        self.total.truncations += stats.truncations
        return stats

    def verdict(self) -> LiveVerdict:
        """The conclusion on everything read so far (``conclude`` leaves the scanner's state as it is)."""
        report = conclude(self._st, sorted(self._tails))
        transport = report.inter_node_transport
        return LiveVerdict(transport, transport == Transport.socket or report.failed, report)

    def close(self) -> None:
        for tail in self._tails.values():
            tail.close()
        self._tails.clear()
