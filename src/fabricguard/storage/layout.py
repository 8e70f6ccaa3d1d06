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

from fabricguard.profile.model import PlatformProfile

ENV_NS = "FG_NAMESPACE"
ENV_JOB = "FG_JOB"


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
    """The ``subPathExpr`` every mount of the claim in ``namespace`` must have."""
    return subpath_expr(claim_subpath(profile, namespace))
