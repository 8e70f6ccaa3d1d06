"""Shared test fixtures: paths to the repository, its examples and the shared field fixtures."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio.abc
import httpcore._backends.anyio as httpcore_anyio
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

# httpcore asks every pooled connection "has the server closed you?" before and after each request: the answer
# polls the connection's socket, which anyio hands out by building its whole attribute map (a getpeername call
# and a dict of lambdas) each time. The socket of a stream never changes: it is looked up once per stream, and
# the poll itself still happens on every check. A canary replay chunk: 8.1 -> 6.7 CPU-s (mean of three).
_httpcore_extra_info = httpcore_anyio.AnyIOStream.get_extra_info


def _stream_extra_info(self: Any, info: str) -> Any:
    if info != "is_readable":
        return _httpcore_extra_info(self, info)
    sock = self.__dict__.get("_fg_raw_socket")
    if sock is None:
        sock = self.__dict__["_fg_raw_socket"] = self._stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
    return httpcore_anyio.is_socket_readable(sock)


httpcore_anyio.AnyIOStream.get_extra_info = _stream_extra_info  # type: ignore[method-assign]


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def cli_zygote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """``fabricguard`` and ``torchrun`` forked from one Python that preloaded torch (tests/zygote.py), one per
    test worker: the network-namespace tests start a dozen of them, each a torch import otherwise."""
    from zygote import zygote

    with zygote(tmp_path_factory.mktemp("zygote")) as z:
        yield z


@pytest.fixture
def shared_fixtures() -> Path:
    p = SHARED / "fixtures"
    if not p.is_dir():
        pytest.skip(f"shared fixtures not found at {p}")
    return p


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, each worker's first tests are its share of the ``slow`` ones.

    The work-stealing scheduler hands each of the N workers a contiguous chunk of the collection and later moves
    tests from the end of the longest queue to idle workers. A slow test (real torch ranks, a Chromium shot, a
    replay of dozens of fault plans) that sat late in a chunk started last and was the run's tail on two cores;
    at the front of the chunks they start first and the short tests fill around them. Every test still runs once."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    slow = [it for it in items if it.get_closest_marker("slow") is not None]
    if workers <= 1 or not slow:
        return
    fast = [it for it in items if it.get_closest_marker("slow") is None]
    ordered: list[pytest.Item] = []
    remaining = len(items)
    for i in range(workers):  # the scheduler's first split: remaining // workers left, in turn
        size = remaining // (workers - i)
        remaining -= size
        mine = slow[i::workers]
        take = max(0, size - len(mine))
        ordered += mine + fast[:take]
        del fast[:take]
    ordered += fast
    assert len(ordered) == len(items)
    items[:] = ordered
