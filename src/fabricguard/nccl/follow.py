"""Follow a running job's NCCL logs: read only what was appended, and conclude as soon as the lines prove it.

NCCL writes its connection lines during communicator init, in the first minutes of a job; a verdict after the
job ends comes days late for a job that runs on sockets. ``LogFollower`` feeds the same scanner as
``nccl inspect`` with the complete lines appended since the last poll (a partial last line waits for its
newline), and copes with what log files do while a job runs: they grow, they are still being written (a half
line), they are rotated (renamed and recreated) or truncated (read again from the start). Nothing is read twice.

A poll costs what the minimal poller's does, for tens of thousands of jobs on a network file system where each
metadata call is a round trip: one ``stat`` per folder (the folder is listed again only when its mtime moved,
or at most every ``relist_every`` polls), one ``lstat`` per file, and only a file whose size changed is opened,
read from its offset for exactly the bytes it gained (no read at EOF) and **closed**: no descriptor is held
between polls, so a 1,100-rank job costs no more descriptors than a 2-rank one. A file's state is a few
integers while nothing is pending (its scanner and line cutter are rebuilt when it grows); a file that is
deleted leaves only its name in the report.

Files are known by inode: a log renamed inside the folder (rotation) continues from its offset under its new
name and its unterminated last line counts as a line, and the new file under the old name starts at zero. A file
whose size shrank, or whose first bytes changed when it grew, was truncated (or rewritten in place) and starts
over. An ``open`` refused for want of a descriptor (``EMFILE``) is counted (``descriptors.SHORTAGES``) and the
file is read on a later poll: never a verdict on the job.

The scanner's rule makes one conclusion final early: a single connection over sockets makes the job ``socket``,
whatever comes later. Any other transport is "so far": a later communicator could still fall back.

The directory is the tenant's: files are listed with ``userfiles.walk_files`` (bounded, never through a link out
of it) and opened with ``userfiles.open_fd_in`` (no link followed, the real path checked); a line carried across
polls is capped (``userfiles.LineCutter``). What could not be read (a link out, an unreadable file, the files
past the bound, an over-long line) is in the verdict's ``report.unread``, never dropped silently.
"""

from __future__ import annotations

import os
import stat
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from fabricguard import descriptors
from fabricguard.nccl.report import Evidence, NcclReport
from fabricguard.nccl.scan import CHUNK, FileScanner, ScanState, conclude
from fabricguard.profile.model import Transport
from fabricguard.userfiles import (
    MAX_JOB_FILES,
    LineCutter,
    SourceError,
    listing_current,
    looks_binary,
    open_fd_in,
    walk_files,
)

_SNIFF = 4096
_HEAD = 64
RELIST_EVERY = 30  # polls between two listings of a folder whose mtime did not move (a coarse-mtime safety net)


_CACHES = frozenset({"bytes_read", "via_cache", "prefix_cache", "facts_seen"})  # no bearing on a conclusion


def _shape(v: object) -> object:
    if isinstance(v, Counter):
        return len(v), sum(v.values())
    if isinstance(v, dict):
        return len(v), sum(len(x) for x in v.values() if isinstance(x, set | dict | list))
    if isinstance(v, set | list | tuple):
        return len(v)
    if v is None or isinstance(v, int | float | str | bytes):
        return v
    return id(v)


def _fingerprint(st: ScanState) -> tuple[object, ...]:
    """What a scan state holds, by the sizes of its parts: equal after lines that told nothing new (step trace
    lines), so the conclusion need not be drawn again for them (it is the costly part of a poll that read)."""
    return tuple(_shape(v) for k, v in vars(st).items() if k not in _CACHES)


