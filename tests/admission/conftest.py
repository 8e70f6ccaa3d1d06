"""Fixtures for the admission tests: every example profile and a throw-away TLS CA with a server cert."""

from __future__ import annotations

from pathlib import Path

import pytest
from admission_support import PROFILES, TlsFiles, make_tls

from fabricguard.profile import PlatformProfile, load_profile


@pytest.fixture(params=PROFILES, ids=[p.stem for p in PROFILES])
def profile(request: pytest.FixtureRequest) -> PlatformProfile:
    return load_profile(request.param)


@pytest.fixture
def profiles() -> dict[str, PlatformProfile]:
    return {p.stem: load_profile(p) for p in PROFILES}


@pytest.fixture
def tls(tmp_path: Path) -> TlsFiles:
    return make_tls(tmp_path)
