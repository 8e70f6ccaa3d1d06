"""Shared fixtures for the doctor tests: the fixed clock and the incident's profile and objects."""

from __future__ import annotations

import pytest
from doctor_support import gen

from fabricguard.profile import PlatformProfile, loads_profile


@pytest.fixture()
def now():
    return gen.NOW


@pytest.fixture()
def prod_profile() -> PlatformProfile:
    return loads_profile(gen.INCIDENT_PROFILE.format(name="gh200-prod", env="production"))


@pytest.fixture()
def prod_lists() -> dict:
    return gen.incident("production")


@pytest.fixture()
def stag_lists() -> dict:
    return gen.incident("staging")
