"""Shared test fixtures: paths to the repository, its examples and the shared field fixtures."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import httpx._transports.default as httpx_transport
import kubernetes_validate.utils
import pytest
from kmock._internal import dsl as kmock_dsl

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
# shared/ sits beside the checkout (CI copies it there); tests that need it skip with a reason if absent.
SHARED = REPO.parent / "shared"

# kubernetes-validate reads and parses its schema files (the 5 MiB ``_definitions.json`` among them) on every call:
# 0.4 s per object. The files never change during a run, so each is read once per worker (0.05 s per object after).
kubernetes_validate.utils.schema_contents = functools.cache(kubernetes_validate.utils.schema_contents)

# kmock asks, for every request and every registered reaction, ``request in reaction's source view``, which walks
# every request the emulator has recorded so far: quadratic in a replay's requests (a 15-pass replay spent 30 of
# its 31 CPU-seconds there). For the views our tests build (filters and priorities over the root) membership is
# the filters' criteria plus the root holding the request, decided here without the walk; any other view (slices,
# unions, exclusions, streams) keeps kmock's own answer.
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


kmock_dsl.View.__contains__ = _view_contains  # type: ignore[method-assign]

# Every connection to the emulator (plain HTTP, no CA in its kubeconfig) built httpx's default TLS context, loading
# certifi's bundle: 40 ms per connection, a few seconds per replay. The default context is the same every time.
_httpx_create_ssl_context = httpx_transport.create_ssl_context


def _default_ssl_context(verify: Any = True, cert: Any = None, trust_env: bool = True) -> Any:
    if verify is True and cert is None and trust_env:
        return _DEFAULT_SSL[0] if _DEFAULT_SSL else _DEFAULT_SSL.setdefault(0, _httpx_create_ssl_context())
    return _httpx_create_ssl_context(verify=verify, cert=cert, trust_env=trust_env)


_DEFAULT_SSL: dict[int, Any] = {}
httpx_transport.create_ssl_context = _default_ssl_context


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def shared_fixtures() -> Path:
    p = SHARED / "fixtures"
    if not p.is_dir():
        pytest.skip(f"shared fixtures not found at {p}")
    return p
