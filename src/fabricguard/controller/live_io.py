"""A running job's I/O, seen while it runs: its I/O phase records read as they are written, and what bound it.

A job logs its I/O phases beside its step times (docs/storage.md §2: ``{"phase": "checkpoint-write", "step":
500, "bytes": ..., "seconds": ...}`` in any ``*.jsonl`` of its log directory). ``verify-job`` judges them once the
job is over; :class:`JobIo` reads them while it runs, never rereading a byte: one offset and one line cutter per
file, each line parsed by ``verdict.steps.parse_record`` (the one parser of these records) and added to a
``verdict.io.IoTally`` (the one judge of them against the pool's storage floor). So a job spending 40% of its time
in checkpoint writes at a tenth of the floor is told apart, while it runs, from one whose collectives are slow.

The files are the tenant's: only regular ``*.jsonl`` files directly in the directory are read (a link, a FIFO, a
device is refused unopened: ``userfiles.open_fd_in``), at most ``MAX_FILES`` of them, ``MAX_BYTES_PER_POLL`` per
poll (the rest is read by the next), lines cut at ``MAX_LINE_BYTES``; a line that is not a record is counted and
named in ``problem``, and the rest of the file is still read.

:func:`live_bound` is the job's ``bound`` while it runs, with ``verify-job``'s meaning: ``fabric`` (its logs prove
sockets on a fabric pool, or its collectives are below the floor), ``storage`` (storage-bound I/O), both, or
``none``. :func:`io_actions` tells it once on the job: the annotations ``fabricguard.io/bound`` and
``fabricguard.io/io``, and an Event when the job becomes storage-bound and when it is no longer.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from fabricguard import objects as o
from fabricguard.controller.actions import Action, Annotate, event
from fabricguard.controller.facts import RunningJob
from fabricguard.nccl.follow import RELIST_EVERY
from fabricguard.profile.model import PlatformProfile, Transport
from fabricguard.userfiles import MAX_LINE_BYTES, LineCutter, SourceError, listing_current, open_fd_in
from fabricguard.verdict.io import IoSummary, IoTally, describe
from fabricguard.verdict.steps import IoRecord, StepInputError, parse_record, step_number

MAX_FILES = 64  # *.jsonl files followed per job (ranks that each write their own)
MAX_LISTED = 10_000  # directory entries looked at per poll
MAX_BYTES_PER_POLL = 64 * 1024**2  # per job; the rest waits for the next poll
ANN_BOUND = "fabricguard.io/bound"  # fabric | storage | fabric+storage | none, as verify-job's bound
ANN_IO = "fabricguard.io/io"  # the I/O figures: share, per phase seconds, rate and floor
ANN_IO_STATE = "fabricguard.io/io-state"  # storage-bound | ok: what was last told


@dataclass
class _Tail:
    inode: int
    offset: int = 0
    lines: int = 0
    steps: int = 0  # step records without a step number: numbered in file order, as verify-job does
    cutter: LineCutter = field(default_factory=lambda: LineCutter(MAX_LINE_BYTES))


@dataclass
class JobIo:
    """One running job's I/O phase records, followed incrementally in ``directory``."""

    directory: Path
    tally: IoTally = field(default_factory=IoTally)
    records: int = 0
    bad_lines: int = 0
    problem: str = ""  # the first line or file that could not be read, named
    skipped_files: int = 0  # *.jsonl files past MAX_FILES
    _tails: dict[str, _Tail] = field(default_factory=dict)
    _listing: tuple[int, float, list[str]] | None = None  # the folder's mtime, when listed, the names
    _since_list: int = 0

    def _note(self, why: str) -> None:
        if not self.problem:
            self.problem = why[:500]

    def _names(self, dir_stat: os.stat_result | None) -> list[str]:
        """The folder's ``*.jsonl`` files, listed again only when the folder changed (its mtime) or every
        ``RELIST_EVERY`` polls: a quiet job costs one ``stat`` here (none when the caller gave it), not a
        listing."""
        if dir_stat is not None:
            st = dir_stat
        else:
            try:
                st = os.stat(self.directory)
            except OSError:
                self._listing = None
                return []  # no directory yet: the job has not written anything
        self._since_list += 1
        if (self._listing is not None and self._since_list < RELIST_EVERY
                and listing_current(st.st_mtime_ns, self._listing[0], self._listing[1])):
            return self._listing[2]
        listed_at = time.time()
        found: list[str] = []
        try:
            with os.scandir(self.directory) as it:
                for n, entry in enumerate(it):
                    if n >= MAX_LISTED:
                        break
                    if entry.name.endswith(".jsonl"):
                        found.append(entry.name)
        except OSError:
            self._listing = None
            return []
        found.sort()
        self.skipped_files = max(0, len(found) - MAX_FILES)
        self._listing = (st.st_mtime_ns, listed_at, found[:MAX_FILES])
        self._since_list = 0
        return self._listing[2]

    def poll(self, dir_stat: os.stat_result | None = None) -> int:
        """Read what the job's JSONL files gained since the last poll; returns the bytes read. ``dir_stat``: the
        folder's ``os.stat`` the caller took just now (the log follower's folder is the same one)."""
        listing = self._listing
        if listing is not None and not listing[2] and dir_stat is not None and self._since_list + 1 < RELIST_EVERY \
                and listing_current(dir_stat.st_mtime_ns, listing[0], listing[1]):
            self._since_list += 1  # what _names does: no file, and the folder did not change (most jobs, most polls)
            return 0
        budget = MAX_BYTES_PER_POLL
        names = self._names(dir_stat)
        root = os.path.realpath(self.directory) if names else ""  # a walk of every part: only when there is a file
        for name in names:
            if budget <= 0:
                break
            budget -= self._read(root, name, budget)
        return MAX_BYTES_PER_POLL - max(budget, 0)

    def _read(self, root: str, name: str, budget: int) -> int:
        path = self.directory / name
        try:
            fd = open_fd_in(root, path)
        except SourceError as exc:
            self._note(str(exc))
            return 0
        except OSError as exc:  # no descriptor left: read on a later poll
            if exc.errno not in (errno.EMFILE, errno.ENFILE):
                self._note(f"{path}: cannot read: {exc.strerror or exc}")
            return 0
        read = 0
        with contextlib.closing(os.fdopen(fd, "rb")) as fh:
            st = os.fstat(fd)
            tail = self._tails.get(name)
            if tail is None or tail.inode != st.st_ino:
                tail = self._tails[name] = _Tail(st.st_ino)
            if st.st_size < tail.offset:  # truncated in place: read on from its new end, never twice
                tail.offset = st.st_size
                tail.cutter = LineCutter(MAX_LINE_BYTES)
            fh.seek(tail.offset)
            while read < budget:
                block = fh.read(min(1 << 20, budget - read))
                if not block:
                    break
                read += len(block)
                tail.offset += len(block)
                overlong = tail.cutter.overlong
                for line in tail.cutter.feed(block).split(b"\n")[:-1]:
                    tail.lines += 1
                    self._line(path, tail, line)
                if tail.cutter.overlong > overlong:
                    self.bad_lines += tail.cutter.overlong - overlong
                    self._note(f"{path}:{tail.cutter.overlong_line}: a line longer than {MAX_LINE_BYTES:,} bytes")
        return read

    def _line(self, path: Path, tail: _Tail, line: bytes) -> None:
        try:
            rec = parse_record(line, path, tail.lines)
            if rec is None:
                return
            if isinstance(rec, IoRecord):
                self.tally.add_io(rec)
                self.records += 1
                return
            raw, seconds = rec
            self.tally.add_step(step_number(raw, tail.steps, f"{path}:{tail.lines}"), seconds)
            tail.steps += 1
        except StepInputError as exc:
            self.bad_lines += 1
            self._note(str(exc))


