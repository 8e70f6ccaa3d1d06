"""The webhook's view of the cluster's ResourceClaimTemplates, kept by a background task (DRA pools only).

A review never waits for the API server: :meth:`TemplateCache.resolve` answers from the last list of every
ResourceClaimTemplate (all namespaces, paged, through ``fabricguard.kube``), which :meth:`TemplateCache.run` renews
every ``interval`` seconds. Before the first list, or when the last good list is older than ``max_age``, it raises
``ResolverUnavailable`` and the webhook refuses the DRA workload saying why (fail closed: a job admitted without
its template would stay Pending). ResourceClaims are not cached: a pod naming its own claim is looked at by name
only.

:data:`WEBHOOK_GRANTS` is the webhook's permission table, next to the one call it makes (the list in
:func:`kube_lister`): the client refuses a request outside it (``fabricguard.kube.Undeclared``), and
``render webhook`` / ``render install`` build the webhook's ClusterRole (and a Role, should a namespaced row ever
appear) from it (``fabricguard.kube.rbac_rules``), so the code cannot make a call its rendered role refuses.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fabricguard import names
from fabricguard.admission.claims import TEMPLATE_KIND, ResolverUnavailable
from fabricguard.rbac import Grant, Permissions, grants

log = logging.getLogger("fabricguard.admission")

API = names.DRA_API
PLURAL = "resourceclaimtemplates"

# What the webhook's code calls, and nothing else: kube_lister's paged list of every ResourceClaimTemplate (all
# namespaces, so a ClusterRole). No watch, no get: the cache relists every ``interval`` seconds.
WEBHOOK_GRANTS: frozenset[Grant] = frozenset(grants(API, PLURAL, ["list"]))


def webhook_permissions(namespace: str = "") -> Permissions:
    """The webhook's table, as the client checks it (``namespace``: where a namespaced row would apply)."""
    return Permissions(WEBHOOK_GRANTS, namespace, "admission webhook")


class TemplateCache:
    def __init__(self, lister: Callable[[], Awaitable[list[dict[str, Any]]]], *, interval: float = 20.0,
                 max_age: float = 90.0, timeout: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._lister = lister
        self.interval = interval
        self.max_age = max_age
        self.timeout = timeout
        self._clock = clock
        self._items: dict[tuple[str, str], dict[str, Any]] = {}
        self.loaded_at: float | None = None
        self.error: str | None = None

    def resolve(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        if kind != TEMPLATE_KIND:
            raise ResolverUnavailable(f"the webhook does not read {kind}s")
        if self.loaded_at is None:
            raise ResolverUnavailable(self.error or "the list of ResourceClaimTemplates has not been read yet")
        age = self._clock() - self.loaded_at
        if age > self.max_age:
            raise ResolverUnavailable(f"the list of ResourceClaimTemplates is {age:.0f} s old ({self.error})")
        return self._items.get((namespace, name))

    async def refresh(self) -> None:
        """One list; on failure the previous list stays in use until it is ``max_age`` old."""
        try:
            items = await asyncio.wait_for(self._lister(), timeout=self.timeout)
        except TimeoutError:
            self.error = f"listing ResourceClaimTemplates took over {self.timeout:g} s"
        except Exception as exc:  # the API server refused or was not reached: say so in the refusals
            self.error = f"cannot list ResourceClaimTemplates: {type(exc).__name__}: {exc}"
        else:
            self._items = {}
            for t in items:
                meta = t.get("metadata") or {} if isinstance(t, dict) else {}
                self._items[(str(meta.get("namespace", "")), str(meta.get("name", "")))] = t
            self.loaded_at = self._clock()
            self.error = None
            return
        log.warning("%s", self.error)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.refresh()
            try:
                await asyncio.wait_for(stop.wait(), timeout=self.interval)
            except TimeoutError:
                continue


def kube_lister(kubeconfig: str | None = None, *,
                permissions: Permissions | None = None) -> Callable[[], Awaitable[list[dict[str, Any]]]]:
    """A lister of every ResourceClaimTemplate through the Kubernetes edge (the pod's service account), checked
    against :data:`WEBHOOK_GRANTS` (or ``permissions``); it connects on first use, inside the server's event loop."""
    from fabricguard.kube import Kube

    conn: list[Kube] = []
    perms = permissions or webhook_permissions()

    async def lister() -> list[dict[str, Any]]:
        if not conn:
            conn.append(await Kube.connect(kubeconfig, permissions=perms))
        return await conn[0].list(API, PLURAL)

    return lister
