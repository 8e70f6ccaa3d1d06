"""Shared test fixtures: paths to the repository, its examples and the shared field fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
# shared/ sits beside the checkout (CI copies it there); tests that need it skip with a reason if absent.
SHARED = REPO.parent / "shared"


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def shared_fixtures() -> Path:
    p = SHARED / "fixtures"
    if not p.is_dir():
        pytest.skip(f"shared fixtures not found at {p}")
    return p
