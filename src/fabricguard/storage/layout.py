"""Where each namespace's jobs live on the shared Lustre file system, and what each namespace's claim can reach.

The layout on the file system never changes: a job's directory is the profile's ``storage.lustre.subPath``
(``{namespace}/{job}``) below the file system's root, where the controller (whose claim in its own namespace is
rooted at the file system's root) reads every job's logs. What changes per namespace is the claim's root:

- a training namespace of a Lustre pool whose driver can root a volume at a directory
  (``LustreVolume.namespaceDirectory``: FSx, Azure's ``sub-dir``, a static PV a person describes) gets a
  PersistentVolume rooted at its own directory (:func:`namespace_dir`, ``{namespace}``): its claim cannot reach
  another namespace's directories at all, and the job's directory inside it is the rest of the subPath
  (``{job}``);
- anywhere else (GKE Managed Lustre mounts only a whole instance; the install's own namespace) the claim is the
  file system's root, the job's directory is the whole subPath, and admission keeps namespaces apart: every
  mount of the claim must be the job directory's ``subPathExpr``, whose ``$(FG_NAMESPACE)`` is the pod's own
  namespace (``admission/claimmount.py``).

Pure: the profile in, paths and templates out.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabricguard.profile.model import PlatformProfile

ENV_NS = "FG_NAMESPACE"
ENV_JOB = "FG_JOB"
ENV_WORKLOAD = "FG_WORKLOAD"  # a grouped kind's name, before its group index makes FG_JOB
ENV_GROUP = "FG_GROUP"


def lustre_namespaces(profile: PlatformProfile) -> list[str]:
    """The team namespaces whose workloads mount the profile's Lustre claim (the queues of Lustre pools)."""
    out: list[str] = []
    for p in profile.spec.pools:
        if p.lustre and p.queue is not None:
            out.extend(n for n in p.queue.namespaces if n not in out)
    return out


def split_subpath(subpath: str) -> tuple[str, str] | None:
    """``subPath`` as (the namespace's directory, the job's directory inside it), both templates: the parts up to
    the first one naming ``{namespace}``, and the rest. None when it cannot be split so: ``{job}`` comes first
    (``{job}/{namespace}``) or nothing follows the namespace's part (every job of a namespace in one directory)."""
    parts = subpath.strip("/").split("/")
    at = next((i for i, part in enumerate(parts) if "{namespace}" in part), None)
    if at is None or at == len(parts) - 1 or any("{job}" in part for part in parts[: at + 1]):
        return None
    return "/".join(parts[: at + 1]), "/".join(parts[at + 1:])


def namespace_dir(profile: PlatformProfile, namespace: str) -> str | None:
    """The directory (relative to the file system's root) ``namespace``'s claim is rooted at; None: the root.

    Only the training namespaces of Lustre pools, and only where the volume's driver can root a volume at a
    directory and the subPath has a namespace directory of its own."""
    lustre = profile.spec.storage.lustre
    if lustre is None or lustre.volume is None or not lustre.volume.roots_namespaces:
        return None
    split = split_subpath(lustre.subPath)
    if split is None or namespace not in lustre_namespaces(profile):
        return None
    return split[0].replace("{namespace}", namespace)


def claim_subpath(profile: PlatformProfile, namespace: str) -> str:
    """The job's directory relative to ``namespace``'s claim, as a template of ``{namespace}`` and ``{job}``."""
    lustre = profile.spec.storage.lustre
    if lustre is None:
        raise ValueError("the profile has no spec.storage.lustre")
    if namespace_dir(profile, namespace) is None:
        return lustre.subPath
    split = split_subpath(lustre.subPath)
    assert split is not None  # namespace_dir said so
    return split[1]


def subpath_expr(template: str) -> str:
    """A subPath template as the kubelet's ``subPathExpr``: ``$(FG_NAMESPACE)`` and ``$(FG_JOB)``, which the
    webhook defines in every container that mounts the job's directory."""
    return template.replace("{namespace}", f"$({ENV_NS})").replace("{job}", f"$({ENV_JOB})")


def job_dir_expr(profile: PlatformProfile, namespace: str) -> str:
    """The job directory's ``subPathExpr`` in ``namespace``: what every GPU container mounts."""
    return subpath_expr(claim_subpath(profile, namespace))


@dataclass(frozen=True)
class JobDirMount:
    """How the job directory's init container reaches the job's directory in one namespace: it mounts the
    namespace's directory (``mount_expr``: a ``subPathExpr``; "" for the claim's root, which is the namespace's
    directory already) and walks ``path_expr`` below it one part at a time without following a link.

    Not the job's directory itself: the kubelet resolves links inside a volume before it mounts a ``subPath``
    (only the result must stay inside the volume), so a job directory that is a link (one a tenant left while the
    claim was still the root, or made under a directory of its own) would be followed to another namespace's;
    the init container's walk refuses it and the pod never starts. Where the subPath has no namespace directory
    of its own (``split_subpath`` is None) it mounts the job's directory (``path_expr`` None)."""

    mount_expr: str
    path_expr: str | None
    expect_root: str | None = None  # a rooted claim: the namespace directory it must be (jobdir.NAMESPACE_MARK)


def job_dir_mount(profile: PlatformProfile, namespace: str) -> JobDirMount:
    lustre = profile.spec.storage.lustre
    if lustre is None:
        raise ValueError("the profile has no spec.storage.lustre")
    split = split_subpath(lustre.subPath)
    if split is None:
        return JobDirMount(subpath_expr(lustre.subPath), None)
    if namespace_dir(profile, namespace) is not None:
        return JobDirMount("", subpath_expr(split[1]), subpath_expr(split[0]))
    return JobDirMount(subpath_expr(split[0]), subpath_expr(split[1]))
