"""Fixtures for the admission tests: every example profile and a throw-away TLS CA with a server cert."""

from __future__ import annotations

from pathlib import Path

import pytest
from admission_support import PROFILES, TlsFiles, issue, make_ca
from cryptography.hazmat.primitives import serialization

from fabricguard.profile import PlatformProfile, load_profile


@pytest.fixture(params=PROFILES, ids=[p.stem for p in PROFILES])
def profile(request: pytest.FixtureRequest) -> PlatformProfile:
    return load_profile(request.param)


@pytest.fixture
def profiles() -> dict[str, PlatformProfile]:
    return {p.stem: load_profile(p) for p in PROFILES}


@pytest.fixture
def tls(tmp_path: Path) -> TlsFiles:
    ca_key, ca_cert = make_ca()
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    (tmp_path / "ca.crt").write_bytes(ca_pem)
    issue(ca_key, ca_cert, "fabricguard-admission one", tmp_path / "tls.crt", tmp_path / "tls.key")
    return TlsFiles(tmp_path / "ca.crt", tmp_path / "tls.crt", tmp_path / "tls.key", ca_pem, ca_key, ca_cert)
