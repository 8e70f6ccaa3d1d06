"""The process's file descriptors: the limit raised at start, what is open, and running short as a number.

A container starts with the runtime's soft ``RLIMIT_NOFILE`` (1,024 under containerd 2.x) and Python does not
raise it; the hard limit is usually far higher. :func:`raise_soft_limit` lifts the soft limit to the hard one
once, at start, and says what the process now has. Readers of tenant files (the live log followers) open, read
and close, so they hold a bounded number of descriptors; when an ``open`` still fails with ``EMFILE``/``ENFILE``
(another part of the process, or the node, holds the rest), :func:`note_shortage` counts it and the file is read
on a later poll: running short is a metric and an alert, never a verdict on a tenant's job.
"""

from __future__ import annotations

import errno
import os
import threading
from dataclasses import dataclass

try:
    import resource
except ImportError:  # pragma: no cover - not POSIX
    resource = None  # type: ignore[assignment]

SHORT = (errno.EMFILE, errno.ENFILE)


@dataclass(frozen=True)
class Limit:
    soft: int
    hard: int
    raised_from: int | None = None  # the soft limit before, when it was raised


def limit() -> Limit:
    """The process's descriptor limits now (-1 stands for unlimited)."""
    if resource is None:  # pragma: no cover
        return Limit(-1, -1)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return Limit(_n(soft), _n(hard))


def _n(v: int) -> int:
    return -1 if resource is None or v == resource.RLIM_INFINITY else int(v)


def raise_soft_limit() -> Limit:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit; returns the limits now (and the soft limit before)."""
    if resource is None:  # pragma: no cover
        return Limit(-1, -1)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        return Limit(_n(soft), _n(hard))
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):  # a hard limit the kernel refuses (above nr_open): keep what there is
        return Limit(_n(soft), _n(hard))
    return Limit(_n(hard), _n(hard), _n(soft))


def open_count() -> int:
    """Descriptors open in this process now (-1 where ``/proc/self/fd`` cannot be read)."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # the listing's own descriptor
    except OSError:
        return -1


def is_shortage(exc: BaseException) -> bool:
    """The error says the process (or the system) has no descriptor left, not that the file is unreadable."""
    return isinstance(exc, OSError) and exc.errno in SHORT


class _Shortages:
    """Opens refused for want of a descriptor, process-wide (a counter the metrics export)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.total = 0

    def note(self) -> None:
        with self._lock:
            self.total += 1


SHORTAGES = _Shortages()


def note_shortage() -> None:
    SHORTAGES.note()
