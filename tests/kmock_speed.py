"""Two costs of kmock's emulator that say nothing about the code under test, removed.

kmock asks, for every request and every registered reaction, ``request in reaction's source view``, which walks
every request the emulator has recorded so far: quadratic in a replay's requests (a 15-pass replay spent 30 of its
31 CPU-seconds there). For the views our tests build (filters and priorities over the root) membership is the
filters' criteria plus the root holding the request, decided here without the walk; any other view (slices, unions,
exclusions, streams) keeps kmock's own answer.

Every Kubernetes error answer (a 404 for an object that is not there, a 409 conflict) carried the emulator's own
Python traceback in its Status ``details``, formatted with its source lines: about half of a canary replay's
answers are such errors, and formatting them was a third of the replay's CPU. A real API server sends no
traceback; those answers now carry kmock's Status with empty ``details`` (or the error's own). An error that is
not a Kubernetes one (a bug in a handler, a 500) keeps kmock's answer and its traceback.
"""

from __future__ import annotations

from typing import Any

import aiohttp.web
from kmock._internal import dsl as kmock_dsl
from kmock._internal import k8s as kmock_k8s

_kmock_contains = kmock_dsl.View.__contains__
_kmock_render_error = kmock_k8s.KubernetesScaffold._render_error


def _chain_holds(view: object, request: object) -> bool | None:
    try:
        return _walk_chain(view, request)
    except AttributeError:  # a kmock whose views are built differently: its own (slow, always right) answer
        return None


def _walk_chain(view: Any, request: object) -> bool | None:
    while True:
        if isinstance(view, kmock_dsl.Root):
            return any(r is request for r in reversed(view._requests))
        if type(view) is kmock_dsl.Filter:
            if not view.criteria(request):
                return False
        elif type(view) is not kmock_dsl.Priority:
            return None
        view = view._source


def _view_contains(self: kmock_dsl.View, item: object) -> bool:
    from kmock._internal import rendering

    if isinstance(item, rendering.Request):
        held = _chain_holds(self, item)
        if held is not None:
            return held
    return _kmock_contains(self, item)




def install() -> None:
    """Answer membership from the chain and errors without kmock's traceback from now on (idempotent)."""
    if kmock_dsl.View.__contains__ is not _view_contains:
        kmock_dsl.View.__contains__ = _view_contains  # type: ignore[method-assign]
    if kmock_k8s.KubernetesScaffold._render_error is not _render_error:
        kmock_k8s.KubernetesScaffold._render_error = _render_error  # type: ignore[method-assign]


async def _render_error(self: kmock_k8s.KubernetesScaffold, exc: Exception) -> aiohttp.web.StreamResponse:
    if not isinstance(exc, kmock_k8s.KubernetesError):
        return await _kmock_render_error(self, exc)
    return aiohttp.web.json_response({
        "apiVersion": "v1", "kind": "Status", "metadata": {}, "code": exc.status, "status": "Failure",
        "reason": exc.reason or type(exc).__name__, "message": exc.message or repr(exc), "details": exc.details or {},
    }, status=exc.status)
