"""A workload labelled for a queue its namespace has no LocalQueue of is never admitted, and Kueue says nothing.

The webhook labels a workload with its pool's queue name (``kueue.x-k8s.io/queue-name``); ``render kueue`` makes
that LocalQueue only in the namespaces ``spec.pools[].queue.namespaces`` lists (and the ClusterQueue admits only
them). In any other opted-in namespace the label points at nothing: the webhook warns on the create (``kubectl``
prints the warning), and ``fabricguard preflight`` fails the namespace.
"""

from __future__ import annotations

from fabricguard.profile.model import Pool


def missing_local_queue(pool: Pool, namespace: str) -> str | None:
    """The warning for a workload of ``pool`` in ``namespace`` when the profile gives it no LocalQueue there."""
    q = pool.queue
    if q is None or not q.namespaces or namespace in q.namespaces:
        return None
    return (f"fabricguard: namespace {namespace} has no LocalQueue {q.name} (pool {pool.name}'s queue serves "
            f"{', '.join(q.namespaces)}): this workload is labelled for it and Kueue will never admit it; add "
            f"{namespace} to spec.pools[].queue.namespaces and apply the Kueue objects (render install: 60-kueue)")
