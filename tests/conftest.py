"""Shared test fixtures: paths to the repository, its examples and the shared field fixtures."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import httpx._transports.default as httpx_transport
import kubernetes_validate.utils
import pytest

import kmock_speed

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
# shared/ sits beside the checkout (CI copies it there); tests that need it skip with a reason if absent.
SHARED = REPO.parent / "shared"

# kubernetes-validate reads and parses its schema files (the 5 MiB ``_definitions.json`` among them) on every call:
# 0.4 s per object. The files never change during a run, so each is read once per worker (0.05 s per object after).
kubernetes_validate.utils.schema_contents = functools.cache(kubernetes_validate.utils.schema_contents)

kmock_speed.install()  # kmock's per-request membership answered from the filter chain (see kmock_speed)

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