class _File:
    """One log file between polls: where it is, what was read, and the parts of a scan still pending."""

    __slots__ = ("cutter", "head", "ino", "line", "moved", "offset", "path", "scan")

    def __init__(self, path: str, ino: tuple[int, int]) -> None:
        self.path = path
        self.ino = ino
        self.offset = 0
        self.line = 1  # number of the next line to read
        self.head = b""  # the file's first bytes as read: a file rewritten in place no longer starts with them
        self.scan: FileScanner | None = None  # kept only while a table or a half line spans polls
        self.cutter: LineCutter | None = None
        self.moved = False  # renamed inside the folder (rotated): complete, its last line is a line


@dataclass(frozen=True)
class LiveVerdict:
    """What the logs prove so far. ``final``: no later line can change the transport (sockets were seen)."""

    transport: Transport
    final: bool
    report: NcclReport


@dataclass(slots=True)
class PollStats:
    files: int = 0
    bytes: int = 0
    rotations: int = 0
    truncations: int = 0
    opened: int = 0  # files opened (each closed before the poll returns)
    short: int = 0  # opens refused for want of a descriptor: read on a later poll


@dataclass
class LogFollower:
    """Incremental reader of every NCCL log file under ``directory`` (one file per rank, as NCCL_DEBUG_FILE writes)."""

    directory: Path
    max_files: int = MAX_JOB_FILES
    relist_every: int = RELIST_EVERY
    total: PollStats = field(default_factory=PollStats)
    _st: ScanState | None = None  # made when the first byte arrives: a job that logs nothing yet costs nothing
    _files: dict[str, _File] = field(default_factory=dict)
    _dirs: dict[str, int] = field(default_factory=dict)  # folder -> mtime (ns) at the latest listing
    _listed_at: float = 0.0  # time.time() of the latest listing
    _since_list: int = 0
    _real_root: str = ""
    _skipped: set[str] = field(default_factory=set)  # not logs (binary)
    _done: list[str] = field(default_factory=list)  # files read and since deleted: still part of the verdict
    _unread: dict[str, str] = field(default_factory=dict)  # file -> why it (or some of its lines) is not read
    _unlisted: dict[str, str] = field(default_factory=dict)  # what the latest listing refused, with why
    _verdict: LiveVerdict | None = None  # the latest conclusion, until a poll reads something that tells
    _concluded: tuple[object, ...] = ()  # the scan state's fingerprint when it was drawn
    _fed: bool = False  # lines were fed since the latest conclusion
    _dkey: str = field(default="", init=False, repr=False)  # str(directory), as the listing keys it
    # The folder's mtime at a listing it alone needed (no subfolder) and could trust (taken long enough after the
    # folder last changed): then the listing is current exactly while the mtime is that one.
    _flat: int | None = field(default=None, init=False, repr=False)

    # ------------------------------------------------------------------ listing

    def __post_init__(self) -> None:
        self._dkey = os.fspath(self.directory)

    def _listing_stale(self, dir_stat: os.stat_result | None) -> bool:
        if not self._dirs or self._since_list >= self.relist_every:
            return True
        if dir_stat is not None and self._flat is not None:
            # One folder (the common case), listed long enough after its last change: current while its mtime holds.
            return dir_stat.st_mtime_ns != self._flat
        for d, mtime in self._dirs.items():
            if dir_stat is not None and d == self._dkey:
                st = dir_stat
            else:
                try:
                    st = os.stat(d)
                except OSError:
                    return True
            if not listing_current(st.st_mtime_ns, mtime, self._listed_at):
                return True
        return False

    def _relist(self, stats: PollStats) -> None:
        listed_at = time.time()
        try:
            dst = os.stat(self.directory)
        except OSError:
            self._dirs, self._flat = {}, None
            self._forget_all(stats)
            return
        if not stat.S_ISDIR(dst.st_mode):
            self._dirs, self._flat = {}, None
            self._forget_all(stats)
            return
        try:
            walk = walk_files(self.directory, max_files=self.max_files, raise_shortage=True)
        except OSError as exc:
            if not descriptors.is_shortage(exc):
                raise
            # No descriptor to list with: the files known so far are read, the folder is listed next poll.
            descriptors.note_shortage()
            stats.short += 1
            self._since_list = self.relist_every
            return
        self._since_list = 0
        self._listed_at = listed_at
        self._real_root = os.path.realpath(self.directory)
        dirs = {str(self.directory): dst.st_mtime_ns}
        for d in walk.dirs:
            try:
                dirs[str(d)] = os.stat(d).st_mtime_ns
            except OSError:
                continue
        self._dirs = dirs
        mtime = dirs[self._dkey]
        self._flat = mtime if len(dirs) == 1 and listing_current(mtime, mtime, listed_at) else None
        self._unlisted = {str(p): why for p, why in walk.refused}
        if walk.truncated:
            self._unlisted[str(self.directory)] = f"{walk.truncated}: the rest is not followed"
        by_ino = {f.ino: f for f in self._files.values()}
        files: dict[str, _File] = {}
        for p in walk.files:
            key = str(p)
            if key in self._skipped:
                continue
            try:
                st = os.lstat(key)
            except OSError:
                continue
            ino = (st.st_dev, st.st_ino)
            known = by_ino.pop(ino, None)
            if known is not None:
                if known.path != key:  # renamed inside the folder: the same file, read on from its offset
                    known.path, known.moved = key, True
                    stats.rotations += 1
                files[key] = known
            else:
                files[key] = _File(key, ino)
        for gone in by_ino.values():  # deleted, or moved out of the folder: complete as read
            self._retire(gone)
        self._files = files
        self._verdict = None

    def _forget_all(self, stats: PollStats) -> None:
        for f in self._files.values():
            self._retire(f)
        self._files = {}

    def _retire(self, f: _File) -> None:
        if f.cutter is not None and f.scan is not None:
            last = f.cutter.finish()
            if last:
                f.scan.feed(last, last=True)
        if f.offset or f.path in self._unread:
            self._done.append(f.path)
        self._verdict = None

    # ------------------------------------------------------------------ reading

    def _start_over(self, f: _File, stats: PollStats) -> None:
        stats.truncations += 1
        f.offset, f.line, f.head, f.scan, f.cutter = 0, 1, b"", None, None
        self._unread.pop(f"{f.path}:lines", None)

    def _read(self, f: _File, size: int, stats: PollStats) -> None:
        """Read what ``f`` gained, up to ``size`` (from its ``lstat``), through one descriptor closed at once."""
        try:
            fd = open_fd_in(self._real_root, f.path)
        except SourceError as exc:
            self._unread[f.path] = exc.problem
            self._verdict = None
            return
        except OSError as exc:
            if descriptors.is_shortage(exc):
                descriptors.note_shortage()
                stats.short += 1
                return
            self._unread[f.path] = f"cannot read: {exc.strerror or exc}"
            self._verdict = None
            return
        stats.opened += 1
        blocks: list[bytes] = []
        try:
            if f.head and f.offset and os.pread(fd, len(f.head), 0) != f.head:
                # Truncated and written again past the old size between two polls: the file starts over.
                self._start_over(f, stats)
            want = size - f.offset
            pos = f.offset
            while want > 0:
                block = os.pread(fd, min(want, CHUNK), pos)
                if not block:
                    break
                blocks.append(block)
                pos += len(block)
                want -= len(block)
        except OSError as exc:
            self._unread[f.path] = f"cannot read: {exc.strerror or exc}"
            self._verdict = None
            return
        finally:
            os.close(fd)
        if f.path in self._unread:
            del self._unread[f.path]
            self._verdict = None
        if not blocks:
            return
        if f.offset == 0 and looks_binary(blocks[0][:_SNIFF]):  # not a log (NUL bytes alone do not say so)
            self._skipped.add(f.path)
            del self._files[f.path]
            return
        self._feed(f, blocks, stats)

    def _feed(self, f: _File, blocks: list[bytes], stats: PollStats) -> None:
        if self._st is None:
            self._st = ScanState()
        st = self._st
        scan, cutter = f.scan, f.cutter
        if scan is None:
            scan = FileScanner(f.path, st)
            scan.base_line = f.line
        if cutter is None:
            cutter = LineCutter()
            cutter.lines = f.line - 1
        for block in blocks:
            if len(f.head) < _HEAD and f.offset == len(f.head):
                f.head += block[: _HEAD - len(f.head)]
            f.offset += len(block)
            stats.bytes += len(block)
            st.bytes_read += len(block)
            lines = cutter.feed(block)
            if lines:
                scan.feed(lines, next_line=cutter.lines + 1)
        if f.moved:
            # Rotated: the file is complete, its unterminated last line is a line.
            last = cutter.finish()
            if last:
                scan.feed(last, last=True)
        if cutter.overlong:
            self._unread[f"{f.path}:lines"] = (f"{cutter.overlong} line(s) longer than {cutter.max_line:,} bytes "
                                               f"not read (first at line {cutter.overlong_line})")
            self._verdict = None
        f.line = cutter.lines + 1
        # Between polls a file is a few integers, unless a half line, a dropped line or a table spans polls.
        if not cutter.idle or cutter.overlong or scan.table is not None:
            f.scan, f.cutter = scan, cutter
        else:
            f.scan = f.cutter = None
        self._fed = True

    def poll(self, dir_stat: os.stat_result | None = None) -> PollStats:
        """Read what every file gained since the last poll; returns what this poll read. ``dir_stat``: the
        folder's ``os.stat`` taken just now by the caller (``userfiles.LinkFreeFolder.check``), which spares this
        poll a ``stat`` of its own: at 50,000 jobs the same folder was asked three times per poll."""
        stats = PollStats()
        self._since_list += 1
        if self._listing_stale(dir_stat):
            self._relist(stats)
        for attempt in (0, 1):
            changed = False
            for f in list(self._files.values()):
                try:
                    st = os.lstat(f.path)
                except OSError:
                    changed = True  # gone since the listing
                    continue
                if (st.st_dev, st.st_ino) != f.ino:
                    changed = True  # replaced under its name (rotated, or a link put in its place)
                    continue
                size = st.st_size
                if size == f.offset:
                    continue
                if size < f.offset:
                    self._start_over(f, stats)
                self._read(f, size, stats)
            if not changed or attempt:
                break
            self._relist(stats)
        if self._fed and self._verdict is not None and self._st is not None \
                and _fingerprint(self._st) != self._concluded:
            self._verdict = None
        self._fed = False
        stats.files = len(self._files)
        total = self.total
        total.files = stats.files
        if stats.opened or stats.short or stats.rotations or stats.truncations:  # else nothing was read: no sums
            total.bytes += stats.bytes
            total.rotations += stats.rotations
            total.truncations += stats.truncations
            total.opened += stats.opened
            total.short += stats.short
        return stats

    def verdict(self) -> LiveVerdict:
        """The conclusion on everything read so far (kept until a poll reads or finds something new)."""
        if self._verdict is not None:
            return self._verdict
        unread = [Evidence(k.removesuffix(":lines"), 0, "", why)
                  for k, why in sorted({**self._unlisted, **self._unread}.items())]
        st = self._st if self._st is not None else ScanState()
        report = conclude(st, sorted({*self._files, *self._done}), unread)
        self._concluded = _fingerprint(st)
        transport = report.inter_node_transport
        # Sockets, or nodes that selected networks of different kinds: no later line can make the job RDMA.
        self._verdict = LiveVerdict(transport, transport in (Transport.socket, Transport.mixed) or report.failed,
                                    report)
        return self._verdict

    def close(self) -> None:
        """Forget the files (no descriptor is held between polls, so nothing is left open)."""
        self._files.clear()
        self._dirs.clear()
