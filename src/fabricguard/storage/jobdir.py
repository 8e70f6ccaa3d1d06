"""The job's directory on the shared file system, made writable by the workload before it starts.

The webhook mounts the job's directory (``{namespace}/{job}`` below the file system's root, ``{job}`` below a
claim rooted at the namespace's own directory: ``storage/layout.py``) into every GPU container with
``subPathExpr``. The kubelet creates a missing ``subPath`` directory itself, as root, with the volume root's mode:
a workload that runs as a non-root user (``runAsUser``, or the image's ``USER``) then cannot write its NCCL logs
or Inspector records there, and every verdict of the job is ``missing-logs``. So the webhook puts one init
container first in the pod (:func:`init_container`). It mounts the namespace's directory, never the file
system's root (admission holds every mount of the claim to the job's or, in an init container, the namespace's
directory: ``admission/claimmount.py``), and runs ``fabricguard storage job-dir`` (:func:`prepare`), which creates
the job's directory and the log directories under it and gives them to the workload, before the kubelet looks for
the GPU containers' subPath (it makes a container's subPath when that container starts).

Who gets the directory (:func:`owner_for`, from the pod as admitted):

- one ``runAsUser`` for every GPU container (the container's, else the pod's): that user owns it; with a group
  (``fsGroup``, else their one ``runAsGroup``) the group owns it too and the mode is ``2775`` (setgid: what the
  ranks write keeps the group), else ``0755``;
- no single user but a group: root owns it, the group may write (``2775``): ``fsGroup`` is a supplementary group
  of every container, ``runAsGroup`` the primary one;
- neither (the image's own ``USER``, which the webhook cannot see): ``1777``, like ``/tmp`` (anyone may write,
  only a file's owner may remove it).

Only the directories it creates or finds on the way to the job's are touched, never what is inside them (no
recursive ``chown``: a tenant's files are never followed). Every part is opened without following a link, relative
to its parent (``userfiles.dir_fd_in``): a tenant who made its job's directory a link to another tenant's
directory, or to ``/``, gets a refusal that names the link, and the pod does not start (the kubelet itself would
follow such a link inside the volume when it mounts the GPU containers' ``subPath``).

The init container runs as root with every capability dropped but ``CHOWN`` and ``FOWNER`` (both in Pod Security
baseline's list and in the compensating policy's, ``admission/podsecurity.py``), no privilege escalation and a
read-only root file system. ``FOWNER`` is needed only to change the mode of a directory another user already
owns (a rerun for a job whose user changed); ``DAC_OVERRIDE`` is not needed, because every directory it creates
under is root's. Its requests equal its limits, so a Guaranteed pod stays Guaranteed (the static CPU manager
gives exclusive cores only to those). A Lustre file system that squashes root (``root_squash``) refuses root's
``mkdir`` (root is nobody there) and ``chown``: the init container then exits 2 naming the directory; turn it off with
``storage.lustre.jobDirectory.enabled: false`` and run the images as root, or exempt the nodes from squashing.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabricguard.userfiles import FolderRefused, SourceError, dir_fd_in

INIT_CONTAINER = "fabricguard-job-dir"
JOB_MOUNT = "/fabricguard-namespace"  # the namespace's directory, in the init container only
# What the init container gets: requests equal to limits (a Guaranteed pod stays Guaranteed). Measured: the
# command's peak RSS is about 46 MiB and it takes about 0.8 s of CPU (bench/admission/README.md).
RESOURCES = {"requests": {"cpu": "500m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "128Mi"}}
CAPABILITIES = ("CHOWN", "FOWNER")
MODE_SHARED = 0o1777  # nobody known: anyone may write, only a file's owner may remove it
MODE_GROUP = 0o2775  # a group known: it may write, and new files keep it
MODE_OWNER = 0o755  # only a user known


@dataclass(frozen=True)
class Owner:
    """Who gets the job's directory: ``uid``/``gid`` (None: root's stays) and the mode."""

    uid: int | None
    gid: int | None
    mode: int

    def args(self) -> list[str]:
        out = ["--mode", f"{self.mode:04o}"]
        if self.uid is not None:
            out += ["--uid", str(self.uid)]
        if self.gid is not None:
            out += ["--gid", str(self.gid)]
        return out

    def describe(self) -> str:
        who = f"{'root' if self.uid is None else self.uid}:{'root' if self.gid is None else self.gid}"
        return f"owner {who}, mode {self.mode:04o}"


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def owner_for(pod_spec: dict[str, Any], containers: Sequence[dict[str, Any]]) -> Owner:
    """Who gets the directory, from the pod's and its GPU ``containers``' security contexts (module docstring)."""
    pod_sc = _map(pod_spec.get("securityContext"))
    uids: set[int | None] = set()
    gids: set[int | None] = set()
    for c in containers:
        sc = _map(c.get("securityContext"))
        uid = _int(sc.get("runAsUser")) if "runAsUser" in sc else _int(pod_sc.get("runAsUser"))
        gid = _int(sc.get("runAsGroup")) if "runAsGroup" in sc else _int(pod_sc.get("runAsGroup"))
        uids.add(uid)
        gids.add(gid)
    uid = next(iter(uids)) if len(uids) == 1 else None
    group = _int(pod_sc.get("fsGroup"))
    if group is None and len(gids) == 1:
        group = next(iter(gids))
    if uid is None and group is None:
        return Owner(None, None, MODE_SHARED)
    return Owner(uid, group, MODE_GROUP if group is not None else MODE_OWNER)


def security_context() -> dict[str, Any]:
    """Root with only ``CHOWN`` and ``FOWNER`` (module docstring); also the install's namespace-directory Job."""
    return {
        "runAsUser": 0,
        "runAsGroup": 0,
        "runAsNonRoot": False,  # a pod-level runAsNonRoot: true would otherwise stop it
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"], "add": list(CAPABILITIES)},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def init_container(image: str, volume: str, mount_expr: str, path_expr: str | None, subdirs: Sequence[str],
                   owner: Owner, env: list[dict[str, Any]], expect_root: str | None = None) -> dict[str, Any]:
    """The init container that prepares the job's directory: the claim ``volume`` mounted at the namespace's
    directory (``mount_expr``, a ``subPathExpr``; "" for the claim's root, the namespace's directory already), and
    ``path_expr`` below it (expanded by the kubelet from ``env``) walked without following a link
    (``storage/layout.JobDirMount``). ``command`` is set, so any image with the ``fabricguard`` CLI works
    whatever its entrypoint. ``expect_root``: the namespace directory (an expression the kubelet expands) the
    claim must be rooted at, checked by its :data:`NAMESPACE_MARK`."""
    args = ["storage", "job-dir", "--root", JOB_MOUNT]
    if expect_root:
        args += ["--expect-namespace-dir", expect_root]
    if path_expr:
        args += ["--path", path_expr]
    for d in subdirs:
        args += ["--subdir", d]
    mount: dict[str, Any] = {"name": volume, "mountPath": JOB_MOUNT}
    if mount_expr:
        mount["subPathExpr"] = mount_expr
    return {
        "name": INIT_CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["fabricguard"],
        "args": args + owner.args(),
        "env": env,
        "resources": {k: dict(v) for k, v in RESOURCES.items()},
        "securityContext": security_context(),
        "volumeMounts": [mount],
    }