def live_bound(profile: PlatformProfile, transport: Transport, busbw_below: bool, io: IoSummary | None,
               pool: str) -> str:
    """``fabric``, ``storage``, ``fabric+storage`` or ``none``: what holds the running job back so far."""
    expected = profile.pool(pool).fabric.expected_transports
    fabric = (transport in (Transport.socket, Transport.mixed) and transport not in expected) or busbw_below
    storage = io is not None and io.storage_bound
    return "fabric+storage" if fabric and storage else "fabric" if fabric else "storage" if storage else "none"


def io_actions(job: RunningJob, io: IoSummary | None, bound: str, reported: str | None,
               now: datetime) -> tuple[list[Action], str | None]:
    """What to write on the job about its I/O: (actions, the state told). Told once per change of state; a job
    that was never storage-bound is not written to."""
    if io is None:
        return [], None
    state = "storage-bound" if io.storage_bound else "ok"
    told = reported if reported is not None else o.annotations_of(job.obj).get(ANN_IO_STATE)
    if state == told or (state == "ok" and told is None):
        return [], state
    _level, text = describe(io)
    if state == "storage-bound":
        reason, warning = "FabricStorageBound", True
        detail = f"running on pool {job.pool}, {text}"
    else:
        reason, warning = "FabricStorageRecovered", False
        detail = f"no longer storage-bound on pool {job.pool}: {text}"
    return [
        Annotate(job.api_version, job.plural, job.namespace, job.name,
                 {ANN_BOUND: bound, ANN_IO: text[:1000], ANN_IO_STATE: state}),
        event(job.obj, job.api_version, job.kind, reason, detail[:1000], now, warning=warning),
    ], state


def io_row(io: IoSummary | None, bound: str) -> dict[str, Any]:
    """The running job's I/O as the pass's JSON shows it (``controller --once --format json``'s ``running``)."""
    return {"bound": bound, "io": io.to_dict() if io is not None else None}
