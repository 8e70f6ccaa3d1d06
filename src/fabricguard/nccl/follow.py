"""Follow a running job's NCCL logs: read only what was appended, and conclude as soon as the lines prove it.

NCCL writes its connection lines during communicator init, in the first minutes of a job; a verdict after the
job ends comes days late for a job that runs on sockets. ``LogFollower`` keeps, per file, an open handle, its
inode and the offset read so far, and feeds the same scanner as ``nccl inspect`` with the complete lines appended
since the last poll (a partial last line waits for its newline). It copes with what log files do while a job
runs: they grow, they are still being written (a half line), they are rotated (renamed and recreated: the old
handle is drained first) or truncated (read again from the start). Nothing is ever read twice.

The scanner's rule makes one conclusion final early: a single connection over sockets makes the job ``socket``,
whatever comes later. Any other transport is "so far": a later communicator could still fall back.

The directory is the tenant's: files are listed with ``userfiles.walk_files`` (bounded, never through a link out
of it) and opened with ``userfiles.open_in``; a line carried across polls is capped (``userfiles.LineCutter``),
so a 1 GiB line without a newline costs one pass over its bytes, not a growing copy per block; a file that is
deleted is drained and its descriptor closed. What could not be read (a link out, an unreadable file, the files
past the bound, an over-long line) is in the verdict's ``report.unread``, never dropped silently.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from fabricguard.nccl.report import Evidence, NcclReport
from fabricguard.nccl.scan import CHUNK, FileScanner, ScanState, conclude
from fabricguard.profile.model import Transport
from fabricguard.userfiles import MAX_JOB_FILES, LineCutter, SourceError, looks_binary, open_in, walk_files

_SNIFF = 4096
_HEAD = 64


@dataclass
class _Tail:
    path: Path
    handle: BinaryIO
    inode: tuple[int, int]
    scan: FileScanner
    offset: int = 0
    cutter: LineCutter = field(default_factory=LineCutter)
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
    max_files: int = MAX_JOB_FILES
    _st: ScanState = field(default_factory=ScanState)
    _tails: dict[str, _Tail] = field(default_factory=dict)
    _skipped: set[str] = field(default_factory=set)
    _done: list[str] = field(default_factory=list)  # files read and since deleted: still part of the verdict
    _unread: dict[str, str] = field(default_factory=dict)  # file -> why it (or some of its lines) is not read
    _unlisted: dict[str, str] = field(default_factory=dict)  # what the latest listing refused, with why
    total: PollStats = field(default_factory=PollStats)

    def _discover(self) -> list[Path]:
        if not self.directory.is_dir():
            return []
        walk = walk_files(self.directory, max_files=self.max_files)
        self._unlisted = {str(p): why for p, why in walk.refused}
        if walk.truncated:
            self._unlisted[str(self.directory)] = f"{walk.truncated}: the rest is not followed"
        return [p for p in walk.files if str(p) not in self._skipped]

    def _open(self, path: Path) -> _Tail | None:
        try:
            handle = open_in(self.directory, path)
            st = os.fstat(handle.fileno())
        except SourceError as exc:
            self._unread[str(path)] = exc.problem
            return None
        except OSError as exc:
            self._unread[str(path)] = f"cannot read: {exc.strerror or exc}"
            return None
        head = handle.read(_SNIFF)
        if looks_binary(head):  # not a log (NUL bytes alone do not say so: a log may start with them)
            handle.close()
            self._skipped.add(str(path))
            return None
        handle.seek(0)
        self._unread.pop(str(path), None)
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
            lines = tail.cutter.feed(block)
            if lines:
                tail.scan.feed(lines)
        if final:
            # A rotated or deleted file is complete: its unterminated last line is a line.
            last = tail.cutter.finish()
            if last:
                tail.scan.feed(last)
        self._note_overlong(tail)

    def _note_overlong(self, tail: _Tail) -> None:
        c = tail.cutter
        if c.overlong:
            self._unread[f"{tail.path}:lines"] = (f"{c.overlong} line(s) longer than {c.max_line:,} bytes not read "
                                                  f"(first at line {c.overlong_line})")

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
        found = self._discover()
        present = {str(p) for p in found}
        for key in [k for k in self._tails if k not in present]:
            # Deleted (or no longer listed): what it still held is read, then its descriptor is closed.
            gone = self._tails.pop(key)
            self._drain(gone, stats, final=True)
            gone.close()
            self._done.append(key)
        for path in found:
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
                tail.offset, tail.cutter, tail.head = 0, LineCutter(), b""
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
        unread = [Evidence(k.removesuffix(":lines"), 0, "", why)
                  for k, why in sorted({**self._unlisted, **self._unread}.items())]
        report = conclude(self._st, sorted({*self._tails, *self._done}), unread)
        transport = report.inter_node_transport
        # Sockets, or nodes that selected networks of different kinds: no later line can make the job RDMA.
        return LiveVerdict(transport, transport in (Transport.socket, Transport.mixed) or report.failed, report)

    def close(self) -> None:
        for tail in self._tails.values():
            tail.close()
        self._tails.clear()