# ---------------------------------------------------------------------------------------------- the command

# In each namespace directory a volume is rooted at: the directory's own name relative to the file system's root,
# written by ``storage namespace-dirs``. The init container of a namespace rooted so checks that its mount is that
# directory (``--expect-namespace-dir``): a claim still at the file system's root (an install from before, whose
# volume a person has not re-created yet) would put the job's directory where the controller never reads.
NAMESPACE_MARK = ".fabricguard-namespace"


class JobDirError(RuntimeError):
    """The file system refused a change (``chown`` under root squash, no space, read-only): names the path."""


class NotRooted(JobDirError):
    """The init container's mount of the claim is not the namespace's directory it expects (an upgrade half done)."""


def parts_of(rel: str, what: str) -> list[str]:
    """The parts of a relative path; ``SourceError`` for an absolute one or one with ``.``/``..``/empty parts."""
    if not rel or rel.startswith("/"):
        raise SourceError(what, None, f"{rel!r} must be a relative path")
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise SourceError(what, None, f"{rel!r} must name plain directories (no empty part, '.' or '..')")
    return parts


def _wanted(st: os.stat_result, owner: Owner) -> tuple[int, int, int]:
    return (st.st_uid if owner.uid is None else owner.uid, st.st_gid if owner.gid is None else owner.gid,
            owner.mode)


