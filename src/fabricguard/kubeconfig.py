"""The kubeconfig checks every command runs before it connects: which file kr8s will read and what is wrong with it,
named as one line (a missing context, a cluster without a server, a certificate file that is absent), before kr8s
fails on it less clearly."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fabricguard.userfiles import SourceError


def kubeconfig_path(kubeconfig: str | None) -> Path | None:
    """The kubeconfig kr8s will read: ``--kubeconfig``, the first of ``$KUBECONFIG``, or ``~/.kube/config``
    (None when none exists, where kr8s falls back to the in-cluster service account)."""
    if kubeconfig:
        return Path(kubeconfig)
    env = os.environ.get("KUBECONFIG", "")
    for part in env.split(os.pathsep):
        if part:
            return Path(part)
    default = Path.home() / ".kube" / "config"
    return default if default.exists() else None


def check_kubeconfig(path: Path, context: str | None) -> str:
    """The API server URL of the context to use; ``SourceError`` names the file and what is wrong with it
    (not a kubeconfig, an unknown context, a cluster without a server, a certificate file that is missing)."""
    from fabricguard.userfiles import input_file
    from fabricguard.yamlsource import load_documents

    docs = load_documents(input_file(path, max_bytes=16 * 1024**2))
    cfg = docs[0] if len(docs) == 1 else None
    if not isinstance(cfg, dict) or not isinstance(cfg.get("clusters"), list):
        raise SourceError(str(path), None, "not a kubeconfig (a mapping with clusters, users and contexts)")

    def named(section: str) -> dict[str, dict[str, Any]]:
        entries = cfg.get(section) or []
        if not isinstance(entries, list):
            raise SourceError(str(path), None, f"{section} must be a list")
        return {
            str(e.get("name")): (e.get(section[:-1]) or {})
            for e in entries
            if isinstance(e, dict) and isinstance(e.get(section[:-1]) or {}, dict)
        }

    contexts, clusters, users = named("contexts"), named("clusters"), named("users")
    wanted = context or cfg.get("current-context")
    if not wanted:
        raise SourceError(str(path), None, "no current-context; pass --context NAME")
    if wanted not in contexts:
        known = ", ".join(sorted(contexts)) or "none"
        raise SourceError(str(path), None, f"context {wanted!r} is not in this kubeconfig (contexts: {known})")
    ctx = contexts[wanted]
    cluster = clusters.get(str(ctx.get("cluster")))
    if cluster is None:
        raise SourceError(str(path), None, f"context {wanted!r} names cluster {ctx.get('cluster')!r}, which is absent")
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        raise SourceError(str(path), None, f"cluster {ctx.get('cluster')!r} has no server URL")
    user = users.get(str(ctx.get("user")), {}) if ctx.get("user") else {}
    for owner, entry, key in (
        ("cluster", cluster, "certificate-authority"),
        ("user", user, "client-certificate"),
        ("user", user, "client-key"),
    ):
        ref = entry.get(key)
        if isinstance(ref, str) and ref:
            ref_path = Path(ref) if Path(ref).is_absolute() else path.parent / ref
            try:
                input_file(ref_path, max_bytes=1024**2)
            except SourceError as exc:
                raise SourceError(str(path), None, f"{owner} {key} {ref_path}: {exc.problem}") from None
    return server


def kubeconfig_problem(kubeconfig: str | None, context: str | None = None) -> str | None:
    """What is wrong with the kubeconfig kr8s would read (``--kubeconfig``, ``$KUBECONFIG``, ``~/.kube/config``),
    naming the file; None when it looks usable or when there is none (in a cluster: the service account)."""
    path = kubeconfig_path(kubeconfig)
    if path is None:
        return None
    try:
        check_kubeconfig(path, context)
    except SourceError as exc:
        return f"--kubeconfig {exc}"
    return None
