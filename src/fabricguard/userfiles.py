"""Files and folders named on the command line: checked for what they are before anything opens them.

Opening a FIFO for reading blocks until some writer appears, and ``/dev/zero`` or ``/proc/kcore`` never end,
so every input is ``stat``-ed first and must be a regular file of a sane size (``/proc`` files such as
``/proc/self/mountinfo`` are regular files and are read normally). Outputs must be a regular file, or a
path whose folder exists and is writable; ``/dev/null`` and a terminal are accepted. Every problem raises
``SourceError`` with the path and what is wrong, which the commands print as one line and exit 3.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

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


def read_bytes(path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """A regular file's bytes (see ``input_file``); read errors name the file."""
    input_file(path, max_bytes=max_bytes)
    try:
        with path.open("rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise SourceError(str(path), None, f"cannot read: {exc.strerror or exc}") from None
    if len(data) > max_bytes:  # /proc files report size 0 and may still be long
        raise SourceError(str(path), None, f"is more than the {max_bytes:,} bytes this input may be")
    return data


def read_text(path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """A regular file's UTF-8 text; missing, non-regular, unreadable or non-UTF-8 files raise ``SourceError``."""
    data = read_bytes(path, max_bytes=max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(str(path), None, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


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
