"""kmock asks, for every request and every registered reaction, ``request in reaction's source view``, which walks
every request the emulator has recorded so far: quadratic in a replay's requests (a 15-pass replay spent 30 of its
31 CPU-seconds there). For the views our tests build (filters and priorities over the root) membership is the
filters' criteria plus the root holding the request, decided here without the walk; any other view (slices, unions,
exclusions, streams) keeps kmock's own answer.
"""

from __future__ import annotations

from typing import Any

from kmock._internal import dsl as kmock_dsl

_kmock_contains = kmock_dsl.View.__contains__


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
    """Answer membership from the chain from now on (idempotent)."""
    if kmock_dsl.View.__contains__ is not _view_contains:
        kmock_dsl.View.__contains__ = _view_contains  # type: ignore[method-assign]
