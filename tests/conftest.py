"""Shared test fixtures: paths to the repository, its examples and the shared field fixtures."""

from __future__ import annotations

import functools
from pathlib import Path

import kubernetes_validate.utils
import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
# shared/ sits beside the checkout (CI copies it there); tests that need it skip with a reason if absent.
SHARED = REPO.parent / "shared"

# kubernetes-validate reads and parses its schema files (the 5 MiB ``_definitions.json`` among them) on every call:
# 0.4 s per object. The files never change during a run, so each is read once per worker (0.05 s per object after).
kubernetes_validate.utils.schema_contents = functools.cache(kubernetes_validate.utils.schema_contents)


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def shared_fixtures() -> Path:
    p = SHARED / "fixtures"
    if not p.is_dir():
        pytest.skip(f"shared fixtures not found at {p}")
    return p
