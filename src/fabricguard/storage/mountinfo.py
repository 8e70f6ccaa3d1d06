"""Parse ``/proc/<pid>/mountinfo`` and tell which mount backs a path.

A training job that writes checkpoints to ``/mnt/lustre`` is only on Lustre if the mount at that
path really is ``lustre``; a missing PVC leaves the directory on the container's overlay root, and
the job "runs" while every checkpoint goes to local disk. Format: proc_pid_mountinfo(5).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

_OCTAL = re.compile(r"\\([0-7]{3})")


class MountinfoError(ValueError):
    """A mountinfo line that does not follow proc_pid_mountinfo(5)."""


@dataclass(frozen=True)
class MountEntry:
    mount_id: int
    parent_id: int
    major_minor: str
    root: str
    mount_point: str
    options: tuple[str, ...]
    optional_fields: tuple[str, ...]
    fstype: str
    source: str
    super_options: tuple[str, ...] = field(default=())
    line: int = 0

    @property
    def is_bind(self) -> bool:
        """A bind mount shows a root below the filesystem's own root (how PVC subPaths appear)."""
        return self.root not in ("/", "")

    def to_dict(self) -> dict[str, object]:
        return {
            "mount_point": self.mount_point,
            "fstype": self.fstype,
            "source": self.source,
            "root": self.root,
            "options": list(self.options),
            "bind": self.is_bind,
            "line": self.line,
        }


def _unescape(s: str) -> str:
    # The kernel escapes space, tab, newline and backslash as \040, \011, \012, \134.
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), s)


def parse_line(text: str, lineno: int = 0) -> MountEntry:
    parts = text.split()
    try:
        sep = parts.index("-", 6)
    except ValueError:
        raise MountinfoError(f"line {lineno}: no ' - ' separator before the filesystem type") from None
    if sep < 6 or len(parts) < sep + 3:
        raise MountinfoError(f"line {lineno}: expected at least 10 fields, got {len(parts)}")
    try:
        mount_id, parent_id = int(parts[0]), int(parts[1])
    except ValueError:
        raise MountinfoError(f"line {lineno}: mount and parent ids must be integers") from None
    return MountEntry(
        mount_id=mount_id,
        parent_id=parent_id,
        major_minor=parts[2],
        root=_unescape(parts[3]),
        mount_point=_unescape(parts[4]),
        options=tuple(parts[5].split(",")),
        optional_fields=tuple(parts[6:sep]),
        fstype=parts[sep + 1],
        source=_unescape(parts[sep + 2]),
        super_options=tuple(parts[sep + 3].split(",")) if len(parts) > sep + 3 else (),
        line=lineno,
    )


def parse_mountinfo(text: str) -> list[MountEntry]:
    """All mounts in order; raises ``MountinfoError`` naming the first malformed line."""
    out = []
    for i, raw in enumerate(text.splitlines(), 1):
        if raw.strip():
            out.append(parse_line(raw, i))
    return out


def _contains(mount_point: str, path: str) -> bool:
    if mount_point == "/":
        return True
    return path == mount_point or path.startswith(mount_point + "/")


def find_mount(entries: list[MountEntry], path: str) -> MountEntry | None:
    """The mount that backs ``path``: the longest mount point containing it; later mounts shadow earlier.

    ``path`` is normalised lexically (no symlinks are followed: mountinfo from another pod has no
    filesystem to resolve them against).
    """
    norm = posixpath.normpath("/" + path.lstrip("/")) if path else "/"
    best: MountEntry | None = None
    for e in entries:
        if _contains(e.mount_point, norm) and (best is None or len(e.mount_point) >= len(best.mount_point)):
            best = e
    return best


@dataclass(frozen=True)
class StorageFinding:
    path: str
    expected: str
    mount: MountEntry | None
    ok: bool
    message: str

    def to_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "expected_fstype": self.expected,
            "ok": self.ok,
            "message": self.message,
            "mount": self.mount.to_dict() if self.mount else None,
        }


def check_path(entries: list[MountEntry], path: str, expected_fstype: str = "lustre") -> StorageFinding:
    """Is ``path`` on ``expected_fstype``? The message names what it is on instead and what that means."""
    m = find_mount(entries, path)
    if m is None:
        return StorageFinding(path, expected_fstype, None, False, f"{path}: no mount covers this path")
    if m.fstype == expected_fstype:
        return StorageFinding(
            path, expected_fstype, m, True, f"{path} is on {m.fstype} ({m.source}) mounted at {m.mount_point}"
        )
    hint = ""
    if m.fstype == "overlay":
        hint = "; the volume is not mounted here, so writes land in the container's writable layer"
    elif m.fstype == "tmpfs":
        hint = "; writes consume node memory and vanish with the pod"
    elif m.fstype.startswith("nfs"):
        hint = "; NFS is not the parallel filesystem the pool expects"
    return StorageFinding(
        path,
        expected_fstype,
        m,
        False,
        f"{path} is on {m.fstype} ({m.source}) at {m.mount_point}, not {expected_fstype}{hint}",
    )