def _refused(where: object, what: str, code: int | None) -> JobDirError:
    hint = (" (a root-squashed file system, or a container without CAP_CHOWN/CAP_FOWNER)"
            if code in (errno.EPERM, errno.EACCES) else "")
    return JobDirError(f"{where}: {what}{hint}")


def _fs_error(where: Path, what: str, exc: OSError) -> JobDirError:
    return _refused(where, f"cannot {what}: {exc.strerror or exc}", exc.errno)


def _settle(fd: int, where: Path, owner: Owner, before: os.stat_result) -> bool:
    """Give one directory (by descriptor) its owner and mode; False when it had them before this run."""
    uid, gid, mode = _wanted(before, owner)
    st = os.fstat(fd)
    try:
        if stat.S_IMODE(st.st_mode) != mode:
            os.fchmod(fd, mode)  # before the chown: while it is still ours (FOWNER only when it is not)
        if (st.st_uid, st.st_gid) != (uid, gid):
            os.fchown(fd, uid, gid)
            if stat.S_IMODE(os.fstat(fd).st_mode) != mode:
                os.fchmod(fd, mode)  # a file system that clears setgid on chown
    except OSError as exc:
        raise _fs_error(where, f"give it {owner.describe()}", exc) from None
    return (before.st_uid, before.st_gid, stat.S_IMODE(before.st_mode)) != (uid, gid, mode)


def _missing(at: int, part: str) -> bool:
    try:
        os.stat(part, dir_fd=at, follow_symlinks=False)
    except FileNotFoundError:
        return True
    except OSError:
        return False  # the walk's own open says what it is
    return False


def prepare(root: Path, rel: str | None, subdirs: Sequence[str], owner: Owner) -> list[str]:
    """:func:`_prepare`; a folder the file system refuses to open or create (a root-squashed Lustre answers
    root's ``mkdir`` with ``EACCES``) is a :class:`JobDirError`, like a refused ``chown``: the input was fine."""
    try:
        return _prepare(root, rel, subdirs, owner)
    except FolderRefused as exc:
        raise _refused(exc.source, exc.problem, exc.errno) from None


