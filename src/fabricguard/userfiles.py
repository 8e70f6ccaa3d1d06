"""Files and folders named on the command line: checked for what they are before anything opens them.

Opening a FIFO for reading blocks until some writer appears, and ``/dev/zero`` or ``/proc/kcore`` never end,
so every input is ``stat``-ed first and must be a regular file of a sane size (``/proc`` files such as
``/proc/self/mountinfo`` are regular files and are read normally). Outputs must be a regular file, or a
path whose folder exists and is writable; ``/dev/null`` and a terminal are accepted. Every problem raises
``SourceError`` with the path and what is wrong, which the commands print as one line and exit 3.

A job's directory is written by the tenant's own pods, so what is read from it is bounded in every way:
:func:`walk_files` lists at most so many files and levels and never follows a link out of the directory,
:func:`open_in` opens a file without following a link (``O_NOFOLLOW``, then the opened file's real path is
checked against the directory) and without blocking, and :class:`LineCutter` cuts a stream into lines in
linear time, dropping (and counting) a line longer than its cap instead of buffering it.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

# A profile, a review, a mountinfo or a log file is far below this; /proc/kcore claims 128 TiB.
DEFAULT_MAX_BYTES = 4 * 1024**3


class SourceError(ValueError):
    """Input that cannot be used, with the file (and line, where known) a person must open to fix it."""

    def __init__(self, source: str, line: int | None, problem: str) -> None:
        self.source = source
        self.line = line
        self.problem = problem
        where = f"{source}:{line}" if line else source
        super().__init__(f"{where}: {problem}")


class FolderRefused(SourceError):
    """The file system refused to open or create a folder (permission, a read-only or full file system): the
    path is well formed, the storage said no (``errno`` says why)."""

    def __init__(self, source: str, problem: str, errno_: int | None) -> None:
        super().__init__(source, None, problem)
        self.errno = errno_


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "not a regular file"


def _stat(path: Path) -> os.stat_result:
    try:
        return path.stat()
    except FileNotFoundError:
        raise SourceError(str(path), None, "no such file or directory") from None
    except NotADirectoryError:
        raise SourceError(str(path), None, "a part of the path is a file, not a directory") from None
    except PermissionError:
        raise SourceError(str(path), None, "permission denied") from None
    except OSError as exc:
        raise SourceError(str(path), None, f"cannot read: {exc.strerror or exc}") from None


def input_file(path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Path:
    """``path`` when it is a readable regular file no larger than ``max_bytes``; else ``SourceError``."""
    st = _stat(path)
    if stat.S_ISDIR(st.st_mode):
        raise SourceError(str(path), None, "is a directory; pass a file")
    if not stat.S_ISREG(st.st_mode):
        raise SourceError(str(path), None, f"is {_kind(st.st_mode)}, not a regular file; pass a saved file")
    if st.st_size > max_bytes:
        raise SourceError(str(path), None, f"is {st.st_size:,} bytes, more than the {max_bytes:,} this input may be")
    if not os.access(path, os.R_OK):
        raise SourceError(str(path), None, "permission denied")
    return path


def input_dir(path: Path) -> Path:
    """``path`` when it is a readable directory; else ``SourceError`` (naming a file passed instead)."""
    st = _stat(path)
    if not stat.S_ISDIR(st.st_mode):
        what = "a file" if stat.S_ISREG(st.st_mode) else _kind(st.st_mode)
        raise SourceError(str(path), None, f"is {what}, not a directory; pass the directory")
    if not os.access(path, os.R_OK | os.X_OK):
        raise SourceError(str(path), None, "permission denied")
    return path


def read_bytes(path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES, within: Path | None = None) -> bytes:
    """A regular file's bytes (see ``input_file``); read errors name the file.

    ``within``: the file is a tenant's, found under that directory (a job's folder): it is opened once with
    :func:`open_in` (no link followed, the opened file under ``within``) and checked on that descriptor, so a
    file swapped for a link after it was listed is refused, never read."""
    if within is not None:
        with open_in(within, path, max_bytes=max_bytes) as fh:
            return _read_capped(path, fh, max_bytes)
    input_file(path, max_bytes=max_bytes)
    try:
        with path.open("rb") as fh:
            return _read_capped(path, fh, max_bytes)
    except OSError as exc:
        raise SourceError(str(path), None, f"cannot read: {exc.strerror or exc}") from None


def _read_capped(path: Path, fh: BinaryIO, max_bytes: int) -> bytes:
    try:
        data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise SourceError(str(path), None, f"cannot read: {exc.strerror or exc}") from None
    if len(data) > max_bytes:  # /proc files report size 0 and may still be long; a tenant's file may grow
        raise SourceError(str(path), None, f"is more than the {max_bytes:,} bytes this input may be")
    return data


def check_in(within: Path, path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
    """``SourceError`` unless ``path`` opens as :func:`open_in` opens it (a regular file under ``within``, no
    link) and is at most ``max_bytes``; the file is closed again (the reader opens it the same way)."""
    with open_in(within, path, max_bytes=max_bytes):
        pass


def read_text(path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES, within: Path | None = None) -> str:
    """A regular file's UTF-8 text; missing, non-regular, unreadable or non-UTF-8 files raise ``SourceError``
    (``within``: a tenant's file under that directory, read as :func:`read_bytes` says)."""
    data = read_bytes(path, max_bytes=max_bytes, within=within)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(str(path), None, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_attribute(path: Path, max_bytes: int) -> tuple[str | None, str]:
    """A host file a check reads (sysfs, procfs, debugfs): (its text, stripped and with bad UTF-8 replaced, "") or
    (None, why) for the check to quote; a FIFO, a device, a link out or an oversized file is refused unopened."""
    try:
        return read_bytes(path, max_bytes=max_bytes).decode("utf-8", errors="replace").strip(), ""
    except SourceError as exc:
        return None, exc.problem
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}"


def read_json(path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES, what: str = "") -> object:
    """A regular file's JSON; bad syntax and JSON nested deeper than Python parses are ``SourceError`` too
    (``what``: said after the problem, e.g. "; pass recorded NVML data")."""
    import json

    text = read_text(path, max_bytes=max_bytes)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceError(str(path), exc.lineno, f"not JSON ({exc.msg}){what}") from None
    except RecursionError:
        raise SourceError(str(path), None, f"JSON nested too deeply to read{what}") from None


def _file_in_the_way(path: Path) -> Path:
    """The first ancestor of ``path`` that exists and is not a directory."""
    for parent in reversed(path.parents):
        if parent.exists() and not parent.is_dir():
            return parent
    return path.parent


def _output_stat(path: Path, problem: str) -> os.stat_result | None:
    """The output path's stat, None when it does not exist yet; a file where a folder should be is named."""
    try:
        return path.stat()
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise SourceError(str(path), None, f"{_file_in_the_way(path)} is a file, not a folder") from None
    except OSError as exc:
        raise SourceError(str(path), None, f"{problem}: {exc.strerror or exc}") from None


def output_file(path: Path) -> Path:
    """``path`` when a file can be written there: it is a regular file (or /dev/null, a terminal) or absent
    in a writable directory. A directory, a FIFO (which would block until read) or a missing folder raise."""
    st = _output_stat(path, "cannot write here")
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise SourceError(str(path), None, "is a directory; pass a file name for the output")
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISCHR(st.st_mode)):
            raise SourceError(str(path), None, f"is {_kind(st.st_mode)}; pass a regular file for the output")
        if not os.access(path, os.W_OK):
            raise SourceError(str(path), None, "is not writable (permission denied)")
        return path
    parent = path.parent
    try:
        pst = parent.stat()
    except OSError:
        raise SourceError(str(path), None, f"the folder {parent} does not exist; create it first") from None
    if not stat.S_ISDIR(pst.st_mode):
        raise SourceError(str(path), None, f"{parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise SourceError(str(path), None, f"the folder {parent} is not writable (permission denied)")
    return path


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to a checked output file; write errors (a full disk) name the file."""
    output_file(path)
    try:
        with path.open("w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise SourceError(str(path), None, f"cannot write: {exc.strerror or exc}") from None


def output_dir(path: Path) -> Path:
    """``path`` as a writable directory, created (with its parents) when absent."""
    st = _output_stat(path, "cannot use as an output folder")
    if st is not None and not stat.S_ISDIR(st.st_mode):
        what = "a file" if stat.S_ISREG(st.st_mode) else _kind(st.st_mode)
        raise SourceError(str(path), None, f"is {what}, not a folder; pass a folder for the output")
    if st is None:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SourceError(str(path), None, f"cannot create this folder: {exc.strerror or exc}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise SourceError(str(path), None, "the folder is not writable (permission denied)")
    return path


# ------------------------------------------------------------------ a job's directory, written by its tenant

MAX_LINE_BYTES = 1 << 20  # a line carried across reads longer than this is dropped, never buffered
MAX_JOB_FILES = 8192  # files of one job directory read at most (a 1,024-GPU job writes 1,024 rank logs)
MAX_JOB_DEPTH = 16  # directory levels below the job directory
_MAX_ENTRIES_FACTOR = 4  # entries (files, links, folders) looked at per file allowed


@dataclass
class Walk:
    """What :func:`walk_files` found: the regular files, and every entry it did not read, with why."""

    files: list[Path] = field(default_factory=list)
    refused: list[tuple[Path, str]] = field(default_factory=list)
    truncated: str | None = None  # why the listing stopped early, when it did
    dirs: list[Path] = field(default_factory=list)  # the folders walked


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def walk_files(root: Path, *, max_files: int = MAX_JOB_FILES, max_depth: int = MAX_JOB_DEPTH,
               hidden: bool = False, raise_shortage: bool = False) -> Walk:
    """The regular files under ``root`` in a stable order, without following a link out of it.

    A link whose target stays inside ``root`` is read as its target (once); a link that leads outside, a broken
    one, and anything that is not a regular file are listed in ``refused``. Names starting with ``.`` are left
    out (unless ``hidden``); folders are entered whatever their name. At most ``max_files`` files and
    ``max_depth`` levels: ``truncated`` then says where it stopped. With ``raise_shortage``, a folder that
    cannot be listed for want of a descriptor (``EMFILE``/``ENFILE``) raises that ``OSError``: it says nothing
    about the folder, and a caller that keeps an earlier listing lists again later."""
    out = Walk()
    real_root = os.path.realpath(root)
    seen: set[str] = set()
    budget = max(max_files * _MAX_ENTRIES_FACTOR, 1024)

    def visit(d: Path, depth: int) -> bool:
        nonlocal budget
        try:
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            if raise_shortage and exc.errno in (errno.EMFILE, errno.ENFILE):
                raise
            out.refused.append((d, f"cannot list: {exc.strerror or exc}"))
            return True
        budget -= len(entries)
        if budget < 0:
            out.truncated = f"more than {max_files * _MAX_ENTRIES_FACTOR:,} entries under {root}"
            return False
        for e in entries:
            path = Path(e.path)
            try:
                if e.is_symlink():
                    target = os.path.realpath(path)
                    if not _within(target, real_root):
                        out.refused.append((path, "is a link that leads outside the job's directory: not followed"))
                        continue
                    if not os.path.isfile(target):
                        if not os.path.exists(target):
                            out.refused.append((path, "is a broken link"))
                        continue  # a link to a folder inside: the folder is walked itself
                    ino = f"inode:{os.stat(target).st_ino}"
                    if target in seen or ino in seen:
                        continue
                    if not hidden and e.name.startswith("."):
                        continue
                    seen.update((target, ino))
                    path = Path(target)
                elif e.is_dir(follow_symlinks=False):
                    if depth + 1 > max_depth:
                        out.refused.append((path, f"is more than {max_depth} folder levels deep: not read"))
                        continue
                    out.dirs.append(path)
                    if not visit(path, depth + 1):
                        return False
                    continue
                elif not e.is_file(follow_symlinks=False):
                    if not hidden and e.name.startswith("."):
                        continue
                    out.refused.append((path, f"is {_kind(e.stat(follow_symlinks=False).st_mode)}: not read"))
                    continue
                elif not hidden and e.name.startswith("."):
                    continue
                else:
                    ino = f"inode:{e.inode()}"  # free from the listing; a path under a real folder is real
                    if ino in seen:
                        continue
                    seen.add(ino)
            except OSError as exc:
                out.refused.append((path, f"cannot read: {exc.strerror or exc}"))
                continue
            if len(out.files) >= max_files:
                out.truncated = f"more than {max_files:,} files under {root}"
                return False
            out.files.append(path)
        return True

    visit(root, 0)
    out.files.sort()
    return out


def no_link_below(base: Path, path: Path) -> None:
    """``SourceError`` when a part of ``path`` below ``base`` (the Lustre claim's root: every tenant's folder is
    under it) is a link. A job's folder is read where it is, never through a link: a tenant's relative link
    (``team-a/llm -> ../team-b/other``) resolves inside the file system the controller reads whole, into another
    tenant's folder, and every check against the job's "real" folder would then hold for the wrong one. A part
    that does not exist (yet) is no link: nothing is read through it."""
    try:
        rel = path.relative_to(base)
    except ValueError:
        raise SourceError(str(path), None, f"is not under {base}: not read") from None
    cur = base
    for part in rel.parts:
        if part in ("..", "."):
            raise SourceError(str(path), None, f"names {part!r}: a job's folder is a plain path under {base}")
        cur = cur / part
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise SourceError(str(cur), None, f"cannot read: {exc.strerror or exc}") from None
        if stat.S_ISLNK(st.st_mode):
            raise SourceError(str(cur), None, "is a link: a job's folder is read where it is, never through a "
                              "link (it could lead into another tenant's folder); make it a folder")


# A folder changed this recently may change again within its mtime's granularity (Lustre keeps seconds).
LISTING_RECENT_S = 2.0


def listing_current(mtime_ns: int, listed_mtime_ns: int, listed_at: float) -> bool:
    """Whether a folder's listing (taken at ``listed_at``, ``time.time()``, when its mtime was ``listed_mtime_ns``)
    still names every entry now that its mtime is ``mtime_ns``. A listing taken within the mtime's granularity of
    the folder's last change may have missed an entry made in that same tick: it is not current."""
    return mtime_ns == listed_mtime_ns and listed_at - listed_mtime_ns / 1e9 >= LISTING_RECENT_S


@dataclass
class LinkFreeFolder:
    """A folder under ``base`` read again and again (a running job's log folder, every poll): proven with
    :func:`no_link_below`, then proven again only when what its path leads to is another folder.

    The proof costs an ``lstat`` per part of the path (nine for a job's log folder on a deep claim) and, at 50,000
    followed jobs, was most of a quiet poll; the check costs one ``stat``. A path that still leads to the proven
    folder (same device and inode) reads that folder, whatever a part of the path became meanwhile: a link to
    another tenant's folder leads to another inode, and is proven (and refused) again."""

    base: Path
    path: Path
    _proven: tuple[int, int] | None = field(default=None, repr=False)
    _str: str = field(default="", init=False, repr=False)  # the path as os.stat takes it (no __fspath__ per call)

    def __post_init__(self) -> None:
        self._str = os.fspath(self.path)

    def check(self) -> os.stat_result | None:
        """``SourceError`` as :func:`no_link_below`; quiet when the folder does not exist (yet). Returns the
        folder's ``stat`` taken by the check (None when there is none), so that a reader of the folder needs no
        ``stat`` of its own (its mtime says whether a listing is still current)."""
        try:
            now = os.stat(self._str)
        except OSError:
            now = None
        if now is not None and self._proven is not None and now.st_ino == self._proven[1] \
                and now.st_dev == self._proven[0]:
            return now
        self._proven = None
        no_link_below(self.base, self.path)
        if now is None or not stat.S_ISDIR(now.st_mode):
            return now
        try:
            after = os.lstat(self._str)  # the proof held: the path's last part is the folder itself, no link
        except OSError:
            return now
        if stat.S_ISDIR(after.st_mode) and (after.st_dev, after.st_ino) == (now.st_dev, now.st_ino):
            self._proven = (now.st_dev, now.st_ino)
        return now


@functools.lru_cache(maxsize=256)
def _real_root(root: str) -> str:
    return os.path.realpath(root)


def open_fd_in(real_root: str, path: Path | str) -> int:
    """The descriptor of ``path``, opened as :func:`open_in` does, under a directory whose real path the caller
    resolved once (``os.path.realpath``). Refusals raise ``SourceError``; running out of descriptors
    (``EMFILE``/``ENFILE``) raises the ``OSError`` itself: that says nothing about the file, and the caller
    decides (a follower reads it on a later poll)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno in (errno.EMFILE, errno.ENFILE):
            raise
        if exc.errno == errno.ELOOP:
            raise SourceError(str(path), None, "is a link: not followed") from None
        raise SourceError(str(path), None, f"cannot read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SourceError(str(path), None, f"is {_kind(st.st_mode)}, not a regular file")
        try:
            real = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            real = os.path.realpath(path)
        if not _within(real, real_root):
            raise SourceError(str(path), None, "leads outside the job's directory: not read")
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_in(root: Path, path: Path, *, max_bytes: int | None = None) -> BinaryIO:
    """Open ``path`` (a file under ``root``) for reading, never through a link out of ``root``, never blocking.

    ``O_NOFOLLOW`` refuses a link as the last part, and the opened file's real path (from ``/proc/self/fd``)
    must lie under ``root``'s, which also catches a folder swapped for a link after the listing. Only regular
    files open, and (``max_bytes``) only files no larger than that, by the descriptor's own size. Problems raise
    ``SourceError`` naming the file."""
    try:
        fd = open_fd_in(_real_root(str(root)), path)
    except OSError as exc:  # no descriptor left: for these readers, a file that cannot be read now
        raise SourceError(str(path), None, f"cannot read: {exc.strerror or exc}") from None
    if max_bytes is not None:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            os.close(fd)
            raise SourceError(str(path), None, f"is {size:,} bytes, more than the {max_bytes:,} this input may be")
    return os.fdopen(fd, "rb")


class LineCutter:
    """Cut a stream of blocks into whole lines in linear time and bounded memory.

    ``feed`` returns the complete lines a block finished (ending in a newline, possibly empty); an unfinished
    last line is kept for the next block, but only up to ``max_line`` bytes: a longer one is dropped whole (it
    stands as an empty line, so later line numbers stay right), counted in ``overlong`` with the line number of
    the first in ``overlong_line``. Lines inside one block are returned as they are (a block is bounded)."""

    def __init__(self, max_line: int = MAX_LINE_BYTES) -> None:
        self.max_line = max_line
        self._partial: list[bytes] = []
        self._partial_len = 0
        self._skipping = False
        self.overlong = 0
        self.overlong_line: int | None = None
        self._lines = 0  # newlines returned so far, but for those of blocks in _uncounted
        self._uncounted: list[bytes] = []

    @property
    def lines(self) -> int:
        """Newlines returned so far (those of a block fed with ``count=False`` are counted when first asked)."""
        if self._uncounted:
            self._lines += sum(b.count(b"\n") for b in self._uncounted)
            self._uncounted = []
        return self._lines

    @lines.setter
    def lines(self, value: int) -> None:
        self._uncounted = []
        self._lines = value

    def _drop(self) -> None:
        self._partial, self._partial_len = [], 0
        self._skipping = True
        self.overlong += 1
        if self.overlong_line is None:
            self.overlong_line = self.lines + 1

    def feed(self, block: bytes, *, count: bool = True) -> bytes:
        """The complete lines ``block`` finishes. ``count=False``: the caller may never ask for ``lines`` again
        (a file's last block), so its newlines are counted only if it does."""
        prefix = b""
        if self._skipping:
            nl = block.find(b"\n")
            if nl < 0:
                return b""
            self._skipping = False
            prefix, block = b"\n", block[nl + 1 :]
        cut = block.rfind(b"\n")
        if cut < 0:
            if self._partial_len + len(block) > self.max_line:
                self._drop()
            elif block:
                self._partial.append(block)
                self._partial_len += len(block)
            self.lines += prefix.count(b"\n")
            return prefix
        head, tail = block[: cut + 1], block[cut + 1 :]
        if self._partial:
            first = head.find(b"\n")
            if self._partial_len + first > self.max_line:
                self._partial, self._partial_len = [], 0
                self.overlong += 1
                if self.overlong_line is None:
                    self.overlong_line = self.lines + len(prefix) + 1
                head = b"\n" + head[first + 1 :]
            else:
                head = b"".join(self._partial) + head
            self._partial, self._partial_len = [], 0
        out = prefix + head
        if count:
            self.lines += out.count(b"\n")
        else:
            self._uncounted.append(out)
        if len(tail) > self.max_line:
            self._drop()
        elif tail:
            self._partial, self._partial_len = [tail], len(tail)
        return out

    def finish(self) -> bytes:
        """The unterminated last line (a file that is complete), as a line; empty when there is none."""
        if self._skipping:  # the dropped last line stands as an empty one
            self._skipping = False
            self.lines += 1
            return b"\n"
        if not self._partial:
            return b""
        rest = b"".join(self._partial) + b"\n"
        self._partial, self._partial_len = [], 0
        self.lines += 1
        return rest

    @property
    def pending(self) -> int:
        """Bytes of the unfinished last line held now."""
        return self._partial_len

    @property
    def idle(self) -> bool:
        """Nothing held between blocks: no unfinished line, no over-long line being skipped."""
        return not self._partial and not self._skipping


# Bytes a text file holds: tab, newline, carriage return, printable ASCII and everything >= 0x80 (UTF-8).
_TEXT_BYTES = bytes([9, 10, 13, *range(32, 127), *range(128, 256)])


def looks_binary(head: bytes) -> bool:
    """Whether a file's first bytes are not text. NUL bytes are ignored: a log can start with NULs (a file
    preallocated or left by a crash on Lustre) and is still a log; other control bytes above 10% say binary."""
    text = head.replace(b"\x00", b"")
    if not text:
        return False
    return len(text.translate(None, _TEXT_BYTES)) * 10 > len(text)


def dir_fd_in(root: Path, parts: Sequence[str], *, create: int | None = None,
              made: list[str] | None = None, start: int | None = None) -> int:
    """The descriptor of the directory ``root/part/part/...``, walked one part at a time, never through a link.

    Each part is opened relative to its parent's descriptor with ``O_NOFOLLOW | O_DIRECTORY`` (``openat``): no
    path is resolved twice, so a part a tenant swaps for a link between two steps is refused as well. With
    ``create`` (a mode), a missing part is made (``mkdirat``; the caller sets the final mode and owner on the
    descriptor); each part made is appended to ``made``. A part that is a link, not a directory, empty, ``.`` or
    ``..`` raises ``SourceError`` naming it, one the file system refuses to open or create
    :class:`FolderRefused`; the caller closes the descriptor it gets. ``start``: walk from this
    open directory (``root`` is then only its name in messages), so a walk can go on from where one ended."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        # The root is the caller's own mount (or a directory it opened): the walk starts from it as it is.
        fd = os.dup(start) if start is not None else os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            raise SourceError(str(root), None, f"cannot open the directory: {exc.strerror or exc}") from None
        raise FolderRefused(str(root), f"cannot open the directory: {exc.strerror or exc}", exc.errno) from None
    where = root
    try:
        for part in parts:
            if part in ("", ".", "..") or "/" in part or "\0" in part:
                raise SourceError(str(where / part), None, f"names {part!r}: each part must be a plain name")
            where = where / part
            try:
                nfd = os.open(part, flags, dir_fd=fd)
            except FileNotFoundError:
                if create is None:
                    raise SourceError(str(where), None, "no such directory") from None
                try:
                    os.mkdir(part, create, dir_fd=fd)
                    if made is not None:
                        made.append(str(where))
                except FileExistsError:
                    pass  # made meanwhile by someone else: the open below decides what it is
                except OSError as exc:
                    raise FolderRefused(str(where), f"cannot create: {exc.strerror or exc}", exc.errno) from None
                nfd = _open_part(part, flags, fd, where)
            except OSError as exc:
                nfd = _refuse_part(exc, where, part, fd)
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


def _open_part(part: str, flags: int, dir_fd: int, where: Path) -> int:
    try:
        return os.open(part, flags, dir_fd=dir_fd)
    except OSError as exc:
        return _refuse_part(exc, where, part, dir_fd)


def _refuse_part(exc: OSError, where: Path, part: str, dir_fd: int) -> int:
    link = exc.errno == errno.ELOOP
    if exc.errno == errno.ENOTDIR:  # O_DIRECTORY answers a link with ENOTDIR before O_NOFOLLOW's ELOOP
        with contextlib.suppress(OSError):
            link = stat.S_ISLNK(os.stat(part, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    if link:
        raise SourceError(str(where), None, "is a link: refused (a link here could lead anywhere on the file "
                          "system); remove it") from None
    if exc.errno == errno.ENOTDIR:
        raise SourceError(str(where), None, "is not a directory: remove it") from None
    raise FolderRefused(str(where), f"cannot open: {exc.strerror or exc}", exc.errno) from None