def _prepare(root: Path, rel: str | None, subdirs: Sequence[str], owner: Owner) -> list[str]:
    """Create ``root/rel`` (``rel`` None or empty: ``root`` is the job's directory) and ``root/rel/<subdir>``
    (never through a link) and give the job's directory and
    everything under it on the way to a subdir ``owner``; the parents made on the way to the job's are root's,
    ``0755``. Returns what it did, one line per directory changed ([] when everything already was so: a rerun
    changes nothing).

    Everything is created first and given away last: root without ``DAC_OVERRIDE`` cannot create in a directory
    it gave away, so one that is someone else's already (a rerun that adds a subdir) is taken back for the moment
    (``CHOWN``) and given again at the end."""
    parts = parts_of(rel, "--path") if rel else []  # none: root is the job's directory itself
    subs = [parts_of(s, "--subdir") for s in subdirs]
    made: list[str] = []
    os.close(dir_fd_in(root, parts[:-1], create=0o755, made=made))
    done = [f"{p}: created (root, 0755)" for p in made]
    job = root.joinpath(*parts)
    held: list[tuple[int, Path, os.stat_result, bool]] = []  # descriptor, path, as found, created
    taken: list[tuple[int, int]] = []  # (descriptor, owner before) of the directories taken back
    me = os.geteuid()

    def hold(fd: int, where: Path, created: bool) -> int:
        held.append((fd, where, os.fstat(fd), created))
        return fd

    def take(fd: int, where: Path) -> None:
        uid = os.fstat(fd).st_uid
        if uid != me:
            try:
                os.fchown(fd, me, -1)
            except OSError as exc:
                raise _fs_error(where, "take it back to create in it", exc) from None
            taken.append((fd, uid))

    try:
        made.clear()
        top = hold(dir_fd_in(root, parts, create=0o700, made=made), job, bool(made))
        opened: dict[tuple[str, ...], int] = {(): top}
        for sub in subs:
            at, where = top, job
            for i, part in enumerate(sub):
                key, where = tuple(sub[: i + 1]), where / part
                if key not in opened:
                    if _missing(at, part):
                        take(at, where.parent)
                    made.clear()
                    opened[key] = hold(dir_fd_in(where.parent, [part], create=0o700, made=made, start=at), where,
                                       bool(made))
                at = opened[key]
        settled = []
        for fd, where, before, created in reversed(held):  # the deepest first: each is given away last
            if _settle(fd, where, owner, before) or created:
                settled.append(f"{where}: {'created' if created else 'changed'}, {owner.describe()}")
        done += reversed(settled)
    except BaseException:
        # A run that fails after taking a directory back gives it back: the workload keeps its own directory.
        for fd, uid in taken:
            with contextlib.suppress(OSError):
                os.fchown(fd, uid, -1)
        raise
    finally:
        for fd, *_ in held:
            os.close(fd)
    return done


def mark_namespace(root: Path, directory: str) -> bool:
    """Write :data:`NAMESPACE_MARK` in ``root/directory`` (walked without following a link); False when it already
    said so."""
    fd = dir_fd_in(root, parts_of(directory, "directory"))
    try:
        if read_namespace_mark(fd) == directory:
            return False
        try:
            out = os.open(NAMESPACE_MARK, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                          dir_fd=fd)
        except OSError as exc:
            raise _fs_error(root / directory / NAMESPACE_MARK, "write it", exc) from None
        with os.fdopen(out, "w") as fh:
            fh.write(directory + "\n")
        return True
    finally:
        os.close(fd)


def read_namespace_mark(dir_fd: int) -> str | None:
    """What :data:`NAMESPACE_MARK` says in the open directory ``dir_fd`` (never through a link, 4 KiB at most);
    None when there is none."""
    try:
        fd = os.open(NAMESPACE_MARK, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, 4096).decode("utf-8", "replace").strip()
    finally:
        os.close(fd)


def check_namespace_root(root: Path, expected: str) -> None:
    """``JobDirError`` unless ``root`` (the init container's mount of the claim) is the namespace directory
    ``expected``: its :data:`NAMESPACE_MARK` says so."""
    fd = dir_fd_in(root, [])
    try:
        got = read_namespace_mark(fd)
    finally:
        os.close(fd)
    if got != expected:
        found = f"has no {NAMESPACE_MARK}" if got is None else f"{NAMESPACE_MARK} says {got[:64]!r}"
        raise NotRooted(f"{root}: the claim is not rooted at the namespace's directory {expected!r} ({found}): a "
                        "volume from before tenant isolation, still at the file system's root; re-create the "
                        "namespace's claim and volume (docs/storage.md, 'Upgrading')")
